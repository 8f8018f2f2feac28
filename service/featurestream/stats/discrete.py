"""G2 and chi-square tests of conditional independence for discrete data.

docs/algorithms.md, "Discrete tests". Columns hold integer
codes 0..L-1 and a column's number of levels L is its largest code + 1. For
columns a, b and a (possibly empty) list S of conditioning columns:

1. df = (L_a - 1)(L_b - 1) prod_{s in S} L_s, and at least 1;
2. n < 5 df: the test is not reliable and says "independent";
3. rows are stratified by the observed joint value of S; in each stratum the
   L_a x L_b table O of counts gives E = row total x column total / stratum
   total;
4. G2 = sum 2 O ln(O/E) over cells with O > 0 and E > 0; chi2 = sum D^2 / E
   over cells with E > 0, D = O - E, or D = |O - E| - 0.5 where E < 10;
5. p = 1 - F_chi2(statistic; df), independent iff p >= alpha, dep = statistic / df.

How the counts are made: the strata are the mixed-radix joint code of the
columns of S, and one ``np.bincount`` over the joint code (stratum, a, b)
fills every table at once, as an array of shape ``(strata, L_a, L_b)``. The
expected counts and the statistic are then computed for all strata in one
vectorised pass. A test costs O(n) plus the size of the tables, which the
reliability rule keeps below 4n/5 whenever it gets that far.

Every quantity is a deterministic function of the codes (counts are exact
integers), so a test gives the same bits whenever and however it is run.

References
----------
Peter Spirtes, Clark Glymour, Richard Scheines. *Causation, Prediction, and
Search*, 2nd ed., MIT Press, 2000 (the G2 test of conditional independence).

Alan Agresti. *Categorical Data Analysis*, 3rd ed., Wiley, 2013 (Pearson's
chi-square, likelihood-ratio G2, continuity correction).

Ioannis Tsamardinos, Laura E. Brown, Constantin F. Aliferis. "The max-min
hill-climbing Bayesian network structure learning algorithm." Machine Learning
65(1), 2006 (at least five instances per degree of freedom).

Xindong Wu, Kui Yu, Wei Ding, Hao Wang, Xingquan Zhu. "Online Feature
Selection with Streaming Features." IEEE TPAMI 35(5), 2013.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from featurestream.stats.special import chi2_sf

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Method = Literal["g2", "chi2"]

METHODS: tuple[str, ...] = ("g2", "chi2")

# docs/algorithms.md, "Discrete tests", step 2: at least 5 instances per degree of freedom.
MIN_ROWS_PER_DF = 5
# docs/algorithms.md, "Discrete tests", step 4: cells with E below this get the
# continuity correction.
CONTINUITY_BELOW = 10.0
# Mixed-radix codes are compacted to the observed values before they could overflow int64.
_MAX_RADIX = 1 << 40


@dataclass(frozen=True)
class DiscreteResult:
    """Outcome of one G2 or chi-square test.

    ``independent`` already folds "not reliable" in (docs/algorithms.md, "Discrete tests", step 2:
    an untestable pair counts as independent). When ``testable`` is False the
    statistic, p-value and dep are NaN: they were not computed.
    """

    independent: bool
    testable: bool
    statistic: float
    df: int
    p_value: float
    dep: float


def as_codes(x: npt.ArrayLike) -> IntArray:
    """Integer codes of a discrete column (or of each row of a 2-D array).

    >>> as_codes([0.0, 2.0, 1.0])
    array([0, 2, 1])
    """
    return np.asarray(x).astype(np.int64, copy=False)


def n_levels(x: npt.ArrayLike) -> int:
    """Number of levels L of a column: its largest code + 1 (1 for an empty column).

    Levels that never occur below the largest code still count (docs/algorithms.md,
    "Discrete tests", step 1: levels count observed or not).

    >>> n_levels([0, 3, 3])
    4
    """
    codes = as_codes(x)
    return int(codes.max()) + 1 if codes.size else 1


def degrees_of_freedom(La: int, Lb: int, Ls: Sequence[int] = ()) -> int:
    """df = (L_a - 1)(L_b - 1) prod L_s, and at least 1.

    docs/algorithms.md, "Discrete tests", step 1.

    >>> degrees_of_freedom(3, 2, [2, 4])
    16
    >>> degrees_of_freedom(1, 5)
    1
    """
    df = (La - 1) * (Lb - 1)
    for L in Ls:
        df *= L
    return max(int(df), 1)


def stratum_codes(S: Sequence[IntArray], Ls: Sequence[int], n: int) -> tuple[IntArray, int]:
    """The joint value of the columns of S as one code per row, and the code range.

    The code is mixed-radix (``s_1 L_2 L_3 + s_2 L_3 + s_3``), so equal joint
    values get equal codes. When the radix product would grow too large the
    codes are first compacted to the observed joint values: strata without
    rows contribute nothing to either statistic, so this changes no result.

    >>> code, size = stratum_codes([np.array([0, 1, 1]), np.array([2, 0, 2])], [2, 3], 3)
    >>> code, size
    (array([2, 3, 5]), 6)
    """
    code = np.zeros(n, dtype=np.int64)
    size = 1
    for s, L in zip(S, Ls, strict=True):
        if size * L > _MAX_RADIX:
            code, size = _compact(code)
        code = code * L + s
        size *= int(L)
    return code, size


def _compact(code: IntArray) -> tuple[IntArray, int]:
    values, inverse = np.unique(code, return_inverse=True)
    return inverse.astype(np.int64).reshape(-1), int(values.shape[0])


def contingency_tables(
    a: IntArray, b: IntArray, strata: IntArray, La: int, Lb: int, n_strata: int
) -> IntArray:
    """Counts O of every (stratum, a, b) cell: an array of shape ``(n_strata, La, Lb)``.

    One ``np.bincount`` over the joint code ``(stratum * La + a) * Lb + b``.

    >>> O = contingency_tables(np.array([0, 1, 1]), np.array([1, 1, 0]),
    ...                        np.array([0, 0, 1]), 2, 2, 2)
    >>> O.tolist()
    [[[0, 1], [0, 1]], [[0, 0], [1, 0]]]
    """
    joint = (strata * La + a) * Lb + b
    counts = np.bincount(joint, minlength=n_strata * La * Lb)
    return counts.reshape(n_strata, La, Lb).astype(np.int64, copy=False)


def expected_counts(O: IntArray | FloatArray) -> FloatArray:
    """E = row total x column total / stratum total, per stratum (0 in empty strata).

    >>> expected_counts(np.array([[[3, 1], [1, 3]]])).tolist()
    [[[2.0, 2.0], [2.0, 2.0]]]
    """
    Of = np.asarray(O, dtype=np.float64)
    row = Of.sum(axis=2)
    col = Of.sum(axis=1)
    total = row.sum(axis=1)
    num = row[:, :, None] * col[:, None, :]
    E: FloatArray = np.zeros(num.shape, dtype=np.float64)
    # Strata without rows have no table; their E stays 0 and step 4 skips cells with E = 0.
    np.divide(num, total[:, None, None], out=E, where=total[:, None, None] > 0)
    return E


def statistic_from_tables(O: IntArray | FloatArray, method: Method) -> float:
    """G2 or chi2 summed over all strata of the tables O.

    docs/algorithms.md, "Discrete tests", step 4.

    >>> O = np.array([[[4, 0], [0, 4]]])
    >>> round(statistic_from_tables(O, "g2"), 12) == round(16 * float(np.log(2)), 12)
    True
    >>> statistic_from_tables(O, "chi2")  # four cells with E = 2 < 10: D = 2 - 0.5
    4.5
    """
    Of = np.asarray(O, dtype=np.float64)
    E = expected_counts(Of)
    if method == "g2":
        # Step 4: cells with O = 0 contribute 0 (the limit of O ln O); E = 0 cells are skipped.
        mask = (Of > 0) & (E > 0)
        o = Of[mask]
        return float(2.0 * (o * np.log(o / E[mask])).sum())
    if method == "chi2":
        mask = E > 0
        o = Of[mask]
        e = E[mask]
        D = o - e
        # Step 4: continuity correction for cells whose expected count is below 10.
        small = e < CONTINUITY_BELOW
        D = np.where(small, np.abs(D) - 0.5, D)
        return float((D * D / e).sum())
    raise ValueError(f"Unknown discrete test {method!r}; expected one of {METHODS}.")


def discrete_ci_test(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    S: Sequence[npt.ArrayLike] = (),
    *,
    method: Method = "g2",
    alpha: float = 0.01,
    levels: Sequence[int] | None = None,
) -> DiscreteResult:
    """Test whether discrete columns a and b are independent given the columns of S.

    Parameters
    ----------
    a, b : integer codes 0..L-1, length n.
    S : conditioning columns (integer codes, length n each).
    method : "g2" or "chi2".
    alpha : significance level; independent iff p >= alpha.
    levels : (L_a, L_b, L_s...) when the caller already knows them (each at
        least the column's largest code + 1); computed from the data otherwise.

    Examples
    --------
    a equals b, four rows of each of two values: O = [[4, 0], [0, 4]], E = 2
    everywhere, G2 = 2 (4 ln 2 + 4 ln 2) = 16 ln 2 = 11.09 on 1 df, p = 0.00087:

    >>> a = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    >>> r = discrete_ci_test(a, a, method="g2", alpha=0.01)
    >>> r.independent, r.df, round(r.statistic, 4), round(r.p_value, 5)
    (False, 1, 11.0904, 0.00087)

    Conditioning on a binary column doubles df to 2: 8 rows < 5 x 2, not reliable:

    >>> r = discrete_ci_test(a, a, [a], method="g2")
    >>> r.independent, r.testable
    (True, False)

    References
    ----------
    Spirtes, Glymour, Scheines. Causation, Prediction, and Search, 2000.
    Agresti. Categorical Data Analysis, 2013.
    """
    ca = as_codes(a)
    cb = as_codes(b)
    cs = [as_codes(s) for s in S]
    if levels is None:
        levels = [n_levels(ca), n_levels(cb), *(n_levels(s) for s in cs)]
    if len(levels) != 2 + len(cs):
        raise ValueError("levels must hold L_a, L_b and one entry per conditioning column.")
    return ci_test_codes(ca, cb, cs, levels, method=method, alpha=alpha)


def ci_test_codes(
    a: IntArray,
    b: IntArray,
    S: Sequence[IntArray],
    levels: Sequence[int],
    *,
    method: Method,
    alpha: float,
) -> DiscreteResult:
    """The test on int64 codes with known levels ``(L_a, L_b, L_s...)``; no conversions.

    This is the entry point of the selectors, which keep codes and levels in
    their state.
    """
    La, Lb = int(levels[0]), int(levels[1])
    Ls = [int(L) for L in levels[2:]]
    n = int(a.shape[0])
    df = degrees_of_freedom(La, Lb, Ls)
    # docs/algorithms.md, "Discrete tests", step 2: fewer than 5 rows per df is not reliable.
    if n < MIN_ROWS_PER_DF * df:
        nan = float("nan")
        return DiscreteResult(True, False, nan, df, nan, nan)
    strata, n_strata = stratum_codes(S, Ls, n)
    if n_strata * La * Lb > 4 * n:
        # Keep the tables no larger than the data: only observed strata matter (step 3).
        strata, n_strata = _compact(strata)
    O = contingency_tables(a, b, strata, La, Lb, n_strata)
    statistic = statistic_from_tables(O, method)
    p = chi2_sf(statistic, df)
    return DiscreteResult(
        independent=p >= alpha,
        testable=True,
        statistic=statistic,
        df=df,
        p_value=p,
        dep=statistic / df,
    )


def g2_test(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    S: Sequence[npt.ArrayLike] = (),
    *,
    alpha: float = 0.01,
    levels: Sequence[int] | None = None,
) -> DiscreteResult:
    """The G2 (likelihood-ratio) test; see :func:`discrete_ci_test`.

    >>> g2_test([0, 1, 0, 1, 0, 1], [0, 0, 1, 1, 0, 1]).independent
    True
    """
    return discrete_ci_test(a, b, S, method="g2", alpha=alpha, levels=levels)


def chi2_test(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    S: Sequence[npt.ArrayLike] = (),
    *,
    alpha: float = 0.01,
    levels: Sequence[int] | None = None,
) -> DiscreteResult:
    """Pearson's chi-square test with the E < 10 continuity correction; see above.

    >>> chi2_test([0, 1, 0, 1, 0, 1], [0, 0, 1, 1, 0, 1]).independent
    True
    """
    return discrete_ci_test(a, b, S, method="chi2", alpha=alpha, levels=levels)


__all__ = [
    "CONTINUITY_BELOW",
    "METHODS",
    "MIN_ROWS_PER_DF",
    "DiscreteResult",
    "as_codes",
    "chi2_test",
    "ci_test_codes",
    "contingency_tables",
    "degrees_of_freedom",
    "discrete_ci_test",
    "expected_counts",
    "g2_test",
    "n_levels",
    "statistic_from_tables",
    "stratum_codes",
]
