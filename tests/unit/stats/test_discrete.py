"""G2 and chi-square conditional-independence tests (docs/algorithms.md, "Discrete tests").

Unconditional tables are checked against scipy.stats.chi2_contingency where
its rules coincide with docs/algorithms.md (G2: ``lambda_="log-likelihood"``;
chi2: ``correction=False`` with every E >= 10, so no continuity correction
applies). Conditional tests and the E < 10 continuity correction are checked
against a naive loop over strata and cells written here from the text.
"""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest
import scipy.stats
from hypothesis import given
from hypothesis import strategies as st

from featurestream.stats.discrete import (
    chi2_test,
    ci_test_codes,
    contingency_tables,
    degrees_of_freedom,
    discrete_ci_test,
    expected_counts,
    g2_test,
    n_levels,
    statistic_from_tables,
    stratum_codes,
)

REL = 1e-12


def naive_test(a, b, S, method, alpha=0.01):
    """docs/algorithms.md, "Discrete tests", steps 1-5, one stratum and one cell at a time."""
    a = [int(v) for v in a]
    b = [int(v) for v in b]
    S = [[int(v) for v in s] for s in S]
    n = len(a)
    La, Lb = max(a) + 1, max(b) + 1
    df = (La - 1) * (Lb - 1)
    for s in S:
        df *= max(s) + 1
    df = max(df, 1)
    if n < 5 * df:
        return None, df, None
    keys = [tuple(s[r] for s in S) for r in range(n)]
    stat = 0.0
    for key in sorted(set(keys)):
        O = [[0] * Lb for _ in range(La)]
        for r in range(n):
            if keys[r] == key:
                O[a[r]][b[r]] += 1
        row = [sum(O[i]) for i in range(La)]
        col = [sum(O[i][j] for i in range(La)) for j in range(Lb)]
        total = sum(row)
        for i, j in product(range(La), range(Lb)):
            E = row[i] * col[j] / total
            o = O[i][j]
            if method == "g2":
                if o > 0 and E > 0:
                    stat += 2 * o * math.log(o / E)
            elif E > 0:
                D = abs(o - E) - 0.5 if E < 10 else o - E
                stat += D * D / E
    return stat, df, float(scipy.stats.chi2.sf(stat, df))


def assert_matches_naive(a, b, S, method):
    expected, df, p = naive_test(a, b, S, method)
    res = discrete_ci_test(a, b, S, method=method, alpha=0.01)
    assert res.df == df
    if expected is None:
        assert res.independent and not res.testable
        assert math.isnan(res.statistic)
        return
    assert res.testable
    assert res.statistic == pytest.approx(expected, rel=REL, abs=1e-12)
    assert res.p_value == pytest.approx(p, rel=1e-9, abs=1e-15)
    assert res.independent == (res.p_value >= 0.01)
    assert res.dep == pytest.approx(expected / df, rel=REL, abs=1e-12)


# --------------------------------------------------------------------------- building blocks


def test_levels_count_unobserved_codes():
    # Codes 0 and 2 only: L = largest code + 1 = 3, level 1 counts although unseen.
    assert n_levels([0, 2, 2, 0]) == 3
    assert n_levels([0, 0]) == 1


def test_degrees_of_freedom_rule():
    # (3-1)(2-1) x 2 x 4 = 16; a constant column (L = 1) gives 0, raised to 1.
    assert degrees_of_freedom(3, 2, [2, 4]) == 16
    assert degrees_of_freedom(1, 3, [5]) == 1
    assert degrees_of_freedom(2, 2) == 1


def test_stratum_codes_are_mixed_radix():
    s1 = np.array([0, 1, 1, 0])
    s2 = np.array([2, 0, 2, 2])
    code, size = stratum_codes([s1, s2], [2, 3], 4)
    # s1 * 3 + s2
    assert code.tolist() == [2, 3, 5, 2]
    assert size == 6
    code, size = stratum_codes([], [], 3)
    assert code.tolist() == [0, 0, 0] and size == 1


def test_stratum_codes_compact_before_overflow():
    # Three columns of 2^30 levels: the radix product 2^90 overflows int64 unless compacted.
    big = 1 << 30
    s = [np.array([0, big - 1, 5, big - 1]), np.array([1, 2, 1, 2]), np.array([0, 7, 0, 7])]
    code, size = stratum_codes(s, [big, big, big], 4)
    assert code.min() >= 0 and code.max() < size
    # Rows 1 and 3 share a joint value, rows 0 and 2 differ: the partition is kept.
    assert code[1] == code[3]
    assert len({int(code[0]), int(code[1]), int(code[2])}) == 3


def test_contingency_tables_match_manual_counts():
    a = np.array([0, 1, 1, 0, 1])
    b = np.array([1, 1, 0, 1, 0])
    strata = np.array([0, 0, 1, 0, 1])
    O = contingency_tables(a, b, strata, 2, 2, 2)
    # stratum 0: rows 0,1,3 -> (0,1),(1,1),(0,1); stratum 1: rows 2,4 -> (1,0),(1,0)
    assert O.tolist() == [[[0, 2], [0, 1]], [[0, 0], [2, 0]]]


