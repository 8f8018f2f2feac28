"""5x2cv t and F tests by hand, Friedman against scipy, Nemenyi against Demsar's table."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from featurestream.errors import InvalidInput, InvalidParameter
from featurestream.evaluation.compare import (
    cd_groups,
    combined_5x2cv_f_test,
    friedman,
    nemenyi,
    nemenyi_q,
    paired_5x2cv_t_test,
)

# Rows: replications i = 1..5; columns: folds j = 1, 2.
P = np.array(
    [
        [0.04, 0.02],  # pbar 0.03, s^2 = 2 * 0.01^2 = 0.0002
        [0.01, 0.01],  # pbar 0.01, s^2 = 0
        [0.05, -0.01],  # pbar 0.02, s^2 = 2 * 0.03^2 = 0.0018
        [0.00, 0.02],  # pbar 0.01, s^2 = 0.0002
        [0.03, 0.03],  # pbar 0.03, s^2 = 0
    ]
)
# sum s^2 = 0.0022, mean s^2 = 0.00044.
# sum p^2 = (16 + 4 + 1 + 1 + 25 + 1 + 0 + 4 + 9 + 9) e-4 = 70e-4 = 0.007.


def test_paired_t_by_hand() -> None:
    r = paired_5x2cv_t_test(P)
    t = 0.04 / math.sqrt(0.00044)  # 1.9069...
    assert r.statistic == pytest.approx(t, rel=1e-12)
    assert r.p_value == pytest.approx(2 * stats.t.sf(t, 5), rel=1e-12)
    assert r.df == (5,)


def test_paired_t_sign_follows_first_difference() -> None:
    r = paired_5x2cv_t_test(-P)
    assert r.statistic == pytest.approx(-0.04 / math.sqrt(0.00044), rel=1e-12)
    assert r.p_value == pytest.approx(paired_5x2cv_t_test(P).p_value, rel=1e-12)


def test_combined_f_by_hand() -> None:
    r = combined_5x2cv_f_test(P)
    f = 0.007 / (2 * 0.0022)  # 1.5909...
    assert r.statistic == pytest.approx(f, rel=1e-12)
    assert r.p_value == pytest.approx(stats.f.sf(f, 10, 5), rel=1e-12)
    assert r.df == (10, 5)


def test_zero_variance_with_no_difference_is_not_significant() -> None:
    zero = np.zeros((5, 2))
    for test in (paired_5x2cv_t_test, combined_5x2cv_f_test):
        r = test(zero)
        assert (r.statistic, r.p_value) == (0.0, 1.0)


def test_zero_variance_with_constant_difference_is_certain() -> None:
    # A always 0.02 better on every fold: the folds agree, sum s_i^2 = 0.
    t = paired_5x2cv_t_test(np.full((5, 2), 0.02))
    assert (t.statistic, t.p_value) == (math.inf, 0.0)
    assert paired_5x2cv_t_test(np.full((5, 2), -0.02)).statistic == -math.inf
    f = combined_5x2cv_f_test(np.full((5, 2), 0.02))
    assert (f.statistic, f.p_value) == (math.inf, 0.0)


def test_zero_variance_t_looks_only_at_first_difference() -> None:
    # Folds agree in each replication; p_1^(1) = 0 but later replications differ.
    p = np.array([[0.0, 0.0], [0.1, 0.1], [0.1, 0.1], [0.2, 0.2], [0.1, 0.1]])
    assert paired_5x2cv_t_test(p).p_value == 1.0
    assert combined_5x2cv_f_test(p).p_value == 0.0


def test_5x2cv_rejects_bad_shapes_and_values() -> None:
    for bad in (np.zeros((5, 3)), np.zeros(10), np.array([[np.nan, 0.0]] * 5)):
        with pytest.raises(InvalidInput):
            paired_5x2cv_t_test(bad)
        with pytest.raises(InvalidInput):
            combined_5x2cv_f_test(bad)


def iman_davenport(chi2: float, N: int, k: int) -> float:
    return (N - 1) * chi2 / (N * (k - 1) - chi2)


def test_friedman_matches_scipy_without_ties() -> None:
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(8, 4)) + np.array([0.0, 0.3, 0.6, 0.9])
    r = friedman(scores)
    ref = stats.friedmanchisquare(*scores.T)
    assert r.chi2 == pytest.approx(ref.statistic, rel=1e-12)
    assert r.chi2_p_value == pytest.approx(ref.pvalue, rel=1e-12)
    assert r.f == pytest.approx(iman_davenport(r.chi2, 8, 4), rel=1e-12)
    assert r.f_p_value == pytest.approx(stats.f.sf(r.f, 3, 21), rel=1e-12)
    ranks = stats.rankdata(-scores, axis=1).mean(axis=0)
    np.testing.assert_allclose(r.average_ranks, ranks, rtol=1e-12)
    assert (r.n_datasets, r.n_methods) == (8, 4)


def test_friedman_lower_is_better_reverses_ranks() -> None:
    scores = np.array([[0.1, 0.2, 0.3], [0.1, 0.3, 0.2], [0.2, 0.1, 0.3]])
    high = friedman(scores)
    low = friedman(scores, higher_is_better=False)
    np.testing.assert_allclose(np.add(high.average_ranks, low.average_ranks), 4.0)
    assert low.chi2 == pytest.approx(high.chi2)


def test_friedman_ties_share_average_ranks_without_correction() -> None:
    # Ranks: (1.5, 1.5, 3), (1, 2, 3), (2, 1, 3): R = (1.5, 1.5, 3).
    # chi2_F = 12*3/(3*4) * ((2.25 + 2.25 + 9) - 3*16/4) = 3 * 1.5 = 4.5.
    scores = np.array([[0.9, 0.9, 0.1], [0.9, 0.5, 0.1], [0.5, 0.9, 0.1]])
    r = friedman(scores)
    assert r.average_ranks == (1.5, 1.5, 3.0)
    assert r.chi2 == pytest.approx(4.5, rel=1e-12)
    assert r.f == pytest.approx(iman_davenport(4.5, 3, 3), rel=1e-12)
    # scipy divides by its tie correction 1 - 6/(3*3*8) = 11/12, so it is larger.
    assert stats.friedmanchisquare(*scores.T).statistic == pytest.approx(4.5 * 12 / 11)


def test_friedman_perfect_agreement_gives_infinite_f() -> None:
    # Every data set ranks the methods 1, 2, 3: chi2_F = N(k-1) = 10.
    scores = np.tile([0.9, 0.8, 0.7], (5, 1))
    r = friedman(scores)
    assert r.chi2 == pytest.approx(10.0)
    assert (r.f, r.f_p_value) == (math.inf, 0.0)


def test_friedman_all_tied_is_not_significant() -> None:
    r = friedman(np.ones((4, 3)))
    assert r.average_ranks == (2.0, 2.0, 2.0)
    assert (r.chi2, r.chi2_p_value, r.f, r.f_p_value) == (0.0, 1.0, 0.0, 1.0)


def test_friedman_rejects_bad_input() -> None:
    for bad in (np.ones((1, 3)), np.ones((3, 1)), np.ones(4), [[1.0, np.inf], [0.0, 1.0]]):
        with pytest.raises(InvalidInput):
            friedman(bad)


@pytest.mark.parametrize(
    ("k", "table"), [(2, 1.960), (3, 2.343), (4, 2.569), (5, 2.728), (6, 2.850)]
)
def test_nemenyi_q_matches_demsar_table(k: int, table: float) -> None:
    # Demsar (2006), Table 5(a), alpha = 0.05.
    assert nemenyi_q(k, 0.05) == pytest.approx(table, abs=1e-3)


def test_nemenyi_q_rejects_bad_parameters() -> None:
    with pytest.raises(InvalidParameter):
        nemenyi_q(1)
    with pytest.raises(InvalidParameter):
        nemenyi_q(3, alpha=1.5)


def test_nemenyi_critical_difference_and_pairs() -> None:
    # k = 4, N = 12: CD = 2.569 * sqrt(4*5/72) = 2.569 * 0.52705 = 1.354.
    r = nemenyi([1.2, 2.0, 2.7, 4.1], 12)
    assert r.critical_difference == pytest.approx(nemenyi_q(4) * math.sqrt(20 / 72), rel=1e-12)
    assert r.critical_difference == pytest.approx(1.354, abs=1e-3)
    # Gaps: (0,1) .8, (0,2) 1.5, (0,3) 2.9, (1,2) .7, (1,3) 2.1, (2,3) 1.4.
    assert r.different == ((0, 2), (0, 3), (1, 3), (2, 3))


def test_nemenyi_from_friedman_ranks() -> None:
    scores = np.tile([0.9, 0.8, 0.7], (10, 1))
    fr = friedman(scores)
    r = nemenyi(fr.average_ranks, fr.n_datasets)
    assert r.different == ((0, 2),)


def test_cd_groups_by_hand() -> None:
    # Sorted ranks 1.0, 1.5, 2.4, 2.8 (given out of order), CD = 1.5.
    # From 1.0: 1.5 and 2.4 are within 1.5, 2.8 is not (1.8) -> {a, b, c}.
    # From 1.5: 2.4 and 2.8 within (1.3) -> {b, c, d}. From 2.4: {c, d} is inside it.
    ranks = [2.4, 1.0, 2.8, 1.5]  # c, a, d, b
    assert cd_groups(ranks, 1.5) == ((1, 3, 0), (3, 0, 2))


def test_cd_groups_gap_equal_to_cd_is_a_difference() -> None:
    # nemenyi calls a gap >= CD significant, so a gap of exactly CD splits the groups.
    assert cd_groups([1.0, 2.0, 3.0], 1.0) == ()
    assert cd_groups([1.0, 2.0, 3.0], 1.0 + 1e-9) == ((0, 1), (1, 2))
    assert cd_groups([1.0, 2.0, 3.0], 2.5) == ((0, 1, 2),)


def test_cd_groups_with_tied_ranks_and_no_overlap() -> None:
    # Two tied pairs far apart: two separate groups, ties ordered by index.
    assert cd_groups([3.5, 1.5, 1.5, 3.5], 1.0) == ((1, 2), (0, 3))


def test_cd_groups_agree_with_nemenyi() -> None:
    # No pair inside a group differs significantly; every significant pair is split.
    rng = np.random.default_rng(4)
    for _ in range(50):
        ranks = list(rng.uniform(1, 6, size=6))
        r = nemenyi(ranks, 8)
        groups = cd_groups(ranks, r.critical_difference)
        joined = {(min(i, j), max(i, j)) for g in groups for i in g for j in g if i != j}
        assert joined.isdisjoint(r.different)
        # Every non-significant pair of distinct methods shares a group.
        for i in range(6):
            for j in range(i + 1, 6):
                if (i, j) not in r.different:
                    assert (i, j) in joined
