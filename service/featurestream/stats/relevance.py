"""Relevance of a feature to a target, alone and given one other feature.

OSSFS-DD (docs/algorithms/ossfs_dd.md) scores a feature f by its relevance
gamma(f) and a pair by the conditional relevance gamma(f | g):

* continuous data: |W|, the Fisher z statistic of the (partial) correlation,
  W = sqrt(n - k - 3) atanh(r) with k conditioning columns. The partial
  correlation given one column g is the first-order formula
  r(a, b | g) = (r_ab - r_ag r_bg) / sqrt((1 - r_ag^2)(1 - r_bg^2)),
  which is the residual-covariance definition of docs/algorithms.md
  ("Fisher z test") for |S| = 1. A correlation of exactly +-1 counts as the
  largest float64 below 1, so W stays finite.
* discrete codes: the conditional mutual information I(a; b | g) in nats,
  which is G2 / (2n) of the stratified table of the G2 test.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from featurestream.stats.discrete import ci_test_codes
from featurestream.stats.fisher_z import fisher_z_statistic, fisher_z_threshold

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

#: The largest |r| W is computed for: the float64 just below 1.
R_MAX = float(np.nextafter(1.0, 0.0))


def first_order_partial(
    r_ab: FloatArray | float, r_ag: FloatArray | float, r_bg: FloatArray | float
) -> FloatArray:
    """r(a, b | g) from the three correlations; NaN where a or b is collinear with g.

    >>> float(first_order_partial(0.5, 0.5, 0.0))  # g explains none of b
    0.5773502691896258
    >>> float(first_order_partial(0.3, 1.0, 0.3))
    nan
    """
    r_ab, r_ag, r_bg = (np.asarray(v, dtype=np.float64) for v in (r_ab, r_ag, r_bg))
    den = (1.0 - r_ag * r_ag) * (1.0 - r_bg * r_bg)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (r_ab - r_ag * r_bg) / np.sqrt(den)
    return np.asarray(np.where(den > 0.0, np.clip(r, -1.0, 1.0), np.nan), dtype=np.float64)


def z_scores(
    rs: Sequence[FloatArray], n: int, k: int, alpha: float
) -> tuple[FloatArray, BoolArray]:
    """gamma = max over target columns of |W|, and whether every test finds independence.

    ``rs`` holds one array of (partial) correlations per target column (one
    column, or the K class indicators). With K >= 2 columns each test is at
    alpha / K (docs/algorithms.md, "Targets"). gamma is NaN where no test can
    be made (n - k - 3 <= 0, or a NaN r); such a pair counts as independent.
    Neither result depends on the order of the columns.

    At n = 28 and k = 0, W = 5 atanh(r); atanh(0.5) = 0.5493:

    >>> g, ind = z_scores([np.array([0.5, 0.1]), np.array([-0.2, np.nan])], 28, 0, 0.05)
    >>> g.round(4).tolist(), ind.tolist()
    ([2.7465, 0.5017], [False, True])
    """
    level = alpha / len(rs) if len(rs) > 1 else alpha
    threshold = fisher_z_threshold(level)
    gamma: FloatArray | None = None
    independent: BoolArray | None = None
    for r in rs:
        w = np.abs(fisher_z_statistic(np.clip(r, -R_MAX, R_MAX), n, k))
        with np.errstate(invalid="ignore"):
            ind = ~(w >= threshold)
        gamma = w if gamma is None else np.fmax(gamma, w)
        independent = ind if independent is None else independent & ind
    assert gamma is not None and independent is not None
    return gamma, independent


def conditional_mi(
    a: IntArray, b: IntArray, g: IntArray, levels: tuple[int, int, int], alpha: float
) -> tuple[float, bool]:
    """I(a; b | g) in nats and whether the G2 test at alpha finds a, b independent given g.

    NaN (and independent) when the test is not reliable (fewer than 5 rows per
    degree of freedom, docs/algorithms.md, "Discrete tests").

    b copies a in both strata of g: I = H(a | g) = ln 2.

    >>> a = np.array([0, 1] * 10)
    >>> g = np.array([0] * 10 + [1] * 10)
    >>> cmi, ind = conditional_mi(a, a, g, (2, 2, 2), 0.05)
    >>> round(cmi, 12) == round(float(np.log(2)), 12), ind
    (True, False)
    """
    res = ci_test_codes(a, b, [g], levels, method="g2", alpha=alpha)
    if not res.testable:
        return float("nan"), True
    return res.statistic / (2.0 * a.shape[0]), bool(res.independent)


__all__ = ["R_MAX", "conditional_mi", "first_order_partial", "z_scores"]