def test_expected_counts_are_zero_in_empty_strata():
    O = np.array([[[3, 1], [1, 3]], [[0, 0], [0, 0]]])
    E = expected_counts(O)
    # Stratum 0: every row and column total is 4, n = 8, E = 4*4/8 = 2.
    assert E.tolist() == [[[2.0, 2.0], [2.0, 2.0]], [[0.0, 0.0], [0.0, 0.0]]]


def test_unknown_method_is_an_error():
    with pytest.raises(ValueError, match="Unknown discrete test"):
        statistic_from_tables(np.ones((1, 2, 2)), "gsq")  # type: ignore[arg-type]


def test_levels_argument_must_cover_the_conditioning_set():
    with pytest.raises(ValueError, match="levels"):
        discrete_ci_test([0, 1], [1, 0], [[0, 1]], levels=[2, 2])


# --------------------------------------------------------------------------- hand-checked values


def test_g2_of_identical_balanced_columns():
    # O = [[4, 0], [0, 4]], E = 2 everywhere: G2 = 2 (4 ln 2 + 4 ln 2) = 16 ln 2 on 1 df.
    a = [0, 0, 0, 0, 1, 1, 1, 1]
    res = g2_test(a, a)
    assert res.statistic == pytest.approx(16 * math.log(2), rel=REL)
    assert res.df == 1
    assert res.p_value == pytest.approx(float(scipy.stats.chi2.sf(16 * math.log(2), 1)), rel=1e-12)
    assert not res.independent  # p = 0.00087 < 0.01
    assert res.dep == res.statistic


def test_chi2_applies_continuity_correction_below_ten():
    # Same table: all four E = 2 < 10, D = |4 - 2| - 0.5 = 1.5 or |0 - 2| - 0.5 = 1.5,
    # chi2 = 4 x 1.5^2 / 2 = 4.5 (uncorrected Pearson would give 8).
    a = [0, 0, 0, 0, 1, 1, 1, 1]
    res = chi2_test(a, a)
    assert res.statistic == 4.5
    assert res.p_value == pytest.approx(float(scipy.stats.chi2.sf(4.5, 1)), rel=1e-12)
    # p(4.5; 1) = 0.0339 >= 0.01: independent at alpha 0.01, dependent at 0.05.
    assert res.independent
    assert not chi2_test(a, a, alpha=0.05).independent


def test_continuity_correction_can_make_small_deviations_count():
    # |O - E| < 0.5 gives D = |O - E| - 0.5 < 0, and D^2 > 0 still adds to chi2 (step 4 as
    # written). Table [[3, 2], [2, 3]]: E = 2.5, |O - E| = 0.5, D = 0: chi2 = 0 exactly.
    a = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    b = [0, 0, 0, 1, 1, 0, 0, 1, 1, 1]
    assert chi2_test(a, b).statistic == 0.0
    # Table [[4, 1], [1, 4]]: E = 2.5, |O - E| = 1.5, D = 1: chi2 = 4 x 1 / 2.5 = 1.6
    # (uncorrected Pearson: 4 x 2.25 / 2.5 = 3.6).
    b2 = [0, 0, 0, 1, 0, 0, 1, 1, 1, 1]
    assert chi2_test(a, b2).statistic == pytest.approx(1.6, rel=REL)
    assert_matches_naive(a, b2, [], "chi2")


def test_not_reliable_when_fewer_than_five_rows_per_df():
    a = [0, 1, 0, 1, 0, 1, 0, 1, 0]
    # Unconditional: df = 1, n = 9 >= 5: testable.
    assert g2_test(a, a).testable
    # Given a binary column: df = 2, n = 9 < 10: independent, not testable.
    res = g2_test(a, a, [a])
    assert res.independent and not res.testable and res.df == 2
    assert math.isnan(res.p_value) and math.isnan(res.dep)
    # Unobserved levels count: codes {0, 2} make L = 3, df = 2 x 1 = 2, n = 9 < 10.
    c = [0, 2, 0, 2, 0, 2, 0, 2, 0]
    assert not g2_test(c, a).testable


def test_constant_column_is_independent_with_one_df():
    # L = 1 gives df = (1-1)(2-1) = 0, raised to 1; every cell has O = E so G2 = 0, p = 1.
    res = g2_test([0] * 6, [0, 1, 0, 1, 1, 0])
    assert res.df == 1 and res.statistic == 0.0 and res.p_value == 1.0 and res.independent


def test_huge_conditioning_levels_with_constant_column_stay_cheap():
    # df = 1 (L_a = 1) whatever the levels of S, so the test runs; the 2^90 strata are
    # compacted to the observed ones instead of being allocated.
    rng = np.random.default_rng(3)
    n = 50
    big = 1 << 30
    S = [rng.integers(0, big, n) for _ in range(3)]
    res = discrete_ci_test(np.zeros(n, dtype=np.int64), rng.integers(0, 2, n), S)
    assert res.testable and res.statistic == 0.0 and res.independent


