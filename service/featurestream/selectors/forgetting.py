"""Forgetting by a half-life, shared by the instance-stream selectors (docs/algorithms.md).

With ``half_life`` h (instances), lambda = 2^(-1/h): after each instance a
selector's accumulated statistics are multiplied by lambda before the
instance's own contribution is added, so an instance's weight halves after h
newer ones. A batch of b instances is b such steps: what was accumulated
before it is multiplied by lambda^b, and its row i (of b, in arrival order) by
lambda^(b - 1 - i). ``None`` means no forgetting (every weight 1).
"""

from __future__ import annotations

import numpy as np

from featurestream.selectors.base import Vector
from featurestream.selectors.params import Interval, NoneOr

# The constraint and description every selector with a half_life declares.
HALF_LIFE = NoneOr(Interval(float, 0.0, None, "neither"))
HALF_LIFE_DESCRIPTION = (
    "h, instances after which an instance's weight halves; null: no forgetting (the whole history)"
)


def retention(half_life: float | None, n: int) -> float:
    """lambda^n = 2^(-n / h): the weight left after n instances (1 with no half-life).

    >>> retention(10.0, 10), retention(10.0, 20), retention(None, 5)
    (0.5, 0.25, 1.0)
    """
    if half_life is None:
        return 1.0
    return float(2.0 ** (-n / half_life))


def row_weights(half_life: float | None, n: int) -> Vector:
    """The weights of a batch's n rows at its end: lambda^(n - 1 - i) for row i.

    >>> row_weights(1.0, 3).tolist()
    [0.25, 0.5, 1.0]
    """
    ages = np.arange(n - 1, -1, -1, dtype=np.float64)
    if half_life is None:
        return np.ones(n)
    return np.asarray(np.exp2(-ages / half_life), dtype=np.float64)


__all__ = ["HALF_LIFE", "HALF_LIFE_DESCRIPTION", "retention", "row_weights"]
