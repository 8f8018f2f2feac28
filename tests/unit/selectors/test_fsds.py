"""FSDS: Frequent Directions sketch by hand, its error bound, conformance, properties."""

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
from featurestream.selectors.fsds import (
    FSDS,
    FSDSParams,
    FSDSState,
    _tall_svd,
    fsds_scores,
    sketch_step,
)
from tests.unit.selectors.common import blob

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(autouse=True)
def _registered(monkeypatch: pytest.MonkeyPatch) -> None:
    # The registry does not list FSDS yet; codec.decode looks selectors up there.
    monkeypatch.setitem(featurestream.selectors.REGISTRY, FSDS.name, FSDS)


def start(d: int, **params: object) -> FSDS:
    return FSDS.start(FSDSParams.from_mapping(params), [f"x{i}" for i in range(d)])


def gram(sel: FSDS) -> np.ndarray:
    B = sel.state.sketch
    return B @ B.T


# --------------------------------------------------------------------------- params


def test_fsds_num_features_is_required() -> None:
    with pytest.raises(InvalidParameter, match="'num_features' parameter of FSDS is required") as e:
        FSDSParams.from_mapping({"k": 2})
    assert e.value.parameter == "num_features"


@pytest.mark.parametrize(
    ("name", "value"),
    [("num_features", 0), ("sketch_size", 0), ("k", 0), ("ridge", -0.5), ("k", 1.5)],
)
def test_fsds_rejects_bad_parameter(name: str, value: object) -> None:
    with pytest.raises(InvalidParameter) as e:
        FSDSParams.from_mapping({"num_features": 2, name: value})
    assert e.value.parameter == name


@pytest.mark.parametrize(("d", "l"), [(1, 1), (4, 2), (9, 3), (10, 4), (1000, 32)])
def test_fsds_default_sketch_size_is_ceil_sqrt_d(d: int, l: int) -> None:
    sel = start(d, num_features=1)
    assert sel.state.sketch_size == l
    assert sel.status() == {
        "instances_seen": 0,
        "batches_seen": 0,
        "sketch_size": l,
        "sketch_columns": 0,
    }
    assert sel.selected() == ()  # nothing is selected before the first batch


# --------------------------------------------------------------------------- hand-worked


def test_fsds_sketch_is_exact_while_rows_fit() -> None:
    # l = 5 and 4 rows seen (batches of 3 and 1): C never has l singular values, so
    # delta = 0 at every step and B B^T = X^T X exactly (up to rounding).
    X = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0], [3.0, 0.0, 1.0], [2.0, 2.0, 2.0]])
    sel = start(3, num_features=2, sketch_size=5)
    sel.learn_instances(X[:3])
    assert sel.state.sketch.shape == (3, 3)
    sel.learn_instances(X[3:])
    # C = [B, x^T] is 3 x 4, but d = 3 caps the thin SVD at 3 < l values: still exact.
    assert sel.status()["sketch_columns"] == 3
    np.testing.assert_allclose(gram(sel), X.T @ X, rtol=0, atol=1e-12)
    assert sel.status()["instances_seen"] == 4 and sel.status()["batches_seen"] == 2


def test_fsds_shrinks_when_more_than_l_columns() -> None:
    # X = diag(3, 4, 1): C = X^T has singular values 4, 3, 1 (along x1, x0, x2).
    # l = 2 keeps 4 and 3, delta = 3^2 = 9, s' = (sqrt(16 - 9), 0) = (sqrt 7, 0):
    # B B^T = 7 e1 e1^T.
    sel = start(3, num_features=2, sketch_size=2)
    sel.learn_instances(np.diag([3.0, 4.0, 1.0]))
    assert sel.state.sketch.shape == (3, 2)
    np.testing.assert_allclose(gram(sel), np.diag([0.0, 7.0, 0.0]), atol=1e-12)
    _, U, s = sketch_step(np.zeros((3, 0)), np.diag([3.0, 4.0, 1.0]), 2)
    np.testing.assert_allclose(s, [math.sqrt(7.0), 0.0], atol=1e-12)
    np.testing.assert_allclose(np.abs(U[:, 0]), [0.0, 1.0, 0.0], atol=1e-12)


