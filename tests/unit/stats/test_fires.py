"""FIRES probit update, weights and selection (docs/algorithms/fires.md, "Exact rules")."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from featurestream.stats import fires as fires_module
from featurestream.stats.fires import (
    batch_form,
    fires_update,
    fires_update_ovr,
    fires_weights,
    inverse_mills,
    top_m,
)
from tests.data.make_fires_expected import make_multiclass_stream, make_stream

EXPECTED = Path(__file__).parents[2] / "data" / "fires_expected.json"


def plain_update(
    mu: np.ndarray,
    sigma: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    lr_mu: float,
    lr_sigma: float,
    epochs: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1-3 of docs/algorithms/fires.md, "Exact rules", one instance and feature at a time."""
    mu = mu.copy()
    sigma = sigma.copy()
    n, d = X.shape
    for _ in range(epochs):
        grad_mu = np.zeros(d)
        grad_sigma = np.zeros(d)
        for i in range(n):
            dot = sum(X[i, j] * mu[j] for j in range(d))
            rho = math.sqrt(1.0 + sum(X[i, j] ** 2 * sigma[j] ** 2 for j in range(d)))
            t = y[i] * dot / rho
            r = stats.norm.pdf(t) / stats.norm.cdf(t)
            for j in range(d):
                grad_mu[j] += r * y[i] / rho * X[i, j] / n
                grad_sigma[j] += r * (-y[i] / rho**3) * X[i, j] ** 2 * sigma[j] * dot / n
        mu = mu + lr_mu * grad_mu
        sigma = np.maximum(sigma + lr_sigma * grad_sigma, 0.0)
    return mu, sigma


def test_one_instance_worked_by_hand() -> None:
    # mu = (0.5, 0), sigma = (1, 1), x = (1, 2), y = +1:
    # dot = 0.5, rho = sqrt(1 + 1 + 4) = sqrt(6) = 2.449490, t = 0.204124,
    # phi(t) = 0.390717, Phi(t) = 0.580872, r = 0.672639.
    # grad_mu = r / rho * x = (0.274604, 0.549207);
    # grad_sigma = -r / rho^3 * x^2 * sigma * dot = (-0.022884, -0.091535).
    # With learning rates 0.01: mu = (0.502746, 0.005492), sigma = (0.999771, 0.999085).
    mu, sigma = fires_update(
        np.array([0.5, 0.0]), np.array([1.0, 1.0]), np.array([[1.0, 2.0]]), np.array([1.0])
    )
    np.testing.assert_allclose(mu, [0.5027460369596998, 0.005492073919399609], rtol=1e-13)
    np.testing.assert_allclose(sigma, [0.9997711635866917, 0.9990846543467667], rtol=1e-13)


def test_weights_worked_by_hand() -> None:
    # w = (mu^2 - 0.01 sigma^2) / 0.02: mu = (1, 0, 0.5), sigma = (0, 1, 0)
    # -> (50, -0.5, 12.5); min-max -> (1, 0, 13 / 50.5).
    mu = np.array([1.0, 0.0, 0.5])
    sigma = np.array([0.0, 1.0, 0.0])
    raw = fires_weights(mu, sigma, scale_weights=False)
    np.testing.assert_allclose(raw, [50.0, -0.5, 12.5], rtol=1e-15)
    scaled = fires_weights(mu, sigma)
    np.testing.assert_allclose(scaled, [1.0, 0.0, 13.0 / 50.5], rtol=1e-15)
    assert top_m(scaled, 2).tolist() == [0, 2]


def test_equal_weights_scale_to_zero_and_ties_go_to_lower_index() -> None:
    w = fires_weights(np.full(4, 0.3), np.full(4, 0.2))
    assert w.tolist() == [0.0, 0.0, 0.0, 0.0]
    assert top_m(w, 3).tolist() == [0, 1, 2]
    assert top_m(np.array([0.1, 0.9, 0.9, 0.1]), 4).tolist() == [1, 2, 0, 3]


