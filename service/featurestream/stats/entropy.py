"""Entropy, mutual information and symmetrical uncertainty of discrete columns.

docs/algorithms.md, "Symmetrical uncertainty": SU(a, b) = 2 I(a; b) / (H(a) + H(b)),
entropies in nats from empirical frequencies; SU = 0 when H(a) + H(b) = 0.
Columns hold integer codes 0..L-1 (stored as float64 or ints).

Each value is computed pair by pair with one fixed sequence of operations, so
it does not depend on how arrivals were batched.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def as_codes(x: npt.ArrayLike) -> IntArray:
    """Integer codes of a discrete column."""
    return np.asarray(x).astype(np.int64, copy=False)


def _entropy_from_counts(counts: npt.NDArray[np.int64], n: int) -> float:
    c = counts[counts > 0].astype(np.float64)
    p = c / n
    return float(-(p * np.log(p)).sum())


def entropy(a: npt.ArrayLike) -> float:
    """Empirical entropy H(a) in nats.

    >>> round(entropy([0, 0, 1, 1]), 12) == round(float(np.log(2)), 12)
    True
    """
    codes = as_codes(a)
    return _entropy_from_counts(np.bincount(codes), codes.shape[0])


def joint_entropy(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Empirical joint entropy H(a, b) in nats."""
    ca, cb = as_codes(a), as_codes(b)
    lb = int(cb.max()) + 1 if cb.size else 1
    return _entropy_from_counts(np.bincount(ca * lb + cb), ca.shape[0])


def mutual_information(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """I(a; b) = H(a) + H(b) - H(a, b), in nats."""
    return entropy(a) + entropy(b) - joint_entropy(a, b)


def symmetrical_uncertainty(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """SU(a, b) = 2 I(a; b) / (H(a) + H(b)), 0 when both entropies are 0.

    >>> symmetrical_uncertainty([0, 1, 0, 1], [1, 0, 1, 0])
    1.0
    >>> symmetrical_uncertainty([0, 0, 1, 1], [0, 1, 0, 1])
    0.0
    """
    ha, hb = entropy(a), entropy(b)
    denom = ha + hb
    if denom == 0.0:
        return 0.0
    mi = ha + hb - joint_entropy(a, b)
    return float(2.0 * mi / denom)


su = symmetrical_uncertainty


def su_relevance(X: npt.NDArray[np.float64], y: npt.ArrayLike, constant: BoolArray) -> FloatArray:
    """SU(x, y) of each row x of X, 0 for the rows marked constant (never tested).

    >>> X = np.array([[0.0, 1, 0, 1], [2, 2, 2, 2]])
    >>> su_relevance(X, [1, 0, 1, 0], np.array([False, True]))
    array([1., 0.])
    """
    return np.array(
        [0.0 if c else symmetrical_uncertainty(x, y) for x, c in zip(X, constant, strict=True)]
    )


def su_dependence(a: npt.ArrayLike, B: npt.NDArray[np.float64], delta: float) -> FloatArray:
    """t = SU(a, g) for each row g of B; NaN where t <= delta.

    The arriving column is always the first argument: the joint counts are laid
    out by argument order, so a fixed orientation keeps each value independent
    of how arrivals were batched. Pairs with t <= delta are skipped by the SAOLA
    family (docs/algorithms.md, "SAOLA").

    >>> su_dependence([0, 1, 0, 1], np.array([[1.0, 0, 1, 0], [0, 0, 1, 1]]), 0.0)
    array([ 1., nan])
    """
    t = np.array([symmetrical_uncertainty(a, g) for g in B], dtype=np.float64)
    return np.where(t > delta, t, np.nan)


__all__ = [
    "as_codes",
    "entropy",
    "joint_entropy",
    "mutual_information",
    "su",
    "su_dependence",
    "su_relevance",
    "symmetrical_uncertainty",
]
