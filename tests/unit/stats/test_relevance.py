"""Relevance and conditional relevance (stats/relevance.py) against their definitions."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from featurestream.stats.fisher_z import fisher_z, fisher_z_threshold, partial_correlation
from featurestream.stats.relevance import R_MAX, conditional_mi, first_order_partial, z_scores


def test_first_order_partial_equals_the_residual_covariance_definition() -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3, 40))
    X[1] += X[0]
    X[2] += 0.5 * X[0] - X[1]
    C = np.corrcoef(X)
    want = partial_correlation(C, 0, 1, [2])
    got = float(first_order_partial(C[0, 1], C[0, 2], C[1, 2]))
    assert math.isclose(got, want, rel_tol=1e-12)


def test_first_order_partial_by_hand() -> None:
    # r_ab = 0.5, r_ag = 0.5, r_bg = 0.5: (0.5 - 0.25) / (1 - 0.25) = 1/3.
    assert math.isclose(float(first_order_partial(0.5, 0.5, 0.5)), 1 / 3, rel_tol=1e-15)
    # a or b collinear with g: the residual is 0, nothing to correlate.
    assert np.isnan(first_order_partial(0.2, -1.0, 0.1))
    assert np.isnan(first_order_partial(0.2, 0.1, 1.0))


def test_z_scores_is_the_fisher_z_statistic() -> None:
    # n = 19, k = 1: W = sqrt(15) atanh(r).
    r = np.array([0.3, -0.6])
    gamma, independent = z_scores([r], 19, 1, 0.05)
    assert np.allclose(gamma, np.sqrt(15) * np.arctanh(np.abs(r)), rtol=1e-14)
    assert independent.tolist() == [bool(np.sqrt(15) * np.arctanh(0.3) < 1.959963984540054), False]


def test_z_scores_of_a_perfect_correlation_is_finite_and_the_largest() -> None:
    gamma, independent = z_scores([np.array([1.0, -1.0, R_MAX])], 10, 0, 0.05)
    assert np.isfinite(gamma).all() and gamma[0] == gamma[1] == gamma[2]
    assert not independent.any()


def test_z_scores_untestable_is_nan_and_independent() -> None:
    gamma, independent = z_scores([np.array([0.9, np.nan])], 4, 1, 0.05)  # n - 1 - 3 = 0
    assert np.isnan(gamma).all() and independent.all()
    gamma, independent = z_scores([np.array([np.nan, 0.9])], 50, 0, 0.05)
    assert np.isnan(gamma[0]) and independent[0] and not independent[1]


def test_z_scores_over_classes_is_the_max_at_a_bonferroni_level() -> None:
    n = 103  # sqrt(n - 3) = 10
    r1, r2 = np.array([0.2]), np.array([-0.21])
    gamma, independent = z_scores([r1, r2], n, 0, 0.05)
    assert math.isclose(float(gamma[0]), 10 * math.atanh(0.21), rel_tol=1e-14)
    # 10 atanh(0.21) = 2.13 rejects at 0.05 (1.96) but not at 0.025 (2.24).
    assert 1.96 < float(gamma[0]) < fisher_z_threshold(0.025)
    assert independent.tolist() == [True]
    # The order of the target columns changes no bit.
    again = z_scores([r2, r1], n, 0, 0.05)
    assert again[0].tobytes() == gamma.tobytes() and again[1].tolist() == [True]


def test_z_scores_agrees_with_the_fisher_z_test_from_raw_data() -> None:
    rng = np.random.default_rng(5)
    a, y, g = rng.normal(size=(3, 30))
    y = y + 0.5 * a + 0.3 * g
    res = fisher_z(a, y, [g], alpha=0.05)
    C = np.corrcoef(np.vstack([a, y, g]))
    r = first_order_partial(C[0, 1], C[0, 2], C[1, 2])
    gamma, independent = z_scores([np.atleast_1d(r)], 30, 1, 0.05)
    assert math.isclose(float(gamma[0]), abs(res.statistic), rel_tol=1e-12)
    assert bool(independent[0]) == res.independent


def _cmi_by_counts(a: np.ndarray, b: np.ndarray, g: np.ndarray) -> float:
    """sum p(a, b, g) ln(p(a, b, g) p(g) / (p(a, g) p(b, g))), from the definition."""
    n = a.shape[0]
    total = 0.0
    for va, vb, vg in set(zip(a.tolist(), b.tolist(), g.tolist(), strict=True)):
        pabg = np.sum((a == va) & (b == vb) & (g == vg)) / n
        pg = np.sum(g == vg) / n
        pag = np.sum((a == va) & (g == vg)) / n
        pbg = np.sum((b == vb) & (g == vg)) / n
        total += pabg * math.log(pabg * pg / (pag * pbg))
    return total


def test_conditional_mi_of_xor_is_ln2() -> None:
    # y = a xor g: a alone says nothing of y, given g it says everything.
    a = np.array([0, 1, 0, 1] * 10)
    g = np.array([0, 0, 1, 1] * 10)
    y = a ^ g
    cmi, independent = conditional_mi(a, y, g, (2, 2, 2), 0.05)
    assert math.isclose(cmi, math.log(2), rel_tol=1e-12) and not independent


def test_conditional_mi_too_few_rows_is_untestable() -> None:
    a = np.array([0, 1, 0, 1, 1, 0])
    cmi, independent = conditional_mi(a, a, a, (2, 2, 2), 0.05)  # 6 rows < 5 x 2 df
    assert math.isnan(cmi) and independent


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(20, 60), st.integers(2, 4))
def test_conditional_mi_equals_its_definition(seed: int, n: int, levels: int) -> None:
    rng = np.random.default_rng(seed)
    a, b, g = rng.integers(0, levels, (3, n))
    b = (b + a * rng.integers(0, 2, n)) % levels
    cmi, _ = conditional_mi(a, b, g, (levels, levels, levels), 0.05)
    if not math.isnan(cmi):
        assert math.isclose(cmi, _cmi_by_counts(a, b, g), rel_tol=1e-9, abs_tol=1e-12)