def test_fsds_shrinks_when_exactly_l_singular_values() -> None:
    # Two rows [3, 0, 0], [0, 4, 0] with l = 2: C has exactly l = 2 singular values
    # (4, 3), so delta = s_2^2 = 9 still applies: s' = (sqrt 7, 0), B B^T = 7 e1 e1^T.
    sel = start(3, num_features=1, sketch_size=2)
    sel.learn_instances([[3.0, 0.0, 0.0], [0.0, 4.0, 0.0]])
    np.testing.assert_allclose(gram(sel), np.diag([0.0, 7.0, 0.0]), atol=1e-12)


def test_fsds_scores_with_default_ridge_and_undefined_ratio() -> None:
    # Continuing the diag(3, 4, 1) example, k = 2: a = 8 s'_2 = 0.
    # W[:, 0] = e1 sqrt7 / (7 + 0) -> x1 scores 1/sqrt(7) = 0.378;
    # W[:, 1] = u2 * 0 / (0 + 0): undefined, counts as 0.
    sel = start(3, num_features=2, sketch_size=2)
    sel.learn_instances(np.diag([3.0, 4.0, 1.0]))
    np.testing.assert_allclose(sel.state.scores, [0.0, 1 / math.sqrt(7.0), 0.0], atol=1e-12)
    assert sel.selected() == ("x1", "x0")  # x0 and x2 tie at 0: lower index first


def test_fsds_scores_with_given_ridge() -> None:
    # ridge 1: x1 scores sqrt7 / (7 + 1) = 0.3307; the second direction 0 / (0 + 1) = 0.
    sel = start(3, num_features=1, sketch_size=2, ridge=1.0)
    sel.learn_instances(np.diag([3.0, 4.0, 1.0]))
    np.testing.assert_allclose(sel.state.scores, [0.0, math.sqrt(7.0) / 8.0, 0.0], atol=1e-12)
    assert [(f.name, round(f.score or 0.0, 4)) for f in sel.selected_features()] == [("x1", 0.3307)]


def test_fsds_fewer_than_k_singular_values_use_what_exists() -> None:
    # One instance [3, 4]: C = [[3], [4]], s = 5, u = [0.6, 0.8]; 1 < l = 2: no shrink.
    # k = 2 but one value exists: a = 8 * 5 = 40, ratio 5 / (25 + 40) = 1/13,
    # scores = [0.6, 0.8] / 13.
    sel = start(2, num_features=1, sketch_size=2, k=2)
    sel.learn_instances([[3.0, 4.0]])
    np.testing.assert_allclose(sel.state.scores, [0.6 / 13, 0.8 / 13], rtol=1e-12)
    assert sel.selected() == ("x1",)


def test_fsds_scores_function_by_hand() -> None:
    # U = I, s = (2, 1), ridge 0: ratios 2/4 = 0.5 and 1/1 = 1.
    np.testing.assert_allclose(fsds_scores(np.eye(2), np.array([2.0, 1.0]), 2, 0.0), [0.5, 1.0])
    # k = 1 with default ridge 8 * 2 = 16: 2 / (4 + 16) = 0.1 for x0 only.
    np.testing.assert_allclose(fsds_scores(np.eye(2), np.array([2.0, 1.0]), 1, None), [0.1, 0.0])
    assert not fsds_scores(np.zeros((3, 0)), np.zeros(0), 2, None).any()


def test_fsds_selection_ties_by_lower_index() -> None:
    state = FSDSState(
        feature_names=("a", "b", "c", "d"),
        sketch_size=2,
        sketch=np.zeros((4, 1)),
        scores=np.array([0.5, 1.0, 0.5, 1.0]),
        instances_seen=1,
        batches_seen=1,
    )
    sel = FSDS.resume(FSDSParams(num_features=3), state)
    assert [(f.name, f.score) for f in sel.selected_features()] == [
        ("b", 1.0),
        ("d", 1.0),
        ("a", 0.5),
    ]


def test_fsds_ignores_labels_but_checks_their_length() -> None:
    X = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0]])
    a = start(3, num_features=1)
    b = start(3, num_features=1)
    a.learn_instances(X)
    b.learn_instances(X, [7.0, -3.0])
    assert blob(a) == blob(b)
    with pytest.raises(InvalidInput):
        b.learn_instances(X, [1.0])


