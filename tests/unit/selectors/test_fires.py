"""FIRES as an instance-stream selector (docs/algorithms/fires.md)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from featurestream import codec
from featurestream.errors import InvalidInput, InvalidParameter
from featurestream.selectors import REGISTRY
from featurestream.selectors.fires import FIRES, FIRESParams
from featurestream.stats.fires import fires_update, fires_weights
from featurestream.stats.scaling import standardise_running
from tests.data.make_fires_expected import make_multiclass_stream, make_stream
from tests.unit.selectors.common import blob

EXPECTED = Path(__file__).parents[2] / "data" / "fires_expected.json"


def start(d: int = 2, **params: object) -> FIRES:
    p = FIRESParams.from_mapping({"num_features": 1, **params})
    return FIRES.start(p, [f"f{j}" for j in range(d)])


def test_registered_and_supervised() -> None:
    assert REGISTRY["fires"] is FIRES
    assert FIRES.kind == "instances" and FIRES.supervised and not FIRES.batch_invariant


def test_num_features_is_required() -> None:
    with pytest.raises(InvalidParameter) as info:
        FIRESParams.from_mapping({})
    assert info.value.parameter == "num_features"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("num_features", 0),
        ("sigma_init", -0.5),
        ("penalty_s", -1.0),
        ("penalty_r", 0.0),
        ("lr_mu", 0.0),
        ("lr_sigma", -0.1),
        ("epochs", 0),
        ("scale_weights", "yes"),
        ("scale", "minmax"),
    ],
)
def test_bad_parameter_is_refused_by_name(name: str, value: object) -> None:
    with pytest.raises(InvalidParameter) as info:
        FIRESParams.from_mapping({"num_features": 2, name: value})
    assert info.value.parameter == name
    assert str(info.value).startswith(f"The {name!r} parameter of FIRES must be")


def test_one_batch_of_two_worked_by_hand() -> None:
    # mu_init = 0.5, sigma = 1, scale none; x1 = (1, 2) with y = +1, x2 = (2, 0) with
    # y = 0, that is -1.
    # dot = X mu = (1.5, 1.0); rho = sqrt(1 + x^2 . sigma^2) = (sqrt 6, sqrt 5)
    #   = (2.449490, 2.236068); t = y dot / rho = (0.612372, -0.447214).
    # r = phi(t) / Phi(t) = (0.330735 / 0.729854, 0.360978 / 0.327360) = (0.453152, 1.102693).
    # Row coefficients r y / rho = (0.184998, -0.493139):
    #   grad_mu = mean(0.184998 (1, 2), -0.493139 (2, 0)) = (-0.400640, 0.184998).
    # Row coefficients r (-y / rho^3) dot = (-0.046250, 0.098628):
    #   grad_sigma = mean(-0.046250 (1, 4), 0.098628 (4, 0)) * sigma = (0.174131, -0.092499).
    # Learning rates 0.01: mu = (0.495994, 0.501850), sigma = (1.001741, 0.999075).
    # Weights (mu^2 - 0.01 sigma^2) / 0.02 = (11.798740, 12.093595): f1 first, and
    # min-max scaled (0, 1).
    sel = start(scale="none", mu_init=0.5)
    u = sel.learn_instances([[1.0, 2.0], [2.0, 0.0]], [1, 0])
    assert (u.instances, u.instances_seen, u.selection_changed) == (2, 2, True)
    np.testing.assert_allclose(sel.state.mu, [[0.4959936, 0.50184998]], rtol=1e-7)
    np.testing.assert_allclose(sel.state.sigma, [[1.00174131, 0.99907501]], rtol=1e-8)
    np.testing.assert_allclose(sel.weights(), [0.0, 1.0])
    assert [(f.name, f.score) for f in sel.selected_features()] == [("f1", 1.0)]
    raw = FIRES.start(
        FIRESParams(num_features=2, scale="none", mu_init=0.5, scale_weights=False), ["a", "b"]
    )
    raw.learn_instances([[1.0, 2.0], [2.0, 0.0]], [1, -1])
    np.testing.assert_allclose(
        [f.score for f in raw.selected_features()], [12.0935949, 11.79873979], rtol=1e-8
    )
    assert raw.selected() == ("b", "a")


def test_labels_zero_one_and_minus_one_plus_one_agree() -> None:
    X = np.random.default_rng(1).normal(size=(10, 3))
    y01 = np.array([0, 1, 1, 0, 1, 0, 0, 1, 1, 1])
    a, b = start(3), start(3)
    a.learn_instances(X, y01)
    b.learn_instances(X, 2 * y01 - 1)
    # The same model; each stream keeps its own labels as its classes.
    assert (a.state.classes, b.state.classes) == ((0, 1), (-1, 1))
    relabelled = dataclasses.replace(
        b.state, classes=a.state.classes, first_label=a.state.first_label
    )
    assert codec.encode(b.name, b.params.to_dict(), relabelled) == blob(a)


@pytest.mark.parametrize("y", [[0.5, 1], [1, 2.5]])
def test_labels_that_look_continuous_are_refused_and_change_nothing(y: list[float]) -> None:
    sel = start()
    before = blob(sel)
    with pytest.raises(InvalidInput, match="Labels must be class labels; these look continuous"):
        sel.learn_instances([[1.0, 2.0], [0.0, 1.0]], y)
    assert blob(sel) == before


@pytest.mark.parametrize("y", [[2, 1], [0, -1], [1, 3], [7, 5], ["b", "a"]])
def test_any_two_labels_learn_the_binary_model(y: list[Any]) -> None:
    """The first label seen is -1 (the number 1 is always +1): the model of 0/1 or its mirror."""
    X = [[1.0, 2.0], [0.0, 1.0]]
    base = start()
    base.learn_instances(X, [1, 0])
    sel = start()
    sel.learn_instances(X, y)
    assert sel.state.mu.shape == (1, 2)
    assert np.array_equal(np.abs(sel.state.mu), np.abs(base.state.mu))
    assert np.array_equal(sel.state.sigma, base.state.sigma)
    assert sel.selected() == base.selected()


def test_labels_are_required() -> None:
    with pytest.raises(InvalidInput, match="needs labels"):
        start().learn_instances([[1.0, 2.0]])


def test_standard_scaling_learns_from_the_running_standardised_instances() -> None:
    # Batch [[0, 5], [2, 5]]: row 1 has variance 0 so far -> (0, 0); row 2 sees mean
    # (1, 5) and population variance (1, 0) -> (1, 0). The model then learns as
    # scale none does from those values, and the State keeps mean (1, 5), M2 (2, 0).
    X = np.array([[0.0, 5.0], [2.0, 5.0]])
    scaled = start(scale="standard")
    scaled.learn_instances(X, [1, 0])
    plain = start(scale="none")
    plain.learn_instances([[0.0, 0.0], [1.0, 0.0]], [1, 0])
    assert np.array_equal(scaled.state.mu, plain.state.mu)
    assert np.array_equal(scaled.state.sigma, plain.state.sigma)
    assert scaled.state.scale_mean.tolist() == [1.0, 5.0]
    assert scaled.state.scale_M2.tolist() == [2.0, 0.0]
    assert plain.state.scale_mean.shape == (0,) and plain.state.scale_M2.shape == (0,)
    # A second batch continues the running statistics across the boundary.
    X2 = np.array([[4.0, 6.0]])
    scaled.learn_instances(X2, [1])
    z = standardise_running(2, np.array([1.0, 5.0]), np.array([2.0, 0.0]), X2)
    plain.learn_instances(z.Z, [1])
    assert np.array_equal(scaled.state.mu, plain.state.mu)
    assert scaled.state.scale_mean.tolist() == z.mean.tolist()


def test_scaling_makes_the_units_irrelevant() -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] + X[:, 2] > 0).astype(float)
    a, b = start(3, num_features=3), start(3, num_features=3)
    for lo in range(0, 200, 50):
        a.learn_instances(X[lo : lo + 50], y[lo : lo + 50])
        b.learn_instances(X[lo : lo + 50] * [1000.0, 1.0, 0.001] + 7.0, y[lo : lo + 50])
    np.testing.assert_allclose(a.state.mu, b.state.mu, rtol=1e-9, atol=1e-12)
    assert a.selected() == b.selected()


def test_nothing_selected_before_the_first_batch_and_empty_batches_do_not_count() -> None:
    sel = start(num_features=2)
    assert sel.selected_features() == ()
    u = sel.learn_instances(np.zeros((0, 2)), np.zeros(0))
    assert (u.instances, u.selection_changed) == (0, False)
    assert sel.status() == {
        "instances_seen": 0,
        "target_type": "auto",
        "classes": [],
        "batches_seen": 0,
        "scale": "standard",
    }
    sel.learn_instances([[1.0, 0.0]], [1])
    assert len(sel.selected()) == 2
    assert sel.status() == {
        "instances_seen": 1,
        "target_type": "binary",
        "classes": [1],
        "batches_seen": 1,
        "scale": "standard",
    }


def test_batch_boundaries_are_part_of_the_result() -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(8, 3))
    y = (X[:, 1] > 0).astype(float)
    whole, halves = start(3, scale="none"), start(3, scale="none")
    whole.learn_instances(X, y)
    halves.learn_instances(X[:4], y[:4])
    halves.learn_instances(X[4:], y[4:])
    assert not np.array_equal(whole.state.mu, halves.state.mu)
    assert halves.status()["batches_seen"] == 2
    mu, sigma = fires_update(np.zeros(3), np.ones(3), X, np.where(y == 1, 1.0, -1.0))
    assert np.array_equal(whole.state.mu[0], mu) and np.array_equal(whole.state.sigma[0], sigma)


def test_epochs_and_learning_rates_reach_the_update() -> None:
    X = np.array([[1.0, -2.0], [0.5, 1.0], [2.0, 0.0]])
    y = np.array([1.0, -1.0, 1.0])
    sel = start(scale="none", epochs=3, lr_mu=0.3, lr_sigma=0.2, mu_init=0.1, sigma_init=2.0)
    sel.learn_instances(X, y)
    mu, sigma = fires_update(
        np.full(2, 0.1), np.full(2, 2.0), X, y, lr_mu=0.3, lr_sigma=0.2, epochs=3
    )
    assert np.array_equal(sel.state.mu[0], mu) and np.array_equal(sel.state.sigma[0], sigma)
    weights = fires_weights(mu, sigma)
    assert np.array_equal(sel.weights(), weights)


def test_conformance_vector_through_the_selector() -> None:
    document = json.loads(EXPECTED.read_text())
    params = document["params"]
    expected = document["expected"]
    d = params["d"]
    sel = FIRES.start(FIRESParams.from_mapping(params["fires"]), [f"x{j}" for j in range(d)])
    for X, y in make_stream(params):  # batches of 100, labels in {-1, +1}
        sel.learn_instances(X, y)
    assert sel.status()["batches_seen"] == params["batches"]
    np.testing.assert_allclose(sel.state.mu[0], expected["mu"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sel.state.sigma[0], expected["sigma"], rtol=1e-9, atol=1e-12)
    assert sel.selected() == tuple(f"x{j}" for j in expected["top"])
    np.testing.assert_allclose(
        [f.score for f in sel.selected_features()],
        [expected["weights"][j] for j in expected["top"]],
        rtol=1e-9,
        atol=1e-12,
    )
    # The same stream with labels 0/1 gives the same state (its classes are its own labels).
    again = FIRES.start(FIRESParams.from_mapping(params["fires"]), [f"x{j}" for j in range(d)])
    for X, y in make_stream(params):
        again.learn_instances(X, (y + 1) / 2)
    same = dataclasses.replace(
        again.state, classes=sel.state.classes, first_label=sel.state.first_label
    )
    assert codec.encode(again.name, again.params.to_dict(), same) == blob(sel)


@pytest.mark.parametrize("relabel", [False, True])
def test_multiclass_conformance_vector_through_the_selector(relabel: bool) -> None:
    # Three string classes, one-vs-rest (tests/data/make_fires_expected.py, computed
    # by an independent transcription of the rules). Relabelled (other strings, in
    # another sorted order) the weights and the selection must be the same.
    document = json.loads(EXPECTED.read_text())["multiclass"]
    params, expected = document["params"], document["expected"]
    d = params["d"]
    rename = {"avocet": "zz", "heron": "aa", "tern": "mm"} if relabel else {}
    sel = FIRES.start(FIRESParams.from_mapping(params["fires"]), [f"x{j}" for j in range(d)])
    for X, labels in make_multiclass_stream(params):
        sel.learn_instances(X, [rename.get(label, label) for label in labels])
    assert sel.status()["target_type"] == "multiclass"
    assert sel.status()["batches_seen"] == params["batches"]
    classes = [rename.get(c, c) for c in expected["classes"]]
    assert list(sel.state.classes) == sorted(classes)
    # The model of each class, whatever its position in the sorted labels.
    for i, name in enumerate(classes):
        row = sorted(classes).index(name)
        np.testing.assert_allclose(sel.state.mu[row], expected["mu"][i], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(
            sel.state.sigma[row], expected["sigma"][i], rtol=1e-9, atol=1e-12
        )
    np.testing.assert_allclose(sel.weights(), expected["weights"], rtol=1e-9, atol=1e-12)
    assert sel.selected() == tuple(f"x{j}" for j in expected["top"])
    np.testing.assert_allclose(
        [f.score for f in sel.selected_features()],
        [expected["weights"][j] for j in expected["top"]],
        rtol=1e-9,
        atol=1e-12,
    )


def test_sparse_batches_equal_their_dense_form() -> None:
    import scipy.sparse as sp

    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 6)) * (rng.random((30, 6)) < 0.3)
    y = rng.integers(0, 2, 30)
    a, b = start(6, num_features=3), start(6, num_features=3)
    a.learn_instances(X, y)
    b.learn_instances(sp.csr_matrix(X), y)
    assert blob(a) == blob(b)


@pytest.mark.parametrize("scale", ["none", "standard"])
def test_sparse_stream_equals_its_dense_form_at_high_dimension(scale: str) -> None:
    # d = 5,000 at 1% non-zero: with scale none the batches are computed sparse
    # (stats.fires.batch_form), whichever form they arrive in; standardised ones
    # are dense. Either way the two streams end on the same bytes and selection.
    import scipy.sparse as sp

    rng = np.random.default_rng(15)
    n, d = 300, 5000
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.01)
    X[:, :10] += np.sign(rng.normal(size=(n, 1))) * (rng.random((n, 10)) < 0.3)
    y = (X[:, :10].sum(axis=1) > 0).astype(int)
    a, b = start(d, num_features=10, scale=scale), start(d, num_features=10, scale=scale)
    for lo in range(0, n, 100):
        ua = a.learn_instances(X[lo : lo + 100], y[lo : lo + 100])
        ub = b.learn_instances(sp.csr_matrix(X[lo : lo + 100]), y[lo : lo + 100])
        assert ua == ub
    assert blob(a) == blob(b)
    assert a.selected_features() == b.selected_features()


def test_sparse_multiclass_stream_equals_its_dense_form() -> None:
    # One-vs-rest over a batch computed sparse: every class's model as from the dense form.
    import scipy.sparse as sp

    rng = np.random.default_rng(18)
    n, d = 200, 4500
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.01)
    codes = rng.integers(0, 3, size=n)
    X[np.arange(n), 7 + codes] += 2.0  # class k lights up feature 7 + k
    labels = [("lo", "mid", "hi")[k] for k in codes]
    a, b = start(d, num_features=5, scale="none"), start(d, num_features=5, scale="none")
    for lo in range(0, n, 100):
        a.learn_instances(X[lo : lo + 100], labels[lo : lo + 100])
        b.learn_instances(sp.csr_matrix(X[lo : lo + 100]), labels[lo : lo + 100])
    assert a.state.mu.shape == (3, d)
    assert blob(a) == blob(b)
    assert set(a.selected()[:3]) == {"f7", "f8", "f9"}


def test_sparse_stream_agrees_with_a_plain_dense_transcription() -> None:
    # The sparse computation against the plain numpy transcription of the bench
    # (dense, the reference's layout): same mu, sigma and weights to rounding, same top m.
    import scipy.sparse as sp

    from featurestream.bench.fires_kernel import plain_fires

    rng = np.random.default_rng(16)
    n, d = 1000, 8000
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.005)
    X[:, 100:110] += rng.random((n, 10)) < 0.2
    y = np.where(X[:, 100:110].sum(axis=1) + rng.normal(scale=0.3, size=n) > 0.5, 1.0, -1.0)
    sel = start(d, num_features=20, scale="none")
    for lo in range(0, n, 100):
        sel.learn_instances(sp.csr_matrix(X[lo : lo + 100]), y[lo : lo + 100])
    ref = plain_fires(X, y, 20)
    mu, sigma = sel.state.mu[0], sel.state.sigma[0]
    assert np.abs(mu - ref.mu).max() <= 1e-12 * np.abs(ref.mu).max()
    np.testing.assert_allclose(sigma, ref.sigma, rtol=1e-12, atol=0.0)
    # The raw weights to rounding; min-max scaling magnifies the rounding near the
    # minimum (by the weights' magnitude over their range), not the order.
    raw = (mu * mu - 0.01 * sigma * sigma) / 0.02
    np.testing.assert_allclose(raw, ref.raw_weights, rtol=1e-12, atol=0.0)
    np.testing.assert_allclose(sel.weights(), ref.weights, rtol=0.0, atol=1e-10)
    assert sel.selected() == tuple(f"f{j}" for j in ref.top)
    assert set(sel.selected()[:10]) == {f"f{j}" for j in range(100, 110)}


def test_labels_of_a_known_binary_target_take_the_vectorised_path_to_the_same_result() -> None:
    # typed_labels answers a batch of known binary labels without the general
    # resolution; its answer (and its refusals) must be the general path's.
    from featurestream.selectors.batch_labels import instance_labels_typed, typed_labels

    rng = np.random.default_rng(17)
    pools: list[list[object]] = [[0, 1], [0.0, 1.0, 1], [-1, 1], [-1.0, 1.0], [0, 1, 2], [0, -1]]
    pools += [[1, 0.5], [True, False], ["a", "b"], [1, "1"], [np.int64(1), 0], [float("nan"), 1]]
    for classes, first in [((0, 1), 0), ((-1, 1), 1), ((0, 1), 1)]:
        sel = FIRES.start(FIRESParams(num_features=1), ["a", "b"], target_type="binary")
        sel.state = dataclasses.replace(sel.state, classes=classes, first_label=first)
        for pool in pools:
            for _ in range(20):
                y = [pool[i] for i in rng.integers(0, len(pool), size=int(rng.integers(1, 8)))]
                try:
                    general = instance_labels_typed("FIRES", True, "binary", classes, first, y)
                except InvalidInput as e:
                    with pytest.raises(InvalidInput) as info:
                        typed_labels(sel, y)
                    assert str(info.value) == str(e)
                    continue
                fields, values = typed_labels(sel, y)
                assert fields == {
                    "target_type": general.target_type,
                    "classes": general.classes,
                    "first_label": general.first,
                }
                assert values.tolist() == general.values.tolist()