# --------------------------------------------------------------------------- against scipy


@pytest.mark.parametrize("shape", [(2, 2), (2, 3), (3, 4), (4, 2)])
def test_unconditional_g2_matches_scipy_log_likelihood(shape):
    rng = np.random.default_rng(sum(shape))
    La, Lb = shape
    n = 400
    a = rng.integers(0, La, n)
    b = (a + rng.integers(0, 2, n)) % Lb
    O = contingency_tables(a, b, np.zeros(n, dtype=np.int64), La, Lb, 1)[0]
    assert (O.sum(axis=0) > 0).all() and (O.sum(axis=1) > 0).all()
    stat, p, dof, _ = scipy.stats.chi2_contingency(O, correction=False, lambda_="log-likelihood")
    res = g2_test(a, b)
    assert res.df == dof
    assert res.statistic == pytest.approx(stat, rel=REL)
    assert res.p_value == pytest.approx(p, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("shape", [(2, 2), (2, 3), (3, 3)])
def test_unconditional_chi2_matches_scipy_when_no_cell_is_corrected(shape):
    rng = np.random.default_rng(10 + sum(shape))
    La, Lb = shape
    n = 600
    a = rng.integers(0, La, n)
    b = np.where(rng.random(n) < 0.3, a % Lb, rng.integers(0, Lb, n))
    O = contingency_tables(a, b, np.zeros(n, dtype=np.int64), La, Lb, 1)[0]
    stat, p, dof, E = scipy.stats.chi2_contingency(O, correction=False)
    assert E.min() >= 10  # where the documented rule and plain Pearson coincide
    res = chi2_test(a, b)
    assert res.df == dof
    assert res.statistic == pytest.approx(stat, rel=REL)
    assert res.p_value == pytest.approx(p, rel=1e-9, abs=1e-300)


# --------------------------------------------------------------------------- against the naive loop


@pytest.mark.parametrize("method", ["g2", "chi2"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_conditional_tests_match_naive_stratified_loop(method, k):
    rng = np.random.default_rng(100 * k + len(method))
    n = 900
    S = [rng.integers(0, 2 + (j % 2), n) for j in range(k)]
    a = (S[0] + rng.integers(0, 2, n)) % 3
    b = (S[-1] + (rng.random(n) < 0.2)) % 2
    assert_matches_naive(a, b, S, method)


@pytest.mark.parametrize("method", ["g2", "chi2"])
def test_conditional_test_with_unobserved_strata_and_levels(method):
    # S has codes {0, 3}: L_s = 4 (two empty strata), a has codes {0, 2}: L_a = 3.
    rng = np.random.default_rng(7)
    n = 300
    s = 3 * rng.integers(0, 2, n)
    a = 2 * rng.integers(0, 2, n)
    b = rng.integers(0, 2, n)
    res = discrete_ci_test(a, b, [s], method=method)
    assert res.df == (3 - 1) * (2 - 1) * 4
    assert_matches_naive(a, b, [s], method)


def test_conditioning_explains_dependence_away():
    # a and b both copy s (with noise): dependent marginally, independent given s.
    rng = np.random.default_rng(11)
    n = 2000
    s = rng.integers(0, 2, n)
    a = np.where(rng.random(n) < 0.9, s, 1 - s)
    b = np.where(rng.random(n) < 0.9, s, 1 - s)
    assert not g2_test(a, b).independent
    assert g2_test(a, b, [s]).independent


def test_known_levels_entry_point_equals_the_public_one():
    rng = np.random.default_rng(5)
    a, b, s = (rng.integers(0, 3, 200) for _ in range(3))
    via_codes = ci_test_codes(a, b, [s], [3, 3, 3], method="chi2", alpha=0.05)
    assert via_codes == discrete_ci_test(a, b, [s], method="chi2", alpha=0.05)


# --------------------------------------------------------------------------- properties

codes = st.lists(st.integers(0, 2), min_size=30, max_size=30)


@given(
    a=codes,
    b=codes,
    s1=codes,
    s2=codes,
    k=st.integers(0, 2),
    method=st.sampled_from(["g2", "chi2"]),
)
def test_property_matches_naive_loop(a, b, s1, s2, k, method):
    assert_matches_naive(a, b, [s1, s2][:k], method)


@given(a=codes, b=codes, s=codes, method=st.sampled_from(["g2", "chi2"]))
def test_property_symmetric_in_a_and_b(a, b, s, method):
    ab = discrete_ci_test(a, b, [s], method=method)
    ba = discrete_ci_test(b, a, [s], method=method)
    assert ab.independent == ba.independent and ab.df == ba.df
    if ab.testable:
        assert ab.statistic == pytest.approx(ba.statistic, rel=REL, abs=1e-12)
