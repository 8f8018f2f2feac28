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

# Below this many values the plain check is as fast as any.
_SMALL = 4096


def all_finite(A: npt.NDArray[Any]) -> bool:
    """Whether every value of A is finite, for a large float64 array in one pass.

    Sums are finite only if every value summed is: a NaN or an infinity makes
    its sum NaN or infinite, and nothing brings it back. So the sums of A's rows
    (a matrix-vector product with ones, one BLAS pass) or of a vector (numpy's
    reduction) decide, without the mask as large as A that
    ``np.isfinite(A).all()`` writes. Only when a sum overflows (finite values
    near the float64 limit) is every value checked, exactly.

    >>> all_finite(np.ones((100, 100))), all_finite(np.full((100, 100), 1e308))
    (True, True)
    >>> B = np.ones((100, 100)); B[50, 7] = np.nan
    >>> all_finite(B), all_finite(np.array([1.0, -np.inf]))
    (False, False)
    """
    a = np.asarray(A)
    if a.dtype != np.float64 or a.size < _SMALL or a.ndim not in (1, 2):
        return bool(np.isfinite(a).all())
    with np.errstate(over="ignore", invalid="ignore"):
        # A vector's own sum: a product with ones would allocate another vector as long.
        sums = a @ np.ones(a.shape[1]) if a.ndim == 2 else np.add.reduce(a)
    if np.isfinite(sums).all():
        return True
    return bool(np.isfinite(a).all())


def require_finite(A: npt.NDArray[Any], what: str) -> None:
    """Raise NumericallyUnstable unless every value of A is finite.

    >>> require_finite(np.ones((2, 2)), "W")
    >>> require_finite(np.array([1.0, np.inf]), "W")
    Traceback (most recent call last):
    ...
    featurestream.errors.NumericallyUnstable: W is not finite (a value overflowed float64): \
the data is too large in magnitude to be computed on.
    """
    if not all_finite(A):
        raise NumericallyUnstable(
            f"{what} is not finite (a value overflowed float64): the data is too large "
            "in magnitude to be computed on."
        )


__all__ = ["all_finite", "require_finite"]