def test_fsds_batch_boundaries_are_part_of_the_result() -> None:
    # FD shrinks once per batch: one batch of 6 and six batches of 1 give different
    # sketches (l = 2 < 6 rows), as docs/algorithms/fsds.md allows.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 4))
    one = start(4, num_features=2, sketch_size=2)
    one.learn_instances(X)
    six = start(4, num_features=2, sketch_size=2)
    for i in range(6):
        six.learn_instances(X[i : i + 1])
    assert not np.allclose(gram(one), gram(six))
    assert one.status()["batches_seen"] == 1 and six.status()["batches_seen"] == 6


def test_fsds_update_reports_selection_change() -> None:
    # k = 1: the single score vector is |u_1| scaled, so the selection follows the
    # dominant direction of the sketch.
    sel = start(3, num_features=1, sketch_size=3, k=1)
    u = sel.learn_instances([[0.0, 5.0, 0.0]])
    assert u.instances == 1 and u.instances_seen == 1 and u.selection_changed
    assert u.predictions == () and u.mistakes == 0
    u = sel.learn_instances([[0.0, 4.0, 0.1]])  # x1 still dominates
    assert not u.selection_changed
    u = sel.learn_instances([[100.0, 0.0, 0.0]])  # now x0 does
    assert u.selection_changed
    assert sel.selected() == ("x0",)


# --------------------------------------------------------------------------- conformance


def test_fsds_conformance() -> None:
    data = np.loadtxt(DATA / "instances.csv", delimiter=",", skiprows=1)
    exp = json.loads((DATA / "expected.json").read_text())["instance_streams"]["fsds"]
    X = data[:, :-1]
    sel = start(X.shape[1], **exp["params"])
    for s in range(0, X.shape[0], 50):
        sel.learn_instances(X[s : s + 50])
    got = sel.selected_features()
    assert [int(f.name[1:]) for f in got] == exp["selected"]
    for f, score in zip(got, exp["scores"], strict=True):
        assert f.score is not None
        assert math.isclose(f.score, score, rel_tol=1e-9)
    assert sel.status() == {
        "instances_seen": 2000,
        "batches_seen": 40,
        "sketch_size": 10,
        "sketch_columns": 10,
    }


# --------------------------------------------------------------------------- properties


@st.composite
def streams(draw: st.DrawFn) -> tuple[dict, np.ndarray, list[int]]:
    d = draw(st.integers(1, 7))
    m = draw(st.integers(1, 20))
    X = draw(
        arrays(
            np.float64,
            (m, d),
            elements=st.floats(-20, 20, allow_nan=False, allow_infinity=False),
        )
    )
    params = {
        "num_features": draw(st.integers(1, d)),
        "sketch_size": draw(st.one_of(st.none(), st.integers(1, 5))),
        "k": draw(st.integers(1, 3)),
        "ridge": draw(st.sampled_from([None, 0.0, 0.5])),
    }
    cuts = sorted(set(draw(st.lists(st.integers(1, m), max_size=5))) | {m})
    return params, X, cuts