@pytest.mark.parametrize("epochs", [1, 3])
def test_matches_plain_transcription(epochs: int) -> None:
    rng = np.random.default_rng(7)
    X = rng.normal(size=(40, 6))
    y = np.where(rng.random(40) < 0.5, 1.0, -1.0)
    mu = rng.normal(scale=0.3, size=6)
    sigma = rng.uniform(0.5, 1.5, size=6)
    got = fires_update(mu, sigma, X, y, lr_mu=0.05, lr_sigma=0.02, epochs=epochs)
    ref = plain_update(mu, sigma, X, y, 0.05, 0.02, epochs)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-12, atol=1e-12)


def test_inverse_mills_is_finite_far_in_the_tail() -> None:
    # Phi(-40) underflows to 0, so phi/Phi is 0/0; the ratio is ~ -t + 1/(-t) there.
    with np.errstate(all="ignore"):
        naive = stats.norm.pdf(-40.0) / stats.norm.cdf(-40.0)
    assert not np.isfinite(naive)
    r = inverse_mills(np.array([-40.0, -5.0, 0.0, 3.0]))
    assert np.all(np.isfinite(r))
    assert r[0] == pytest.approx(40.0 + 1.0 / 40.0, rel=1e-4)
    np.testing.assert_allclose(
        r[1:], stats.norm.pdf([-5.0, 0.0, 3.0]) / stats.norm.cdf([-5.0, 0.0, 3.0]), rtol=1e-12
    )


def test_confidently_wrong_instance_gives_finite_update() -> None:
    # t = y dot / rho = -100 / sqrt(2): a naive pdf/cdf would give NaN here.
    mu, sigma = fires_update(
        np.array([100.0]), np.array([1.0]), np.array([[1.0]]), np.array([-1.0])
    )
    assert np.all(np.isfinite(mu)) and np.all(np.isfinite(sigma))
    assert mu[0] < 100.0


def test_sigma_is_clipped_at_zero() -> None:
    # A large lr_sigma on a correctly classified instance drives sigma below 0.
    _, sigma = fires_update(
        np.array([1.0]), np.array([1.0]), np.array([[3.0]]), np.array([1.0]), lr_sigma=1e6
    )
    assert sigma.tolist() == [0.0]


def test_batch_row_order_does_not_matter() -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 5))
    y = np.where(rng.random(50) < 0.4, 1.0, -1.0)
    mu, sigma = rng.normal(size=5), rng.uniform(0.5, 1.0, size=5)
    perm = rng.permutation(50)
    a = fires_update(mu, sigma, X, y, epochs=2)
    b = fires_update(mu, sigma, X[perm], y[perm], epochs=2)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(a[1], b[1], rtol=1e-13, atol=1e-15)


def test_inputs_are_left_alone() -> None:
    mu, sigma = np.array([0.1, 0.2]), np.array([1.0, 1.0])
    X, y = np.array([[1.0, -1.0], [0.5, 2.0]]), np.array([1.0, -1.0])
    copies = [a.copy() for a in (mu, sigma, X, y)]
    new_mu, new_sigma = fires_update(mu, sigma, X, y, epochs=2)
    for a, c in zip((mu, sigma, X, y), copies, strict=True):
        assert np.array_equal(a, c)
    assert new_mu is not mu and new_sigma is not sigma
    empty = fires_update(mu, sigma, np.zeros((0, 2)), np.zeros(0))
    assert empty[0].tolist() == mu.tolist() and empty[0] is not mu


