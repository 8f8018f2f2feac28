"""Significance tests for comparing two feature selections, or k methods over data sets.

Two selections on one data set, from 5 replications of 2-fold cross-validation
(``crossval.five_by_two_differences``): p_i^(j) is the score difference
(A minus B) on fold j of replication i, pbar_i = (p_i^(1) + p_i^(2)) / 2 and
s_i^2 = (p_i^(1) - pbar_i)^2 + (p_i^(2) - pbar_i)^2.

* Dietterich's 5x2cv paired t test: t = p_1^(1) / sqrt(mean_i s_i^2), Student t
  with 5 degrees of freedom, two-sided.
* Alpaydin's combined 5x2cv F test: f = sum_ij (p_i^(j))^2 / (2 sum_i s_i^2),
  F with (10, 5) degrees of freedom, upper tail.

Zero variance: when p_i^(1) = p_i^(2) in every replication, sum_i s_i^2 = 0
and both statistics divide by zero. The rule is the same for both: a zero
numerator as well (no difference at all: p_1^(1) = 0 for t, every p = 0 for f)
gives statistic 0 and p-value 1; a non-zero numerator (a difference that never
varies) gives an infinite statistic (signed like p_1^(1) for t) and p-value 0.

k methods over N data sets (Demsar 2006): the Friedman test on average ranks
and its Iman-Davenport F form, then the Nemenyi critical difference.

References
----------
Dietterich, "Approximate Statistical Tests for Comparing Supervised
Classification Learning Algorithms", Neural Computation 10(7), 1998.

Alpaydin, "Combined 5 x 2 cv F Test for Comparing Supervised Classification
Learning Algorithms", Neural Computation 11(8), 1999.

Demsar, "Statistical Comparisons of Classifiers over Multiple Data Sets",
Journal of Machine Learning Research 7, 2006.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

from featurestream.errors import InvalidInput, InvalidParameter

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "FriedmanResult",
    "NemenyiResult",
    "SignificanceResult",
    "cd_groups",
    "combined_5x2cv_f_test",
    "friedman",
    "nemenyi",
    "nemenyi_q",
    "paired_5x2cv_t_test",
]


@dataclass(frozen=True)
class SignificanceResult:
    """A test statistic, its p-value and the degrees of freedom of its null distribution."""

    statistic: float
    p_value: float
    df: tuple[int, ...]


@dataclass(frozen=True)
class FriedmanResult:
    """The Friedman test over N data sets x k methods.

    Attributes
    ----------
    average_ranks
        R_j, method j's rank averaged over the data sets (1 = best).
    chi2
        Friedman's chi2_F, with k - 1 degrees of freedom.
    chi2_p_value
        Upper-tail chi-square p-value of ``chi2``.
    f
        Iman and Davenport's F_F, with (k - 1, (k - 1)(N - 1)) degrees of freedom.
    f_p_value
        Upper-tail F p-value of ``f``.
    n_datasets, n_methods
        N and k.
    """

    average_ranks: tuple[float, ...]
    chi2: float
    chi2_p_value: float
    f: float
    f_p_value: float
    n_datasets: int
    n_methods: int


@dataclass(frozen=True)
class NemenyiResult:
    """The Nemenyi post-hoc comparison of all pairs of methods.

    Attributes
    ----------
    q_alpha
        The studentized range quantile over sqrt(2), for k methods.
    critical_difference
        CD = q_alpha sqrt(k(k+1) / (6N)).
    different
        Pairs (i, j), i < j, of method indices whose average ranks differ by at
        least CD, in lexicographic order.
    """

    q_alpha: float
    critical_difference: float
    different: tuple[tuple[int, int], ...]


def _five_by_two(differences: npt.ArrayLike) -> FloatArray:
    p = np.asarray(differences, dtype=np.float64)
    if p.shape != (5, 2):
        raise InvalidInput(
            f"Expected a 5 x 2 matrix of score differences, got shape {p.shape}.",
            field="differences",
        )
    if not np.all(np.isfinite(p)):
        raise InvalidInput("The score differences must be finite.", field="differences")
    return p


def _variance_sum(p: FloatArray) -> float:
    """sum_i s_i^2; exactly 0 when the two folds of each replication agree."""
    pbar = p.mean(axis=1, keepdims=True)
    return float(((p - pbar) ** 2).sum())


def paired_5x2cv_t_test(differences: npt.ArrayLike) -> SignificanceResult:
    """Dietterich's 5x2cv paired t test.

    Parameters
    ----------
    differences
        5 x 2 matrix: row i is replication i, column j its fold j, the entry the
        score of A minus the score of B on that fold.

    Returns
    -------
    SignificanceResult
        t, its two-sided p-value under Student t with 5 degrees of freedom, and
        ``df == (5,)``. Zero variance: see the module docstring.

    Examples
    --------
    Each replication has s_i^2 = 2 * 0.01^2 = 0.0002, so
    t = 0.03 / sqrt(0.0002) = 2.1213...

    >>> P = [[0.03, 0.01], [0.02, 0.0], [0.01, 0.03], [0.0, 0.02], [0.02, 0.04]]
    >>> r = paired_5x2cv_t_test(P)
    >>> round(r.statistic, 4), round(r.p_value, 4), r.df
    (2.1213, 0.0874, (5,))
    """
    p = _five_by_two(differences)
    denominator = _variance_sum(p) / 5.0
    numerator = float(p[0, 0])
    if denominator == 0.0:
        if numerator == 0.0:
            return SignificanceResult(0.0, 1.0, (5,))
        return SignificanceResult(math.copysign(math.inf, numerator), 0.0, (5,))
    t = numerator / math.sqrt(denominator)
    return SignificanceResult(t, float(2.0 * stats.t.sf(abs(t), 5)), (5,))


def combined_5x2cv_f_test(differences: npt.ArrayLike) -> SignificanceResult:
    """Alpaydin's combined 5x2cv F test.

    Uses all ten differences, where the t test uses only p_1^(1), so it does
    not depend on which replication happens to come first.

    Parameters
    ----------
    differences
        5 x 2 matrix of score differences, as for ``paired_5x2cv_t_test``.

    Returns
    -------
    SignificanceResult
        f, its upper-tail p-value under F(10, 5), and ``df == (10, 5)``.
        Zero variance: see the module docstring.

    Examples
    --------
    Same matrix as the t test: sum p^2 = 0.0048, sum s_i^2 = 0.001, so
    f = 0.0048 / 0.002 = 2.4.

    >>> P = [[0.03, 0.01], [0.02, 0.0], [0.01, 0.03], [0.0, 0.02], [0.02, 0.04]]
    >>> r = combined_5x2cv_f_test(P)
    >>> round(r.statistic, 6), round(r.p_value, 3), r.df
    (2.4, 0.173, (10, 5))
    """
    p = _five_by_two(differences)
    denominator = 2.0 * _variance_sum(p)
    numerator = float((p**2).sum())
    if denominator == 0.0:
        if numerator == 0.0:
            return SignificanceResult(0.0, 1.0, (10, 5))
        return SignificanceResult(math.inf, 0.0, (10, 5))
    f = numerator / denominator
    return SignificanceResult(f, float(stats.f.sf(f, 10, 5)), (10, 5))


def friedman(scores: npt.ArrayLike, *, higher_is_better: bool = True) -> FriedmanResult:
    """The Friedman test and its Iman-Davenport correction, as in Demsar (2006).

    Each data set ranks the methods, 1 for the best, tied methods sharing the
    average of their ranks. With R_j the average rank of method j,

        chi2_F = 12N / (k(k+1)) (sum_j R_j^2 - k(k+1)^2 / 4),
        F_F = (N-1) chi2_F / (N(k-1) - chi2_F).

    chi2_F carries no correction for ties (Demsar's formula); with ties,
    ``scipy.stats.friedmanchisquare``, which corrects for them, gives a larger
    value. When every data set ranks the methods in the same order without
    ties, chi2_F reaches its maximum N(k-1): F_F is then infinite, with p-value 0.

    Parameters
    ----------
    scores
        N x k matrix, N >= 2 data sets (rows) by k >= 2 methods (columns), finite.
    higher_is_better
        True when a higher score is better (accuracy); False for losses or errors.

    Examples
    --------
    Ranks per row: (1, 2, 3), (1, 3, 2), (1, 2, 3), (2, 1, 3); R = (1.25, 2, 2.75);
    sum R^2 = 13.125, k(k+1)^2/4 = 12, chi2_F = 12*4/12 * 1.125 = 4.5;
    F_F = 3 * 4.5 / (8 - 4.5) = 3.857...

    >>> r = friedman([[0.9, 0.8, 0.7], [0.9, 0.6, 0.7], [0.8, 0.7, 0.6], [0.7, 0.8, 0.6]])
    >>> r.average_ranks, r.chi2, round(r.f, 4)
    ((1.25, 2.0, 2.75), 4.5, 3.8571)
    """
    a = np.asarray(scores, dtype=np.float64)
    if a.ndim != 2:
        raise InvalidInput(f"Expected an N x k matrix, got {a.ndim} dimension(s).", field="scores")
    n, k = a.shape
    if n < 2 or k < 2:
        raise InvalidInput(
            f"The Friedman test needs at least 2 data sets and 2 methods, got {n} x {k}.",
            field="scores",
        )
    if not np.all(np.isfinite(a)):
        raise InvalidInput("The scores must be finite.", field="scores")
    ranks = stats.rankdata(-a if higher_is_better else a, method="average", axis=1)
    # Average ranks are multiples of 1/2, so twice the rank sums are exact integers;
    # integer arithmetic then recognises chi2_F = N(k-1) (F_F's zero denominator)
    # exactly instead of as a tiny float of either sign.
    twice_sums = [int(v) for v in np.rint(2.0 * ranks.sum(axis=0))]
    sum_sq4 = sum(v * v for v in twice_sums)  # 4 * sum_j (rank sum_j)^2
    scale = n * k * (k + 1)
    # chi2_F = 12/(Nk(k+1)) sum_j (rank sum_j)^2 - 3N(k+1), over the common denominator.
    chi2_num = 3 * sum_sq4 - 3 * n * n * k * (k + 1) ** 2
    chi2 = chi2_num / scale
    ff_den = n * (k - 1) * scale - chi2_num  # (N(k-1) - chi2_F) * Nk(k+1)
    chi2_p = float(stats.chi2.sf(chi2, k - 1))
    df2 = (k - 1) * (n - 1)
    if ff_den == 0:
        f, f_p = math.inf, 0.0
    else:
        f = (n - 1) * chi2_num / ff_den
        f_p = float(stats.f.sf(f, k - 1, df2))
    return FriedmanResult(
        average_ranks=tuple(float(v) / (2 * n) for v in twice_sums),
        chi2=float(chi2),
        chi2_p_value=chi2_p,
        f=float(f),
        f_p_value=f_p,
        n_datasets=n,
        n_methods=k,
    )


def nemenyi_q(k: int, alpha: float = 0.05) -> float:
    """Nemenyi's q_alpha for k methods: the studentized range quantile over sqrt(2).

    The range of k standard normals (infinite degrees of freedom), at level
    1 - alpha; Demsar (2006), Table 5(a), lists 1.960, 2.343, 2.569 for
    k = 2, 3, 4 at alpha = 0.05.

    Examples
    --------
    >>> round(nemenyi_q(3), 3), round(nemenyi_q(3, alpha=0.10), 3)
    (2.344, 2.052)
    """
    if k < 2:
        raise InvalidParameter(f"Nemenyi needs at least 2 methods, got {k}.", parameter="k")
    if not 0.0 < alpha < 1.0:
        raise InvalidParameter(
            f"The 'alpha' parameter must be a float in the range (0, 1). Got {alpha} instead.",
            parameter="alpha",
        )
    return float(stats.studentized_range.ppf(1.0 - alpha, k, np.inf)) / math.sqrt(2.0)


def nemenyi(average_ranks: Sequence[float], n_datasets: int, alpha: float = 0.05) -> NemenyiResult:
    """The Nemenyi post-hoc test: which pairs of methods differ in average rank.

    Two methods differ significantly when their average ranks differ by at
    least CD = q_alpha sqrt(k(k+1) / (6N)).

    Parameters
    ----------
    average_ranks
        The k average ranks (``FriedmanResult.average_ranks``).
    n_datasets
        N, the number of data sets the ranks were averaged over.
    alpha
        Significance level.

    Examples
    --------
    k = 3, N = 4: CD = 2.3437 * sqrt(12/24) = 1.657...; the widest gap, 1.5
    between methods 0 and 2, is below it, so no pair differs. With N = 10,
    CD = 1.048...: methods 0 and 2 (2 apart) differ, neighbours (1 apart) do not.

    >>> r = nemenyi((1.25, 2.0, 2.75), 4)
    >>> round(r.critical_difference, 3), r.different
    (1.657, ())
    >>> nemenyi((1.0, 2.0, 3.0), 10).different
    ((0, 2),)
    """
    k = len(average_ranks)
    if n_datasets < 1:
        raise InvalidInput(
            f"Nemenyi needs at least 1 data set, got {n_datasets}.", field="n_datasets"
        )
    q = nemenyi_q(k, alpha)
    cd = q * math.sqrt(k * (k + 1) / (6.0 * n_datasets))
    different = tuple(
        (i, j)
        for i in range(k)
        for j in range(i + 1, k)
        if abs(average_ranks[i] - average_ranks[j]) >= cd
    )
    return NemenyiResult(q_alpha=q, critical_difference=cd, different=different)


def cd_groups(
    average_ranks: Sequence[float], critical_difference: float
) -> tuple[tuple[int, ...], ...]:
    """The groups of methods a critical-difference diagram joins by a bar.

    A group is a maximal run of methods, in order of average rank, whose
    highest and lowest ranks differ by less than the critical difference: no
    two of its members differ significantly (Nemenyi). Groups of one method are
    left out (nothing to join); a group inside another is left out too.

    Parameters
    ----------
    average_ranks
        The k average ranks.
    critical_difference
        CD, as ``nemenyi`` computes it.

    Returns
    -------
    tuple of tuple of int
        Method indices of each group, ordered by rank (ties by index), groups in
        order of their best member.

    Examples
    --------
    Ranks 1.0, 1.5, 2.4, 2.8 with CD = 1.5: methods 0 and 3 differ (1.8 >= 1.5),
    so two overlapping groups; {2, 3} alone is inside {1, 2, 3}.

    >>> cd_groups([1.0, 1.5, 2.4, 2.8], 1.5)
    ((0, 1, 2), (1, 2, 3))
    >>> cd_groups([1.0, 3.0], 1.0)
    ()
    """
    order = sorted(range(len(average_ranks)), key=lambda i: (average_ranks[i], i))
    groups: list[tuple[int, ...]] = []
    last_end = -1
    for start in range(len(order)):
        end = start
        while (
            end + 1 < len(order)
            and average_ranks[order[end + 1]] - average_ranks[order[start]] < critical_difference
        ):
            end += 1
        if end > start and end > last_end:
            groups.append(tuple(order[start : end + 1]))
            last_end = end
    return tuple(groups)
