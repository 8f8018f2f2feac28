"""Fisher z against independent computations (scipy.stats, explicit inverses)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from featurestream.stats.fisher_z import (
    fisher_z,
    fisher_z_independent,
    fisher_z_statistic,
    fisher_z_threshold,
    partial_correlation,
)


def explicit_partial(C: np.ndarray, S: list[int]) -> float:
    """The documented formula with an explicit inverse (the reference).

    docs/algorithms.md, "Fisher z test".
    """
    ab = [0, 1]
    R = C[np.ix_(ab, ab)]
    if S:
        R = R - C[np.ix_(ab, S)] @ np.linalg.inv(C[np.ix_(S, S)]) @ C[np.ix_(S, ab)]
    return float(R[0, 1] / np.sqrt(R[0, 0] * R[1, 1]))


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_partial_correlation_matches_explicit_inverse(k: int) -> None:
    rng = np.random.default_rng(k)
    Z = rng.normal(size=(200, 2 + k))
    Z[:, 1] += 0.7 * Z[:, 0] + (Z[:, 2:].sum(axis=1) if k else 0)
    C = np.cov(Z.T)
    S = list(range(2, 2 + k))
    assert partial_correlation(C, 0, 1, S) == pytest.approx(explicit_partial(C, S), abs=1e-12)


def test_unconditional_matches_scipy_pearson() -> None:
    rng = np.random.default_rng(1)
    a = rng.normal(size=300)
    b = 0.3 * a + rng.normal(size=300)
    res = fisher_z(a, b, alpha=0.01)
    assert res.r == pytest.approx(stats.pearsonr(a, b).statistic, abs=1e-12)
    assert res.dep == pytest.approx(abs(res.r), abs=0)


def test_statistic_and_threshold_follow_the_formula() -> None:
    r, n, k = 0.2, 103, 2
    W = float(fisher_z_statistic(r, n, k))
    assert pytest.approx(np.sqrt(n - k - 3) * 0.5 * np.log(1.2 / 0.8), abs=1e-12) == W
    assert fisher_z_threshold(0.05) == pytest.approx(stats.norm.ppf(0.975), abs=1e-12)
    # |W| = 1.98 >= 1.96: dependent at 0.05, independent at 0.01 (threshold 2.576).
    assert not fisher_z_independent(r, n, k, 0.05)
    assert fisher_z_independent(r, n, k, 0.01)


def test_conditioning_on_the_common_cause_removes_dependence() -> None:
    rng = np.random.default_rng(4)
    z = rng.normal(size=2000)
    a = z + 0.5 * rng.normal(size=2000)
    b = z + 0.5 * rng.normal(size=2000)
    assert not fisher_z(a, b).independent
    assert fisher_z(a, b, [z]).independent


def test_constant_column_is_not_testable() -> None:
    res = fisher_z(np.ones(10), np.arange(10.0))
    assert res.independent and not res.testable and np.isnan(res.r)


def test_singular_conditioning_set_is_not_testable() -> None:
    rng = np.random.default_rng(0)
    a, b, s = rng.normal(size=(3, 50))
    res = fisher_z(a, b, [s, s])
    assert res.independent and not res.testable


def test_too_few_rows_is_not_testable() -> None:
    # n - |S| - 3 = 5 - 2 - 3 = 0.
    a = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    res = fisher_z(a, a * 2, [np.array([1.0, 0, 1, 0, 2]), np.array([3.0, 1, 4, 1, 5])])
    assert res.independent and not res.testable


def test_perfect_correlation_is_dependent() -> None:
    a = np.arange(20.0)
    res = fisher_z(a, -3 * a + 1, alpha=1e-12)
    assert not res.independent and res.dep == 1.0


def test_nan_correlation_is_independent() -> None:
    assert fisher_z_independent(np.array([np.nan]), 100, 0, 0.05).tolist() == [True]


@given(
    arrays(np.float64, (3, 12), elements=st.floats(-1e3, 1e3, allow_nan=False)),
    st.sampled_from([0.01, 0.05, 0.2]),
)
def test_fisher_z_is_symmetric(X: np.ndarray, alpha: float) -> None:
    ab = fisher_z(X[0], X[1], [X[2]], alpha=alpha)
    ba = fisher_z(X[1], X[0], [X[2]], alpha=alpha)
    assert ab.independent == ba.independent
    if ab.testable:
        assert ab.r == pytest.approx(ba.r, abs=1e-9)