def test_one_vs_rest_is_per_class_binary_and_max_of_weights() -> None:
    rng = np.random.default_rng(11)
    X = rng.normal(size=(30, 4))
    codes = rng.integers(0, 3, size=30)
    mu = np.zeros((3, 4))
    sigma = np.ones((3, 4))
    mus, sigmas = fires_update_ovr(mu, sigma, X, codes)
    for k in range(3):
        m_k, s_k = fires_update(mu[k], sigma[k], X, np.where(codes == k, 1.0, -1.0))
        assert np.array_equal(mus[k], m_k) and np.array_equal(sigmas[k], s_k)
    per_class = np.stack([fires_weights(mus[k], sigmas[k]) for k in range(3)])
    assert np.array_equal(fires_weights(mus, sigmas), per_class.max(axis=0))
    # Relabelling the classes permutes the models and leaves the weights unchanged.
    perm = np.array([2, 0, 1])
    mus2, sigmas2 = fires_update_ovr(mu, sigma, X, perm[codes])
    assert np.array_equal(fires_weights(mus2, sigmas2), fires_weights(mus, sigmas))


def test_conformance_vector() -> None:
    # tests/data/make_fires_expected.py: computed by an independent transcription
    # of the rules, checked here against the numerical core.
    document = json.loads(EXPECTED.read_text())
    params, expected = document["params"], document["expected"]
    f = params["fires"]
    d = params["d"]
    mu, sigma = np.full(d, f["mu_init"]), np.full(d, f["sigma_init"])
    for X, y in make_stream(params):
        mu, sigma = fires_update(mu, sigma, X, y, lr_mu=f["lr_mu"], lr_sigma=f["lr_sigma"])
    weights = fires_weights(mu, sigma, penalty_s=f["penalty_s"], penalty_r=f["penalty_r"])
    np.testing.assert_allclose(mu, expected["mu"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sigma, expected["sigma"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(weights, expected["weights"], rtol=1e-9, atol=1e-12)
    assert top_m(weights, f["num_features"]).tolist() == expected["top"]
    # The five informative features of the generated stream come first.
    assert set(expected["top"][:5]) == {3, 7, 11, 15, 19}
    assert len(make_stream(params)) == params["batches"]


def test_multiclass_conformance_vector() -> None:
    document = json.loads(EXPECTED.read_text())["multiclass"]
    params, expected = document["params"], document["expected"]
    f = params["fires"]
    k, d = len(expected["classes"]), params["d"]
    mu, sigma = np.full((k, d), f["mu_init"]), np.full((k, d), f["sigma_init"])
    code = {name: i for i, name in enumerate(expected["classes"])}
    for X, labels in make_multiclass_stream(params):
        codes = np.array([code[label] for label in labels])
        mu, sigma = fires_update_ovr(mu, sigma, X, codes, lr_mu=f["lr_mu"], lr_sigma=f["lr_sigma"])
    np.testing.assert_allclose(mu, expected["mu"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sigma, expected["sigma"], rtol=1e-9, atol=1e-12)
    weights = fires_weights(mu, sigma)
    np.testing.assert_allclose(weights, expected["weights"], rtol=1e-9, atol=1e-12)
    assert top_m(weights, f["num_features"]).tolist() == expected["top"]
    # The shifted features of the three classes lead.
    assert set(expected["top"][:5]) == {2, 5, 9, 14, 17}


def _sparse_batch(rng: np.random.Generator, n: int, d: int, density: float) -> np.ndarray:
    return rng.normal(size=(n, d)) * (rng.random((n, d)) < density)


def test_batch_form_depends_on_the_values_only() -> None:
    import scipy.sparse as sp

    rng = np.random.default_rng(12)
    low = _sparse_batch(rng, 20, 5000, 0.01)  # 1% non-zero: at most 1/16 -> sparse
    high = _sparse_batch(rng, 20, 5000, 0.2)  # 20%: dense
    narrow = _sparse_batch(rng, 20, 300, 0.01)  # fewer than 4,096 features: dense
    for X, sparse in [(low, True), (high, False), (narrow, False)]:
        for given_as in (X, sp.csr_matrix(X), sp.coo_matrix(X), sp.csc_matrix(X)):
            form = batch_form(given_as)
            assert hasattr(form, "nnz") is sparse
            dense = form.toarray() if sparse else form
            assert np.array_equal(dense, X)
    # Explicit zeros and duplicates do not count: the canonical form decides.
    M = sp.csr_matrix(low)
    padded = sp.csr_matrix(
        (np.r_[M.data, 0.0], np.r_[M.indices, 4999], np.r_[M.indptr[:-1], M.nnz + 1]),
        shape=M.shape,
    )
    form = batch_form(padded)
    assert form.nnz == M.nnz and np.array_equal(form.toarray(), low)


def test_a_feature_absent_from_a_batch_keeps_its_mu_and_sigma() -> None:
    # The penalties enter only the weights: the update of a feature that is 0 in
    # every row of the batch is exactly 0, in the sparse form and the dense one.
    import scipy.sparse as sp

    rng = np.random.default_rng(13)
    for d in (40, 5000):
        X = _sparse_batch(rng, 30, d, 0.01 if d > 100 else 0.3)
        X[:, :5] = 0.0
        X[:, 5] = rng.normal(size=30)
        y = np.where(rng.random(30) < 0.5, 1.0, -1.0)
        mu = rng.normal(size=d)
        sigma = rng.uniform(0.0, 2.0, size=d)
        absent = ~X.any(axis=0)
        for given_as in (X, sp.csr_matrix(X)):
            new_mu, new_sigma = fires_update(mu, sigma, given_as, y, epochs=2)
            assert np.array_equal(new_mu[absent], mu[absent])
            assert np.array_equal(new_sigma[absent], sigma[absent])
            assert not np.array_equal(new_mu[5], mu[5])


def test_sparse_form_agrees_with_the_dense_form() -> None:
    # Twenty batches at d = 6,000, 2% non-zero (computed sparse), against the same
    # update computed dense: the sums run in another order, so equal up to rounding.
    import scipy.sparse as sp

    rng = np.random.default_rng(14)
    n, d = 100, 6000
    mu_s, sigma_s = np.zeros(d), np.ones(d)
    mu_d, sigma_d = np.zeros(d), np.ones(d)
    for _ in range(20):
        X = _sparse_batch(rng, n, d, 0.02)
        y = np.where(X[:, :50].sum(axis=1) >= 0.0, 1.0, -1.0)
        assert hasattr(batch_form(X), "nnz")
        mu_s, sigma_s = fires_update(mu_s, sigma_s, sp.csr_matrix(X), y, epochs=2)
        dense = fires_module._Batch(X, X * X, None, None, n)
        mu_d, sigma_d = fires_module._update(mu_d, sigma_d, dense, y, 0.01, 0.01, 2)
    assert np.abs(mu_s - mu_d).max() <= 1e-12 * np.abs(mu_d).max()
    np.testing.assert_allclose(sigma_s, sigma_d, rtol=1e-12, atol=0.0)
    w_s, w_d = fires_weights(mu_s, sigma_s), fires_weights(mu_d, sigma_d)
    np.testing.assert_allclose(w_s, w_d, rtol=1e-12, atol=1e-15)
    assert top_m(w_s, 50).tolist() == top_m(w_d, 50).tolist()


@pytest.mark.parametrize("d", [7, 60, 3000, 20000])
def test_top_m_is_the_head_of_a_stable_sort(d: int) -> None:
    rng = np.random.default_rng(d)
    for trial in range(30):
        # Normal weights, or few distinct values: many ties.
        w = rng.normal(size=d) if trial % 3 == 0 else rng.integers(0, 1 + trial % 5, size=d) / 4.0
        if trial % 4 == 0:
            w[rng.random(d) < 0.3] = -0.0
        for m in (0, 1, 5, d // 9, d // 8 + 1, d, d + 3):
            expected = np.argsort(-w, kind="stable")[:m]
            assert top_m(w, m).tolist() == expected.tolist()
