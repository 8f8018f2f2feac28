"""Forgetting by half_life in FSDS and FIRES (selectors/forgetting.py, docs/algorithms.md)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from featurestream import codec
from featurestream.errors import InvalidParameter
from featurestream.selectors import FIRES, FSDS, FIRESParams, FSDSParams
from featurestream.selectors.forgetting import retention, row_weights

NAMES = ["a", "b", "c"]


def test_retention_and_row_weights_by_hand() -> None:
    assert retention(2.0, 2) == 0.5
    assert retention(2.0, 0) == 1.0
    assert retention(None, 1000) == 1.0
    assert row_weights(2.0, 3).tolist() == [0.5, 2**-0.5, 1.0]
    assert row_weights(None, 2).tolist() == [1.0, 1.0]
    assert row_weights(5.0, 0).shape == (0,)


@pytest.mark.parametrize("cls", [FSDSParams, FIRESParams])
@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), "10", True])
def test_a_bad_half_life_is_refused(cls: type, bad: object) -> None:
    with pytest.raises(InvalidParameter, match="half_life"):
        cls(num_features=1, half_life=bad)


def gram(sel: FSDS) -> np.ndarray:
    B = sel.state.sketch
    return B @ B.T


def test_fsds_half_life_weighs_the_sketch_by_age() -> None:
    # l = 4 > d = 3: nothing is shrunk, so B B^T is the weighted sum of x x^T exactly.
    x1, x2 = np.array([[1.0, 0.0, 2.0]]), np.array([[0.0, 3.0, 1.0]])
    sel = FSDS.start(FSDSParams(num_features=1, sketch_size=4, half_life=1.0), NAMES)
    sel.learn_instances(x1)
    sel.learn_instances(x2)
    expected = 0.5 * x1.T @ x1 + x2.T @ x2
    np.testing.assert_allclose(gram(sel), expected, rtol=1e-12, atol=1e-12)


def test_fsds_without_half_life_is_the_plain_sum() -> None:
    x = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 1.0]])
    sel = FSDS.start(FSDSParams(num_features=1, sketch_size=4), NAMES)
    sel.learn_instances(x[:1])
    sel.learn_instances(x[1:])
    np.testing.assert_allclose(gram(sel), x.T @ x, rtol=1e-12, atol=1e-12)


def test_fsds_forgetting_follows_a_switch_the_full_history_does_not() -> None:
    rng = np.random.default_rng(0)
    before = rng.normal(size=(200, 3)) * [5.0, 0.1, 0.1]
    after = rng.normal(size=(40, 3)) * [0.1, 2.0, 0.1]
    picks = {}
    for h in (None, 5.0):
        sel = FSDS.start(FSDSParams(num_features=1, sketch_size=2, k=1, half_life=h), NAMES)
        for X in (before, after):
            for i in range(0, len(X), 10):
                sel.learn_instances(X[i : i + 10])
        picks[h] = sel.selected()
    assert picks[None] == ("a",)
    assert picks[5.0] == ("b",)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    n=st.integers(1, 12),
    half_life=st.floats(0.5, 50.0),
)
def test_fsds_a_batch_forgets_as_its_instances_one_by_one(
    seed: int, n: int, half_life: float
) -> None:
    X = np.random.default_rng(seed).normal(size=(n, 3))
    params = FSDSParams(num_features=2, sketch_size=4, half_life=half_life)
    whole = FSDS.start(params, NAMES)
    whole.learn_instances(X)
    single = FSDS.start(params, NAMES)
    for row in X:
        single.learn_instances(row[None, :])
    np.testing.assert_allclose(gram(whole), gram(single), rtol=1e-9, atol=1e-12)


def test_fires_half_life_pulls_toward_the_prior_by_hand() -> None:
    # Rows of zeros have no gradient: only the pull toward the prior moves mu and sigma.
    p = FIRESParams(num_features=1, scale="none", half_life=2.0, mu_init=0.5, sigma_init=1.0)
    sel = FIRES.start(p, ["a", "b"])
    sel.learn_instances(np.array([[1.0, -1.0]]), [1])
    mu, sigma = sel.state.mu.copy(), sel.state.sigma.copy()
    sel.learn_instances(np.zeros((2, 2)), [1, 0])
    # Two instances, h = 2: half of the distance to the prior is left.
    np.testing.assert_allclose(sel.state.mu, 0.5 + 0.5 * (mu - 0.5), rtol=1e-15)
    np.testing.assert_allclose(sel.state.sigma, 1.0 + 0.5 * (sigma - 1.0), rtol=1e-15)


def test_fires_without_half_life_keeps_what_a_batch_of_zeros_cannot_move() -> None:
    p = FIRESParams(num_features=1, scale="none", mu_init=0.5)
    sel = FIRES.start(p, ["a", "b"])
    sel.learn_instances(np.array([[1.0, -1.0]]), [1])
    mu = sel.state.mu.copy()
    sel.learn_instances(np.zeros((3, 2)), [1, 0, 1])
    assert np.array_equal(sel.state.mu, mu)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 20), half_life=st.floats(0.5, 50.0), classes=st.sampled_from([2, 3]))
def test_fires_a_batch_forgets_as_its_instances_one_by_one(
    n: int, half_life: float, classes: int
) -> None:
    p = FIRESParams(num_features=1, scale="none", half_life=half_life, mu_init=0.2)
    labels = [0, 1, 2][:classes]
    whole = FIRES.start(p, ["a", "b"], target_type="auto")
    whole.learn_instances(np.array([[1.0, -1.0], [0.5, 2.0], [1.0, 1.0]]), [0, 1, labels[-1]])
    single = FIRES.resume(p, whole.snapshot())
    y = [labels[i % classes] for i in range(n)]
    whole.learn_instances(np.zeros((n, 2)), y)
    for label in y:
        single.learn_instances(np.zeros((1, 2)), [label])
    np.testing.assert_allclose(whole.state.mu, single.state.mu, rtol=1e-12)
    np.testing.assert_allclose(whole.state.sigma, single.state.sigma, rtol=1e-12)


def test_fires_forgetting_follows_a_switch_the_full_history_does_not() -> None:
    rng = np.random.default_rng(1)
    picks = {}
    for h in (None, 50.0):
        sel = FIRES.start(FIRESParams(num_features=1, half_life=h, lr_mu=0.1), ["a", "b"])
        for relevant, n in ((0, 3000), (1, 300)):
            X = rng.normal(size=(n, 2))
            y = (X[:, relevant] > 0).astype(int)
            for i in range(0, n, 10):
                sel.learn_instances(X[i : i + 10], y[i : i + 10])
        picks[h] = sel.selected()
        rng = np.random.default_rng(1)
    assert picks[None] == ("a",)
    assert picks[50.0] == ("b",)


@pytest.mark.parametrize(
    ("cls", "params"),
    [
        (FSDS, FSDSParams(num_features=2, half_life=10.0)),
        (FIRES, FIRESParams(num_features=2, half_life=10.0)),
    ],
)
def test_state_size_does_not_grow_with_the_instances(cls: type, params: object) -> None:
    rng = np.random.default_rng(2)
    sel = cls.start(params, NAMES)
    sizes = []
    for _ in range(3):
        X = rng.normal(size=(600, 3))
        for i in range(0, 600, 50):
            sel.learn_instances(X[i : i + 50], (X[i : i + 50, 0] > 0).astype(int))
        state = codec.decode(codec.encode(sel.name, sel.params.to_dict(), sel.snapshot())).state
        sizes.append(sum(np.asarray(v).size for v in vars(state).values()))
    # The last 1,000 prequential outcomes of FIRES are full after 1,200 instances.
    assert sizes[1] == sizes[2]