def _frames(X: np.ndarray, cuts: list[int]) -> list[np.ndarray]:
    bounds = [0, *cuts]
    return [X[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@given(streams())
def test_fsds_sketch_never_exceeds_l_columns(case: tuple) -> None:
    params, X, cuts = case
    sel = start(X.shape[1], **params)
    for Xf in _frames(X, cuts):
        sel.learn_instances(Xf)
        assert sel.state.sketch.shape[0] == X.shape[1]
        assert sel.state.sketch.shape[1] <= sel.state.sketch_size
        assert len(sel.selected()) == params["num_features"]


@given(streams())
def test_fsds_frequent_directions_error_bound(case: tuple) -> None:
    # 0 <= A^T A - B B^T and ||A^T A - B B^T||_2 <= ||A||_F^2 / l (Liberty; Ghashami et
    # al.), for any batching: each shrink removes at most delta in every direction and
    # at least l * delta of squared Frobenius mass.
    params, X, cuts = case
    sel = start(X.shape[1], **params)
    for Xf in _frames(X, cuts):
        sel.learn_instances(Xf)
    E = X.T @ X - gram(sel)
    eig = np.linalg.eigvalsh((E + E.T) / 2)
    fro2 = float((X * X).sum())
    tol = 1e-9 * (1.0 + fro2)
    assert eig.min() >= -tol
    assert eig.max() <= fro2 / sel.state.sketch_size + tol


def test_fsds_error_bound_on_larger_random_data() -> None:
    rng = np.random.default_rng(42)
    A = rng.normal(size=(300, 20)) @ np.diag(np.linspace(3.0, 0.1, 20))
    sel = start(20, num_features=5, sketch_size=6)
    for s in range(0, 300, 25):
        sel.learn_instances(A[s : s + 25])
    err = np.linalg.norm(A.T @ A - gram(sel), 2)
    bound = float((A * A).sum()) / 6
    assert err <= bound
    assert err > 0  # 300 rows into 6 columns: the sketch is not exact


@given(streams())
def test_fsds_codec_round_trip(case: tuple) -> None:
    params, X, cuts = case
    sel = start(X.shape[1], **params)
    for Xf in _frames(X, cuts):
        sel.learn_instances(Xf)
    first = blob(sel)
    decoded = codec.decode(first)
    assert decoded.selector == "fsds"
    assert isinstance(decoded.state, FSDSState)
    assert np.array_equal(decoded.state.sketch, sel.state.sketch)
    assert codec.encode(FSDS.name, decoded.params, decoded.state) == first
    resumed = FSDS.resume(FSDSParams.from_mapping(decoded.params), decoded.state)
    assert resumed.selected_features() == sel.selected_features()


@given(streams())
def test_fsds_replay_reproduces_state(case: tuple) -> None:
    params, X, cuts = case
    log = _frames(X, cuts)
    live = start(X.shape[1], **params)
    for Xf in log:
        live.learn_instances(Xf)
    replay = start(X.shape[1], **params)
    for Xf in log:
        replay.learn_instances(Xf.copy())
    assert blob(replay) == blob(live)


def test_fsds_resume_mid_stream_continues_identically() -> None:
    rng = np.random.default_rng(7)
    X = rng.normal(size=(40, 6))
    straight = start(6, num_features=2, sketch_size=3)
    for s in range(0, 40, 10):
        straight.learn_instances(X[s : s + 10])
    first = start(6, num_features=2, sketch_size=3)
    first.learn_instances(X[:10])
    first.learn_instances(X[10:20])
    decoded = codec.decode(blob(first))
    resumed = FSDS.resume(FSDSParams.from_mapping(decoded.params), decoded.state)
    resumed.learn_instances(X[20:30])
    resumed.learn_instances(X[30:])
    assert blob(resumed) == blob(straight)


@st.composite
def tall_matrices(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    """A d x m matrix with d > m (some columns zero or repeated: rank-deficient too)."""
    m = draw(st.integers(1, 70))
    d = draw(st.integers(m + 1, m + 40))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    C = rng.normal(size=(d, m)) * draw(st.sampled_from([1e-3, 1.0, 1e4]))
    for j in draw(st.lists(st.integers(0, m - 1), max_size=3)):
        C[:, j] = 0.0 if draw(st.booleans()) else C[:, 0]
    return C, draw(st.integers(1, m + 5))


@given(tall_matrices())
def test_fsds_tall_svd_gives_the_singular_triplets_of_c(case: tuple[np.ndarray, int]) -> None:
    # The QR route of a tall sketch step (panels of 32 columns, fewer when C has fewer)
    # against the definition: the singular values of C, and l orthonormal columns u_i
    # with ||C^T u_i|| = s_i.
    C, l = case
    U, s = _tall_svd(C, l)
    expected = np.linalg.svd(C, compute_uv=False)
    scale = max(float(expected[0]), 1e-300)
    assert s.shape == expected.shape
    np.testing.assert_allclose(s, expected, rtol=0, atol=1e-12 * scale)
    keep = min(l, C.shape[1])
    assert U.shape == (C.shape[0], keep) and U.flags.c_contiguous
    np.testing.assert_allclose(U.T @ U, np.eye(keep), rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        np.linalg.norm(C.T @ U, axis=0), s[:keep], rtol=0, atol=1e-11 * scale
    )
