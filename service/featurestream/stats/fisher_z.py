"""Fisher z test of conditional independence for continuous data.

docs/algorithms.md, "Fisher z test": with C the covariance
(or correlation) matrix of the columns [a, b, S],

    R = C[ab,ab] - C[ab,S] C[S,S]^-1 C[S,ab],    r = R[0,1] / sqrt(R[0,0] R[1,1]),
    z = 0.5 ln((1+r)/(1-r)),                     W = sqrt(n - |S| - 3) z,

and a and b are independent given S iff |W| < Phi^-1(1 - alpha/2); dep = |r|.
A NaN r (constant column, singular C[S,S]) or n - |S| - 3 <= 0 is "not
testable", which callers treat as independent. |r| = 1 is dependent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from featurestream.stats.special import normal_quantile

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

SINGULAR_TOL = 1e-12


@dataclass(frozen=True)
class FisherZResult:
    """Outcome of one test: ``independent`` already folds "not testable" in."""

    independent: bool
    testable: bool
    r: float
    dep: float
    statistic: float


def fisher_z_threshold(alpha: float) -> float:
    """Critical value Phi^-1(1 - alpha/2) of |W|."""
    return normal_quantile(1.0 - alpha / 2.0)


def fisher_z_statistic(r: FloatArray | float, n: int, k: int) -> FloatArray:
    """W = sqrt(n - k - 3) * 0.5 ln((1+r)/(1-r)), NaN where not testable."""
    r_arr = np.clip(np.asarray(r, dtype=np.float64), -1.0, 1.0)
    dof = n - k - 3
    if dof <= 0:
        return np.full(r_arr.shape, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = 0.5 * np.log((1.0 + r_arr) / (1.0 - r_arr))
    return np.asarray(np.sqrt(dof) * z, dtype=np.float64)


def fisher_z_independent(r: FloatArray | float, n: int, k: int, alpha: float) -> BoolArray:
    """Vectorised decision: True where independent or not testable.

    ``r`` holds (partial) correlations of pairs conditioned on k variables.

    >>> fisher_z_independent(np.array([0.0, 0.5, 1.0, np.nan]), n=50, k=0, alpha=0.01)
    array([ True, False, False,  True])
    """
    W = fisher_z_statistic(r, n, k)
    with np.errstate(invalid="ignore"):
        dependent = np.abs(W) >= fisher_z_threshold(alpha)
    return np.asarray(~dependent)


def fisher_z_dependence(r: FloatArray, n: int, alpha: float) -> FloatArray:
    """|r| of each pair that the unconditional test finds dependent; NaN elsewhere.

    A pair that is independent or not testable gets NaN: the SAOLA family skips
    such a pair when it compares an arrival with the selected set
    (docs/algorithms.md, "SAOLA").

    >>> fisher_z_dependence(np.array([-0.9, 0.1, np.nan]), n=50, alpha=0.01)
    array([0.9, nan, nan])
    """
    skip = fisher_z_independent(r, n, 0, alpha)
    return np.where(skip, np.nan, np.abs(r))


def fisher_z_classes(
    rs: Sequence[FloatArray], n: int, k: int, alpha: float
) -> tuple[FloatArray, BoolArray]:
    """dep and the independence of x and a target given k variables, from one r per column.

    A multi-class target is one-hot coded into K indicator columns
    (docs/algorithms.md, "Targets"): x is dependent iff one of the K tests at
    alpha / K rejects, and dep(x) = max_k |r_k|. One column (K = 1, a binary or
    continuous target) is the plain test at alpha. Neither result depends on
    the order of the columns.

    The second x below has r = 0.38 with the first class: dependent at 0.01 on
    its own, independent at 0.01 / 2.

    >>> dep, ind = fisher_z_classes([np.array([0.1, 0.38]), np.array([-0.6, 0.2])], 50, 0, 0.01)
    >>> dep.tolist(), ind.tolist()
    ([0.6, 0.38], [False, True])
    >>> fisher_z_independent(np.array([0.38]), 50, 0, 0.01).tolist()
    [False]
    """
    level = alpha / len(rs) if len(rs) > 1 else alpha
    dep = np.abs(np.asarray(rs[0], dtype=np.float64))
    independent = fisher_z_independent(rs[0], n, k, level)
    for r in rs[1:]:
        dep = np.fmax(dep, np.abs(r))
        independent &= fisher_z_independent(r, n, k, level)
    return dep, independent


def partial_correlation(C: FloatArray, i: int, j: int, S: Sequence[int] = ()) -> float:
    """Partial correlation of variables i and j given S, from a covariance matrix C.

    Solves with a Cholesky factor of C[S,S] (never an explicit inverse). A
    singular C[S,S] or a zero residual variance gives NaN ("not testable").

    >>> # R = [[1, .5], [.5, 1]] - [.5, .25]^T [.5, .25] = [[.75, .375], [.375, .9375]]
    >>> C = np.array([[1.0, 0.5, 0.5], [0.5, 1.0, 0.25], [0.5, 0.25, 1.0]])
    >>> round(partial_correlation(C, 0, 1, [2]), 12)
    0.4472135955
    """
    ab = [i, j]
    R = C[np.ix_(ab, ab)]
    if len(S):
        S_idx = list(S)
        css = C[np.ix_(S_idx, S_idx)]
        csab = C[np.ix_(S_idx, ab)]
        try:
            L = np.linalg.cholesky(css)
        except np.linalg.LinAlgError:
            return float("nan")
        # A collinear S can still factor with a pivot that is only rounding noise.
        # L_ii^2 / C_ii is the squared sine of the angle between s_i and the span of
        # the earlier members; below SINGULAR_TOL C[S,S] counts as singular ("not
        # testable", docs/algorithms.md, "Fisher z test").
        if not np.all(np.diag(L) ** 2 > SINGULAR_TOL * np.diag(css)):
            return float("nan")
        # R = C[ab,ab] - (L^-1 C[S,ab])^T (L^-1 C[S,ab])
        M = _solve_lower(np.asarray(L, dtype=np.float64), csab)
        R = R - M.T @ M
    denom = R[0, 0] * R[1, 1]
    if not denom > 0.0:
        return float("nan")
    return float(np.clip(R[0, 1] / np.sqrt(denom), -1.0, 1.0))


def _solve_lower(L: FloatArray, B: FloatArray) -> FloatArray:
    # |S| <= max_k is tiny: a plain LAPACK solve is cheaper here than a triangular
    # solve that goes through BLAS thread dispatch, and equal to ~1e-16.
    return np.asarray(np.linalg.solve(L, B))


def fisher_z_from_correlation(
    C: FloatArray, i: int, j: int, S: Sequence[int], n: int, alpha: float
) -> FisherZResult:
    """Fisher z test of variables i and j given S, from their covariance matrix C."""
    k = len(S)
    r = partial_correlation(C, i, j, S)
    W = float(fisher_z_statistic(r, n, k))
    testable = bool(np.isfinite(r)) and n - k - 3 > 0
    dependent = testable and abs(W) >= fisher_z_threshold(alpha)
    return FisherZResult(
        independent=not dependent,
        testable=testable,
        r=r,
        dep=abs(r) if testable else float("nan"),
        statistic=W,
    )


def fisher_z(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    S: Sequence[npt.ArrayLike] = (),
    *,
    alpha: float = 0.01,
) -> FisherZResult:
    """Fisher z test of columns a and b given the columns in S, from raw data.

    >>> x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    >>> fisher_z(x, 2 * x + 1).independent
    False
    >>> fisher_z(x, np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])).independent
    True
    """
    cols = [np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)]
    cols += [np.asarray(s, dtype=np.float64) for s in S]
    n = cols[0].shape[0]
    X = np.vstack(cols)
    constant = X.max(axis=1) == X.min(axis=1)
    if constant[:2].any():
        return FisherZResult(True, False, float("nan"), float("nan"), float("nan"))
    C = np.cov(X)
    return fisher_z_from_correlation(C, 0, 1, list(range(2, X.shape[0])), n, alpha)


__all__ = [
    "FisherZResult",
    "fisher_z",
    "fisher_z_classes",
    "fisher_z_dependence",
    "fisher_z_from_correlation",
    "fisher_z_independent",
    "fisher_z_statistic",
    "fisher_z_threshold",
    "partial_correlation",
]
