"""The guard in front of every LAPACK kernel that runs on a stream's data.

An eigensolver or SVD given NaN or an infinity may fail to converge, and some
builds iterate without end holding the GIL. Input data is checked finite when
it arrives, and the engine never commits a state that is not finite; values
that overflow float64 inside a computation (1e300 squared) are the rest.
Every such kernel is fed through :func:`require_finite`, which refuses with
``NumericallyUnstable`` (422) instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream.errors import NumericallyUnstable


def require_finite(A: npt.NDArray[Any], what: str) -> None:
    """Raise NumericallyUnstable unless every value of A is finite.

    >>> require_finite(np.ones((2, 2)), "W")
    >>> require_finite(np.array([1.0, np.inf]), "W")
    Traceback (most recent call last):
    ...
    featurestream.errors.NumericallyUnstable: W is not finite (a value overflowed float64): \
the data is too large in magnitude to be computed on.
    """
    if not np.isfinite(A).all():
        raise NumericallyUnstable(
            f"{what} is not finite (a value overflowed float64): the data is too large "
            "in magnitude to be computed on."
        )


__all__ = ["require_finite"]
