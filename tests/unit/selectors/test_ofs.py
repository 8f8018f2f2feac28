"""OFS and OFS-P: hand-worked updates, conformance vectors and batching properties."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import featurestream.selectors
from featurestream import codec
from featurestream.errors import InvalidInput, InvalidParameter
from featurestream.selectors.ofs import OFS, OFSParams, OFSState, truncate
from tests.unit.selectors.common import blob

DATA = Path(__file__).resolve().parents[2] / "data"
NAMES3 = ["a", "b", "c"]


@pytest.fixture(autouse=True)
def _registered(monkeypatch: pytest.MonkeyPatch) -> None:
    # The registry does not list OFS yet; codec.decode looks selectors up there.
    monkeypatch.setitem(featurestream.selectors.REGISTRY, OFS.name, OFS)


def start(d: int = 3, **params: object) -> OFS:
    # The hand-worked updates below follow the published rule on the values as
    # sent (scale: "none"); the tests of scale: "standard" say so explicitly.
    params.setdefault("scale", "none")
    return OFS.start(OFSParams.from_mapping(params), [f"x{i}" for i in range(d)])


# --------------------------------------------------------------------------- params


def test_ofs_num_features_is_required() -> None:
    with pytest.raises(InvalidParameter, match="'num_features' parameter of OFS is required") as e:
        OFSParams.from_mapping({})
    assert e.value.parameter == "num_features"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("num_features", 0),
        ("eta", 0.0),
        ("lam", -1.0),
        ("margin", -0.5),
        ("decay", 1.0),
        ("mode", "sparse"),
        ("epsilon", 0.0),
        ("epsilon", 1.5),
        ("seed", -1),
    ],
)
def test_ofs_rejects_bad_parameter(name: str, value: object) -> None:
    with pytest.raises(InvalidParameter) as e:
        OFSParams.from_mapping({"num_features": 2, name: value})
    assert e.value.parameter == name


# --------------------------------------------------------------------------- hand-worked


def test_ofs_margin_violation_takes_gradient_step() -> None:
    # w = 0 gives w . x = 0: predicted +1 (sign(0) = +1), correct for y = 1.
    # The margin y w.x = 0 <= 1, so w~ = 0 + 0.5 * 1 * [1, 0, 2] = [0.5, 0, 1];
    # ||w~|| = sqrt(1.25) = 1.118 < 1/sqrt(0.01) = 10: no projection; 2 <= B non-zeros.
    sel = start(num_features=2, eta=0.5)
    u = sel.learn_instances([[1.0, 0.0, 2.0]], [1])
    assert u.predictions == (1,)
    assert u.mistakes == 0
    assert u.instances == 1 and u.instances_seen == 1
    assert u.selection_changed
    np.testing.assert_array_equal(sel.state.w, [0.5, 0.0, 1.0])
    assert [(f.name, f.score) for f in sel.selected_features()] == [("x2", 1.0), ("x0", 0.5)]


def test_ofs_no_step_when_margin_exceeded() -> None:
    # After [0.5, 0, 1]: x = [4, 0, 0], y = 1 gives y w.x = 2 > 1: w stays as it is.
    sel = start(num_features=2, eta=0.5)
    sel.learn_instances([[1.0, 0.0, 2.0]], [1])
    u = sel.learn_instances([[4.0, 0.0, 0.0]], [1])
    assert u.predictions == (1,) and u.mistakes == 0
    assert not u.selection_changed
    np.testing.assert_array_equal(sel.state.w, [0.5, 0.0, 1.0])


def test_ofs_decay_shrinks_without_step() -> None:
    # margin 0, decay 0.1: [4, 0, 0] has y w.x = 2 > 0, so w = 0.9 [0.5, 0, 1].
    sel = start(num_features=2, eta=0.5, margin=0.0, decay=0.1)
    sel.learn_instances([[1.0, 0.0, 2.0]], [1])
    sel.learn_instances([[4.0, 0.0, 0.0]], [1])
    np.testing.assert_allclose(sel.state.w, [0.45, 0.0, 0.9], rtol=1e-15)


def test_ofs_half_life_scales_w_before_each_step() -> None:
    # half_life 1: lambda = 1/2. x = 1, y = +1, eta = 0.5: w = 0 steps to 0.5; then
    # w . x = 0.5 <= 1 steps again, w = 0.5 * 0.5 + 0.5 = 0.75; x = 4 gives 3 > 1,
    # no step, but w still halves: 0.375.
    sel = start(1, num_features=1, eta=0.5, half_life=1.0)
    u = sel.learn_instances(np.array([[1.0], [1.0], [4.0]]), [1, 1, 1])
    assert u.predictions == (1, 1, 1)
    assert sel.state.w.tolist() == [0.375]


def test_ofs_half_life_halves_a_step_after_that_many_instances() -> None:
    # margin 0: the first instance steps (w . x = 0), the next 10 do not (w . x > 0).
    sel = start(1, num_features=1, eta=0.5, margin=0.0, half_life=10.0)
    sel.learn_instances(np.ones((11, 1)), np.ones(11))
    assert math.isclose(sel.state.w[0], 0.25, rel_tol=1e-12)


def test_ofs_half_life_null_is_no_forgetting() -> None:
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(40, 4)), (rng.random(40) < 0.5).astype(float)
    plain, null = start(4, num_features=2), start(4, num_features=2, half_life=None)
    plain.learn_instances(X, y)
    null.learn_instances(X, y)
    assert blob(plain) == blob(null)


@pytest.mark.parametrize("value", [0.0, -1.0, float("inf"), "ten"])
def test_ofs_half_life_must_be_positive(value: object) -> None:
    with pytest.raises(InvalidParameter):
        OFSParams.from_mapping({"num_features": 1, "half_life": value})


def test_ofs_projects_onto_lam_ball() -> None:
    # lam = 1: radius 1. w~ = [0.5, 0, 1] has norm 1.118 > 1, so
    # w = w~ / 1.118 = [0.4472, 0, 0.8944] (unit norm).
    sel = start(num_features=3, eta=0.5, lam=1.0)
    sel.learn_instances([[1.0, 0.0, 2.0]], [1])
    r = math.sqrt(1.25)
    np.testing.assert_allclose(sel.state.w, [0.5 / r, 0.0, 1.0 / r], rtol=1e-15)
    assert math.isclose(float(np.linalg.norm(sel.state.w)), 1.0, rel_tol=1e-15)


def test_ofs_truncation_tie_kept_by_lower_index() -> None:
    # B = 1. First [1, 0, 2], y = 1: w~ = [0.5, 0, 1] -> Truncate keeps x2: w = [0, 0, 1].
    # Then [-1, 3, -1], y = 0 -> -1: w.x = -1 predicts -1 (correct), margin 1 <= 1:
    # w~ = [0, 0, 1] - 0.5 [-1, 3, -1] = [0.5, -1.5, 1.5]; |-1.5| = |1.5| tie at the
    # boundary: the lower index (x1) is kept.
    sel = start(num_features=1, eta=0.5)
    sel.learn_instances([[1.0, 0.0, 2.0]], [1])
    np.testing.assert_array_equal(sel.state.w, [0.0, 0.0, 1.0])
    u = sel.learn_instances([[-1.0, 3.0, -1.0]], [0])
    assert u.predictions == (-1,) and u.mistakes == 0
    np.testing.assert_array_equal(sel.state.w, [0.0, -1.5, 0.0])
    assert sel.selected() == ("x1",)


def test_truncate_keeps_largest_and_breaks_ties_by_index() -> None:
    v = np.array([1.0, -2.0, 2.0, 2.0, 0.5])
    truncate(v, 2)  # |v| = 1, 2, 2, 2, 0.5: three tie for the last two places
    np.testing.assert_array_equal(v, [0.0, -2.0, 2.0, 0.0, 0.0])
    v = np.array([3.0, 1.0, -1.0, 1.0])
    truncate(v, 2)  # 3 is above the threshold 1; one of the three 1s fits: x1
    np.testing.assert_array_equal(v, [3.0, 1.0, 0.0, 0.0])
    v = np.array([0.0, -4.0, 0.0, 1.0])
    truncate(v, 2)  # only two non-zeros: nothing to drop
    np.testing.assert_array_equal(v, [0.0, -4.0, 0.0, 1.0])


def test_ofs_sign_zero_predicts_plus_one() -> None:
    # Fresh w = 0: w.x = 0 -> +1. A label -1 (given as 0) is then a mistake.
    sel = start(num_features=2)
    u = sel.learn_instances([[1.0, 2.0, 3.0]], [0])
    assert u.predictions == (1,)
    assert u.mistakes == 1
    assert sel.status()["mistakes"] == 1


def test_ofs_counts_mistakes_in_a_batch() -> None:
    # B = 3, eta = 0.5. [1, 0, 0], y = -1: predict +1 (mistake); w = [-0.5, 0, 0].
    # [2, 0, 0], y = +1: w.x = -1 -> -1 (mistake); w = [-0.5 + 1, 0, 0] = [0.5, 0, 0].
    # [0, 1, 0], y = +1: w.x = 0 -> +1 (correct); w = [0.5, 0.5, 0].
    sel = start(num_features=3, eta=0.5)
    u = sel.learn_instances([[1.0, 0, 0], [2.0, 0, 0], [0, 1.0, 0]], [-1, 1, 1])
    assert u.predictions == (1, -1, 1)
    assert u.mistakes == 2
    np.testing.assert_array_equal(sel.state.w, [0.5, 0.5, 0.0])
    assert sel.status() == {
        "instances_seen": 3,
        "target_type": "binary",
        "classes": [-1, 1],
        "mistakes": 2,
        "nonzero_weights": 2,
        "mode": "full",
        "scale": "none",
    }


def test_ofs_label_sets_01_and_pm1_agree() -> None:
    X = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, -1.0], [2.0, 1.0, 1.0]])
    a = start(num_features=2, eta=0.5)
    b = start(num_features=2, eta=0.5)
    a.learn_instances(X, [1, 0, 0])
    b.learn_instances(X, [1, -1, -1])
    # The same weights; each stream keeps its own labels as its classes.
    assert (a.state.classes, b.state.classes) == ((0, 1), (-1, 1))
    np.testing.assert_array_equal(a.state.w, b.state.w)
    assert (a.state.mistakes, a.selected()) == (b.state.mistakes, b.selected())


@pytest.mark.parametrize(
    "labels", [[0.5, 1, 1], [1, 2, 3], ["a", 1, 1], [1, float("nan"), 1], [1, None, 1]]
)
def test_ofs_bad_labels_are_rejected_and_change_nothing(labels: list[object]) -> None:
    # Continuous-looking, three classes, strings mixed with numbers, not finite, missing.
    sel = start(num_features=2)
    before = blob(sel)
    with pytest.raises(InvalidInput):
        sel.learn_instances([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]], labels)
    assert blob(sel) == before


def test_ofs_a_third_label_is_refused_after_two_and_changes_nothing() -> None:
    sel = start(num_features=2)
    sel.learn_instances([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]], [5, 7])
    before = blob(sel)
    with pytest.raises(InvalidInput, match="more than 2 classes"):
        sel.learn_instances([[1.0, 0.0, 2.0]], [6])
    assert blob(sel) == before


def _relabelled(y01: np.ndarray, low: object, high: object) -> list[object]:
    return [high if v else low for v in y01.tolist()]


PAIRS = [(0, 1), (-1, 1), (1, 2), (5, 7), (-3, 0), ("a", "b"), ("neg", "pos")]


@pytest.mark.parametrize(("low", "high"), PAIRS)
@pytest.mark.parametrize("first", ["mixed", "high only", "low only"])
def test_ofs_any_two_labels_learn_alike_in_sorted_order(
    low: object, high: object, first: str
) -> None:
    # The lower label codes -1: every pair gives the weights of 0/1 bit for bit, also
    # when the first frame holds one class only (the sign is fixed when the other comes).
    rng = np.random.default_rng(6)
    X = rng.normal(size=(90, 5))
    y01 = (X[:, 1] - X[:, 3] > 0).astype(int)
    if first != "mixed":
        y01[:10] = 1 if first == "high only" else 0
    ref = start(5, num_features=2)
    sel = start(5, num_features=2)
    y = _relabelled(y01, low, high)
    for s in range(0, 90, 10):
        ref.learn_instances(X[s : s + 10], y01[s : s + 10])
        sel.learn_instances(X[s : s + 10], y[s : s + 10])
    assert sel.state.w.tobytes() == ref.state.w.tobytes()
    assert sel.selected() == ref.selected()
    assert sel.state.classes == (low, high)


@pytest.mark.parametrize(("low", "high"), [(1, 0), (7, 5), ("b", "a")])
def test_ofs_reversed_labels_negate_the_weights_and_keep_the_selection(
    low: object, high: object
) -> None:
    rng = np.random.default_rng(7)
    X = rng.normal(size=(60, 5))
    y01 = (X[:, 0] + X[:, 2] > 0).astype(int)
    ref = start(5, num_features=3)
    sel = start(5, num_features=3)
    ref.learn_instances(X, y01)
    sel.learn_instances(X, _relabelled(y01, low, high))
    np.testing.assert_array_equal(sel.state.w, -ref.state.w)
    assert sel.selected() == ref.selected()


def test_ofs_needs_labels() -> None:
    with pytest.raises(InvalidInput):
        start(num_features=2).learn_instances([[1.0, 0.0, 2.0]])


def test_ofs_selected_order_ties_by_index() -> None:
    params = OFSParams(num_features=3)
    state = OFSState(feature_names=("a", "b", "c", "d"), w=np.array([0.5, -1.0, 1.0, 0.0]))
    sel = OFS.resume(params, state)
    assert [(f.name, f.score) for f in sel.selected_features()] == [
        ("b", -1.0),
        ("c", 1.0),
        ("a", 0.5),
    ]


# --------------------------------------------------------------------------- conformance


@pytest.fixture(scope="module")
def instances() -> tuple[np.ndarray, np.ndarray, dict]:
    data = np.loadtxt(DATA / "instances.csv", delimiter=",", skiprows=1)
    expected = json.loads((DATA / "expected.json").read_text())["instance_streams"]
    return data[:, :-1], data[:, -1], expected


def _run(X: np.ndarray, y: np.ndarray, size: int, **params: object) -> OFS:
    sel = start(X.shape[1], **params)
    for s in range(0, X.shape[0], size):
        sel.learn_instances(X[s : s + size], y[s : s + size])
    return sel


@pytest.mark.parametrize("size", [1, 50, 333, 2000])
def test_ofs_conformance_truncated(instances: tuple, size: int) -> None:
    X, y, expected = instances
    exp = expected["ofs"]
    # The vectors come from the reference implementation, which learns from the
    # values as sent.
    sel = _run(X, y, size, **{**exp["params"], "scale": "none"})
    got = sel.selected_features()
    assert [int(f.name[1:]) for f in got] == exp["selected"]
    for f in got:
        assert f.score is not None
        assert math.isclose(f.score, exp["weights"][f.name[1:]], rel_tol=1e-9)
    assert sel.status()["instances_seen"] == 2000


@pytest.mark.parametrize("size", [1, 2000])
def test_ofs_conformance_untruncated(instances: tuple, size: int) -> None:
    X, y, expected = instances
    exp = expected["ofs_untruncated"]
    sel = _run(X, y, size, **{**exp["params"], "scale": "none"})
    got = sel.selected_features()[:10]
    assert [int(f.name[1:]) for f in got] == exp["top10"]
    for f, w in zip(got, exp["weights_top10"], strict=True):
        assert f.score is not None
        assert math.isclose(f.score, w, rel_tol=1e-9)


# --------------------------------------------------------------------------- partial mode


def test_ofs_partial_full_observation_equals_full_mode() -> None:
    # epsilon = 1 and B = d: every instance observes all d features, each divided by
    # (B/d) * 1 + 0 = 1, so OFS-P performs exactly the steps of full OFS.
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 4))
    y = (rng.random(40) < 0.5).astype(float)
    full = start(4, num_features=4, lam=0.5)
    part = start(4, num_features=4, lam=0.5, mode="partial", epsilon=1.0, seed=11)
    full.learn_instances(X, y)
    part.learn_instances(X, y)
    np.testing.assert_array_equal(full.state.w, part.state.w)


def test_ofs_partial_scales_the_observed_entry() -> None:
    # d = 2, B = 1, epsilon = 1: one feature j drawn by default_rng([seed, 0]) (after
    # the uniform draw). Observed x~ has only x_j, w = 0 so w.x~ = 0 -> +1, margin 0 <= 1;
    # the step uses x_j / ((1/2) * 1 + 0) = 2 x_j: w_j = 0.2 * 1 * 2 x_j.
    seed = 5
    rng = np.random.default_rng([seed, 0])
    assert rng.random() < 1.0
    j = int(rng.choice(2, size=1, replace=False)[0])
    x = np.array([1.0, 3.0])
    sel = start(2, num_features=1, mode="partial", epsilon=1.0, seed=seed)
    sel.learn_instances(x[None, :], [1])
    expected = np.zeros(2)
    expected[j] = 0.2 * 2 * x[j]
    np.testing.assert_array_equal(sel.state.w, expected)


def _standardised(X: np.ndarray) -> np.ndarray:
    """docs/algorithms/ofs.md, "Scaling", written out plainly: Welford, row by row."""
    m, d = X.shape
    mean = np.zeros(d)
    M2 = np.zeros(d)
    Z = np.zeros((m, d))
    for t in range(1, m + 1):
        x = X[t - 1]
        delta = x - mean
        mean = mean + delta / t
        M2 = M2 + delta * (x - mean)
        var = M2 / t
        for j in range(d):
            Z[t - 1, j] = (x[j] - mean[j]) / math.sqrt(var[j]) if var[j] > 0 else 0.0
    return Z


def _reference(X: np.ndarray, y: np.ndarray, p: OFSParams) -> np.ndarray:
    """docs/algorithms/ofs.md (OFS / OFS-P) written out plainly, with a full sort for Truncate."""
    if p.scale == "standard":
        X = _standardised(X)
    m, d = X.shape
    B = p.num_features or 0
    w = np.zeros(d)
    for t in range(m):
        yt = -1.0 if y[t] == 0 else 1.0
        x = X[t]
        step = x
        if p.mode == "partial":
            rng = np.random.default_rng([p.seed, t])
            if rng.random() < p.epsilon:
                idx = rng.choice(d, size=min(B, d), replace=False)
            else:
                idx = np.flatnonzero(w)
            x = np.zeros(d)
            x[idx] = X[t, idx]
            step = np.zeros(d)
            for i in idx:
                step[i] = X[t, i] / (min(B, d) / d * p.epsilon + (w[i] != 0) * (1 - p.epsilon))
        if yt * float(w @ x) <= p.margin:
            w = (1 - p.decay) * w + p.eta * yt * step
            w = min(1.0, 1.0 / (math.sqrt(p.lam) * np.linalg.norm(w) or 1e-300)) * w
            order = np.lexsort((np.arange(d), -np.abs(w)))  # |w| descending, then index
            w[order[B:]] = 0.0
        else:
            w = (1 - p.decay) * w
    return w


@pytest.mark.parametrize(
    "params",
    [
        {"num_features": 3},
        {"num_features": 2, "margin": 0.0, "decay": 0.02, "lam": 0.5},
        {"num_features": 3, "mode": "partial", "epsilon": 0.4, "seed": 3},
        {"num_features": 2, "mode": "partial", "epsilon": 0.9, "seed": 0, "lam": 1.0},
        {"num_features": 3, "scale": "standard"},
        {"num_features": 2, "margin": 0.0, "decay": 0.02, "lam": 0.5, "scale": "standard"},
        {"num_features": 3, "mode": "partial", "epsilon": 0.4, "seed": 3, "scale": "standard"},
    ],
)
def test_ofs_matches_plain_reference(params: dict) -> None:
    # 60 instances cover both OFS-P branches (explore and exploit) many times.
    rng = np.random.default_rng(8)
    X = rng.normal(size=(60, 7))
    y = (X[:, 1] + 0.5 * X[:, 4] + 0.3 * rng.normal(size=60) > 0).astype(float)
    sel = start(7, **params)
    for s in range(0, 60, 13):
        sel.learn_instances(X[s : s + 13], y[s : s + 13])
    np.testing.assert_allclose(sel.state.w, _reference(X, y, sel.params), rtol=1e-12, atol=1e-15)
    assert np.count_nonzero(sel.state.w) > 0


def test_ofs_partial_exploitation_of_zero_w_observes_nothing() -> None:
    # With epsilon tiny the draw almost never explores; exploiting w = 0 observes no
    # feature, the step is 0, and w stays 0 (so nothing is selected).
    rng = np.random.default_rng(0)
    sel = start(5, num_features=2, mode="partial", epsilon=1e-12)
    sel.learn_instances(rng.normal(size=(30, 5)), np.ones(30))
    assert not sel.state.w.any()
    assert sel.selected() == ()


def _partial_stream(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(120, 8))
    y = (X[:, 0] - X[:, 3] > 0).astype(float)
    return X, y


def test_ofs_partial_is_deterministic_per_seed() -> None:
    X, y = _partial_stream(1)
    runs = []
    for seed in (4, 4, 5):
        sel = start(8, num_features=3, mode="partial", epsilon=0.3, seed=seed)
        sel.learn_instances(X, y)
        runs.append(blob(sel))
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_ofs_partial_resume_after_codec_continues_identically() -> None:
    X, y = _partial_stream(2)
    params = {"num_features": 3, "mode": "partial", "epsilon": 0.3, "seed": 9}
    straight = start(8, **params)
    straight.learn_instances(X[:70], y[:70])
    straight.learn_instances(X[70:], y[70:])

    first = start(8, **params)
    first.learn_instances(X[:70], y[:70])
    decoded = codec.decode(blob(first))
    resumed = OFS.resume(OFSParams.from_mapping(decoded.params), decoded.state)
    resumed.learn_instances(X[70:], y[70:])
    assert blob(resumed) == blob(straight)


# --------------------------------------------------------------------------- properties


VALUES = st.one_of(
    st.integers(-3, 3).map(float),  # small integers make exact ties likely
    st.floats(-50, 50, allow_nan=False, allow_infinity=False),
)
# Mostly zeros (some signed), for instances that are sparse.
SPARSE_VALUES = st.one_of(st.just(0.0), st.just(0.0), st.just(-0.0), VALUES)


@st.composite
def streams(
    draw: st.DrawFn, max_d: int = 6, values: st.SearchStrategy[float] = VALUES
) -> tuple[dict, np.ndarray, np.ndarray, list[int]]:
    d = draw(st.integers(1, max_d))
    m = draw(st.integers(1, 15))
    X = draw(arrays(np.float64, (m, d), elements=values))
    y = np.array(draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=m, max_size=m)))
    params = {
        "num_features": draw(st.integers(1, min(d, 7) + 1)),
        "eta": draw(st.sampled_from([0.2, 0.5, 1.0])),
        "lam": draw(st.sampled_from([0.01, 1.0])),
        "margin": draw(st.sampled_from([0.0, 1.0])),
        "decay": draw(st.sampled_from([0.0, 0.01])),
        "mode": draw(st.sampled_from(["full", "partial"])),
        "epsilon": draw(st.sampled_from([0.2, 1.0])),
        "seed": draw(st.integers(0, 3)),
        "scale": draw(st.sampled_from(["none", "standard", "maxabs"])),
        "half_life": draw(st.sampled_from([None, 2.0, 50.0])),
    }
    cuts = sorted(set(draw(st.lists(st.integers(1, m), max_size=4))) | {m})
    return params, X, y, cuts


def _frames(X: np.ndarray, y: np.ndarray, cuts: list[int]) -> list[tuple]:
    bounds = [0, *cuts]
    return [(X[a:b], y[a:b]) for a, b in itertools.pairwise(bounds) if b > a]


@given(streams())
def test_ofs_one_frame_equals_single_instances(case: tuple) -> None:
    params, X, y, _ = case
    batch = start(X.shape[1], **params)
    ub = batch.learn_instances(X, y)
    singles = start(X.shape[1], **params)
    preds: list[int] = []
    mistakes = 0
    for i in range(X.shape[0]):
        u = singles.learn_instances(X[i : i + 1].copy(), y[i : i + 1])
        preds.extend(u.predictions)
        mistakes += u.mistakes
    assert ub.predictions == tuple(preds)
    assert ub.mistakes == mistakes
    assert np.array_equal(batch.state.w, singles.state.w)
    assert blob(batch) == blob(singles)


@given(streams())
def test_ofs_any_framing_gives_the_same_state(case: tuple) -> None:
    params, X, y, cuts = case
    one = start(X.shape[1], **params)
    one.learn_instances(X, y)
    framed = start(X.shape[1], **params)
    for Xf, yf in _frames(X, y, cuts):
        framed.learn_instances(Xf, yf)
    assert blob(one) == blob(framed)


@given(streams())
def test_ofs_keeps_at_most_b_nonzeros(case: tuple) -> None:
    params, X, y, cuts = case
    sel = start(X.shape[1], **params)
    for Xf, yf in _frames(X, y, cuts):
        sel.learn_instances(Xf, yf)
        assert np.count_nonzero(sel.state.w) <= params["num_features"]
        assert len(sel.selected()) == np.count_nonzero(sel.state.w)


@given(streams())
def test_ofs_codec_round_trip(case: tuple) -> None:
    params, X, y, _ = case
    sel = start(X.shape[1], **params)
    sel.learn_instances(X, y)
    first = blob(sel)
    decoded = codec.decode(first)
    assert decoded.selector == "ofs"
    assert isinstance(decoded.state, OFSState)
    assert np.array_equal(decoded.state.w, sel.state.w)
    assert codec.encode(OFS.name, decoded.params, decoded.state) == first


@given(streams())
def test_ofs_replay_reproduces_state(case: tuple) -> None:
    params, X, y, cuts = case
    log = _frames(X, y, cuts)
    live = start(X.shape[1], **params)
    for Xf, yf in log:
        live.learn_instances(Xf, yf)
    replay = start(X.shape[1], **params)
    for Xf, yf in log:
        replay.learn_instances(Xf.copy(), yf.copy())
    assert blob(replay) == blob(live)


def test_ofs_leaves_inputs_alone() -> None:
    X = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, -1.0]])
    y = np.array([1.0, 0.0])
    X0, y0 = X.copy(), y.copy()
    sel = start(num_features=1, mode="partial", epsilon=1.0)
    w_before = sel.state.w
    sel.learn_instances(X, y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    assert not w_before.any()  # the published initial state was not mutated


# --------------------------------------------------------------------------- sparse instances


@given(streams(max_d=60, values=SPARSE_VALUES))
def test_ofs_sparse_instances_decide_exactly_as_dense(case: tuple) -> None:
    import scipy.sparse as sp

    params, X, y, cuts = case
    dense = start(X.shape[1], **params)
    sparse = start(X.shape[1], **params)
    for Xf, yf in _frames(X, y, cuts):
        ud = dense.learn_instances(Xf, yf)
        us = sparse.learn_instances(sp.csr_matrix(Xf), yf)
        assert us == ud
    assert np.array_equal(sparse.state.w, dense.state.w)
    assert blob(sparse) == blob(dense)


@pytest.mark.parametrize(
    "params",
    [
        {"num_features": 3},
        {"num_features": 5, "margin": 0.0, "decay": 0.02, "lam": 0.5},
        {"num_features": 4, "mode": "partial", "epsilon": 0.4, "seed": 3},
        {"num_features": 4, "scale": "standard"},
    ],
)
def test_ofs_sparse_wide_stream_matches_plain_reference(params: dict) -> None:
    # d = 400 with ~8 non-zeros per instance: supports stay far below d, so the
    # truncation works on the support alone; the weights still follow the plain
    # reference, and the sparse and dense forms agree bit for bit.
    import scipy.sparse as sp

    rng = np.random.default_rng(5)
    m, d = 80, 400
    X = np.where(rng.random((m, d)) < 0.02, rng.normal(size=(m, d)), 0.0)
    X[:, 7] = rng.normal(size=m)
    y = (X[:, 7] + 0.2 * rng.normal(size=m) > 0).astype(float)
    sparse = start(d, **params)
    dense = start(d, **params)
    for s in range(0, m, 16):
        sparse.learn_instances(sp.csr_matrix(X[s : s + 16]), y[s : s + 16])
        dense.learn_instances(X[s : s + 16], y[s : s + 16])
    np.testing.assert_allclose(
        sparse.state.w, _reference(X, y, sparse.params), rtol=1e-12, atol=1e-15
    )
    assert np.array_equal(sparse.state.w, dense.state.w)
    assert np.count_nonzero(sparse.state.w) == params["num_features"]


def test_ofs_sparse_instances_are_validated() -> None:
    import scipy.sparse as sp

    sel = start(4, num_features=2)
    bad = sp.csr_matrix(np.array([[0.0, np.nan, 0.0, 1.0]]))
    with pytest.raises(InvalidInput, match="NaN"):
        sel.learn_instances(bad, [1.0])
    with pytest.raises(InvalidInput, match="4 values"):
        sel.learn_instances(sp.csr_matrix(np.ones((1, 5))), [1.0])
    assert sel.instances_seen == 0 and not sel.state.w.any()


# --------------------------------------------------------------------------- scaling


def _older_blob(sel: OFS) -> bytes:
    """The state as a version before ``scale`` stored it: no parameter, no statistics."""
    header, body = codec.decode_header(blob(sel))
    del header["params"]["scale"]
    del header["fields"]["scale_mean"], header["fields"]["scale_M2"]
    raw = json.dumps(header, separators=(",", ":")).encode()
    full = blob(sel)
    return codec._PREFIX.pack(codec.MAGIC, codec.FORMAT_VERSION, len(raw)) + raw + full[body:]


def test_ofs_state_stored_before_scale_keeps_learning_from_raw_values() -> None:
    rng = np.random.default_rng(6)
    X = rng.normal(size=(40, 5)) * [1.0, 10.0, 100.0, 0.1, 1000.0]
    y = (X[:, 1] > 0).astype(float)
    old = start(5, num_features=3, scale="none")  # what every stream was then
    old.learn_instances(X[:20], y[:20])
    decoded = codec.decode(_older_blob(old))
    assert "scale" not in decoded.params
    params = OFSParams.from_stored(decoded.params)
    assert params.scale == "none"  # Params.legacy, not today's default
    assert OFSParams.from_mapping({"num_features": 3}).scale == "maxabs"
    resumed = OFS.resume(params, decoded.state)
    resumed.learn_instances(X[20:], y[20:])
    old.learn_instances(X[20:], y[20:])
    assert blob(resumed) == blob(old)


def test_ofs_maxabs_scale_by_hand() -> None:
    # Running maxima 2, then 4 and 1: x1 = [2, 0] maps to [1, 0] and steps w = [0.2, 0];
    # x2 = [-4, 1] maps to [-1, 1], w . x = -0.2 <= 1 steps w = [0.4, -0.2] (y = -1).
    sel = start(2, num_features=2, scale="maxabs")
    u = sel.learn_instances(np.array([[2.0, 0.0], [-4.0, 1.0]]), [1, 0])
    assert u.predictions == (1, -1)
    np.testing.assert_allclose(sel.state.w, [0.4, -0.2], rtol=1e-15)
    assert sel.state.scale_maxabs.tolist() == [4.0, 1.0]


def test_ofs_maxabs_is_invariant_to_positive_units_and_keeps_sparsity() -> None:
    import scipy.sparse as sp

    rng = np.random.default_rng(9)
    X = np.where(rng.random((80, 6)) < 0.3, rng.exponential(size=(80, 6)), 0.0)
    y = (X[:, 0] + X[:, 4] > 0.6).astype(float)
    units = np.array([1.0, 1000.0, 0.001, 8.0, 0.5, 64.0])  # powers of 2 scale exactly
    a = start(6, num_features=3, scale="maxabs")
    b = start(6, num_features=3, scale="maxabs")
    a.learn_instances(sp.csr_matrix(X), y)
    b.learn_instances(sp.csr_matrix(X * units), y)
    assert a.selected() == b.selected()
    np.testing.assert_allclose(a.state.w, b.state.w, rtol=1e-12)


def test_ofs_default_scale_is_maxabs() -> None:
    assert OFSParams(num_features=1).scale == "maxabs"
    assert OFSParams.from_stored({"num_features": 1}).scale == "none"  # stored before scale
    # A stream stored with the earlier default keeps it.
    assert OFSParams.from_stored({"num_features": 1, "scale": "standard"}).scale == "standard"


def test_ofs_standard_scale_is_invariant_to_units() -> None:
    # Standardised, a feature in thousands and one in fractions weigh alike: scaling
    # any column by a positive constant leaves every prediction unchanged.
    rng = np.random.default_rng(7)
    X = rng.normal(size=(80, 4))
    y = (X[:, 0] - X[:, 2] > 0).astype(float)
    a = start(4, num_features=2, scale="standard")
    b = start(4, num_features=2, scale="standard")
    ua = a.learn_instances(X, y)
    ub = b.learn_instances(X * [1000.0, 1.0, 0.001, 7.0], y)
    assert ua.predictions == ub.predictions
    np.testing.assert_allclose(a.state.w, b.state.w, rtol=1e-9)
    assert a.status()["scale"] == "standard"


def test_the_selection_follows_the_state_it_is_asked_of() -> None:
    """The selected order is kept with the w it came from: after learning, after the
    state is put back (a refused frame) and after a resume, it is that state's own."""
    from featurestream.selectors.ofs import _selected_order

    rng = np.random.default_rng(5)
    names = [f"f{j}" for j in range(30)]
    sel = OFS.start(OFSParams(num_features=5, scale="none"), names)

    def expected(s: OFS) -> tuple[str, ...]:
        return tuple(names[i] for i in _selected_order(s.state.w))

    assert sel.selected() == expected(sel) == ()
    for _ in range(4):
        before = sel.snapshot()
        sel.learn_instances(rng.normal(size=(7, 30)), rng.integers(0, 2, 7))
        assert sel.selected() == expected(sel) and len(sel.selected()) == 5
        assert [f.name for f in sel.selected_features()] == list(expected(sel))
        learnt = sel.snapshot()
        sel.state = before  # put back, as the engine does with a refused frame
        assert sel.selected() == expected(sel)
        sel.state = learnt
    again = OFS.resume(sel.params, sel.snapshot())
    assert again.selected() == sel.selected() == expected(sel)


@given(streams(), st.sampled_from(PAIRS), st.booleans())
def test_ofs_relabelling_keeps_the_selection(case: tuple, pair: tuple, reverse: bool) -> None:
    params, X, y, cuts = case
    low, high = pair[::-1] if reverse else pair
    ref = start(X.shape[1], **params)
    sel = start(X.shape[1], **params)
    y_new = _relabelled(y.astype(int), low, high)
    for a, b in itertools.pairwise([0, *cuts]):
        ref.learn_instances(X[a:b], y[a:b])
        sel.learn_instances(X[a:b], y_new[a:b])
    assert sel.selected() == ref.selected()
    if len(set(y.tolist())) == 2:  # with one class only, its code is provisional
        sign = -1.0 if reverse else 1.0
        assert (sel.state.w == sign * ref.state.w).all()
