"""NRFS on a window as an instance-stream selector (docs/algorithms/nrfs.md)."""

from __future__ import annotations

import numpy as np
import pytest

from featurestream import codec
from featurestream.errors import InvalidInput, InvalidParameter
from featurestream.selectors import REGISTRY
from featurestream.selectors.nrfs import (
    MAX_WINDOW,
    MAX_WINDOW_VALUES,
    NRFS,
    NRFSParams,
    in_order,
    push,
)
from featurestream.stats.nrfs import nrfs
from tests.unit.selectors.common import blob
from tests.unit.stats.nrfs_synthetic import make_dataset


def start(d: int = 4, **params: object) -> NRFS:
    p = NRFSParams.from_mapping({"num_features": 2, **params})
    return NRFS.start(p, [f"f{j}" for j in range(d)])


def stream(n: int, d: int = 4, seed: int = 0) -> np.ndarray:
    """Two groups apart on feature 0; the other features are noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[::2, 0] += 6.0
    return X


def feed(sel: NRFS, X: np.ndarray, sizes: list[int]) -> list[int]:
    """Apply X in batches of the given sizes; the computation counts after each batch."""
    out = []
    lo = 0
    for size in sizes:
        sel.learn_instances(X[lo : lo + size])
        lo += size
        out.append(sel.state.computations)
    return out


def test_registered_and_unsupervised() -> None:
    assert REGISTRY["nrfs"] is NRFS
    assert NRFS.kind == "instances" and not NRFS.supervised and not NRFS.batch_invariant


def test_defaults_and_refresh_defaults_to_window() -> None:
    p = NRFSParams.from_mapping({"num_features": 3})
    assert (p.window, p.refresh, p.refresh_every, p.min_instances) == (1000, None, 1000, 100)
    assert (p.clusters, p.representatives, p.neighbours, p.similarity) == (4, 0.25, 1, "gaussian")
    assert (p.sigma, p.ridge, p.noise_fraction, p.seed) == (None, 1e-3, 0.1, 0)
    assert NRFSParams.from_mapping({"num_features": 3, "refresh": 7}).refresh_every == 7


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"window": 50, "min_instances": 60}, "min_instances"),
        ({"min_instances": 5, "clusters": 6}, "clusters"),
        ({"clusters": 1}, "clusters"),
        ({"window": 2}, "window"),
        ({"representatives": 0}, "representatives"),
        ({"representatives": 1.5}, "representatives"),
        ({"representatives": 0.0}, "representatives"),
        ({"representatives": True}, "representatives"),
        ({"representatives": "all"}, "representatives"),
        ({"noise_fraction": 1.0}, "noise_fraction"),
        ({"similarity": "pearson"}, "similarity"),
        ({"sigma": 0.0}, "sigma"),
        ({"ridge": 0.0}, "ridge"),
        ({"refresh": 0}, "refresh"),
    ],
)
def test_bad_parameters_are_refused_by_name(params: dict[str, object], parameter: str) -> None:
    with pytest.raises(InvalidParameter) as info:
        NRFSParams.from_mapping({"num_features": 2, **params})
    assert info.value.parameter == parameter
    assert str(info.value).startswith(f"The {parameter!r} parameter of NRFS must be")


def test_representatives_is_a_fraction_or_a_count() -> None:
    for value in (0.25, 1.0, 1, 300):
        p = NRFSParams.from_mapping({"num_features": 1, "representatives": value})
        assert p.representatives == value and type(p.representatives) is type(value)
    schema = NRFSParams.json_schema()["properties"]["representatives"]
    assert schema["default"] == 0.25 and len(schema["anyOf"]) == 2


def test_checks_that_need_the_feature_count() -> None:
    with pytest.raises(InvalidParameter) as info:
        start(d=3, num_features=4)
    assert info.value.parameter == "num_features" and "at most the number of features (3)" in str(
        info.value
    )
    d = 32_768  # wide enough for the values bound to come below MAX_WINDOW
    too_wide = MAX_WINDOW_VALUES // d + 1
    assert too_wide <= MAX_WINDOW
    with pytest.raises(InvalidParameter) as info:
        start(d=d, window=too_wide)
    assert info.value.parameter == "window" and str(MAX_WINDOW_VALUES // d) in str(info.value)
    assert start(d=d, window=too_wide - 1).state.window.shape == (0, d)
    # Whatever d, a window above MAX_WINDOW instances is refused by its constraint.
    with pytest.raises(InvalidParameter) as info:
        start(d=3, window=MAX_WINDOW + 1)
    assert info.value.parameter == "window" and f"[3, {MAX_WINDOW}]" in str(info.value)


def test_the_window_is_a_ring_buffer() -> None:
    # Capacity 5, instances 0..7 in batches of 3, 3 and 2. Instance t lives in row
    # t mod 5: after 6 instances rows hold 5, 1, 2, 3, 4 (position 1, the oldest);
    # after 8: 5, 6, 7, 3, 4 (position 3); oldest first: 3, 4, 5, 6, 7.
    rows = np.arange(8.0)[:, None]
    w, pos = push(np.zeros((0, 1)), 0, 5, rows[:3])
    assert (w.ravel().tolist(), pos) == ([0.0, 1.0, 2.0], 0)
    w, pos = push(w, 3, 5, rows[3:6])
    assert (w.ravel().tolist(), pos) == ([5.0, 1.0, 2.0, 3.0, 4.0], 1)
    w, pos = push(w, 6, 5, rows[6:8])
    assert (w.ravel().tolist(), pos) == ([5.0, 6.0, 7.0, 3.0, 4.0], 3)
    assert in_order(w, pos).ravel().tolist() == [3.0, 4.0, 5.0, 6.0, 7.0]
    # A batch longer than the window: only its last 5 rows stay, each in its row.
    w, pos = push(w, 8, 5, np.arange(8.0, 20.0)[:, None])
    assert (w.ravel().tolist(), pos) == ([15.0, 16.0, 17.0, 18.0, 19.0], 0)
    w, pos = push(w, 20, 5, np.arange(20.0, 27.0)[:, None])
    assert (w.ravel().tolist(), pos) == ([25.0, 26.0, 22.0, 23.0, 24.0], 2)
    assert in_order(w, pos).ravel().tolist() == [22.0, 23.0, 24.0, 25.0, 26.0]


def test_the_selector_keeps_the_last_window_instances() -> None:
    X = stream(23)
    sel = start(window=10, min_instances=10, clusters=2)
    feed(sel, X, [4, 9, 1, 9])
    assert sel.state.position == 23 % 10
    assert np.array_equal(in_order(sel.state.window, sel.state.position), X[13:])
    assert sel.status()["window_fill"] == 10


def test_computes_when_a_batch_reaches_or_crosses_a_multiple_of_refresh() -> None:
    X = stream(40)
    sel = start(window=40, refresh=10, min_instances=10, clusters=2)
    # Counts 7, 15 (crossed 10), 19, 22 (crossed 20), 30 (reached 30), 31.
    assert feed(sel, X, [7, 8, 4, 3, 8, 1]) == [0, 1, 1, 2, 3, 3]
    assert sel.state.computed_at == 30
    assert sel.status()["computations"] == 3 and sel.status()["computed_at"] == 30
    # A batch crossing two multiples computes once, at its end.
    sel2 = start(window=40, refresh=5, min_instances=10, clusters=2)
    assert feed(sel2, X, [12, 13]) == [1, 2]
    assert sel2.state.computed_at == 25


def test_the_first_computation_waits_for_min_instances() -> None:
    X = stream(45)
    # refresh = window = 40; min_instances 15: the batch that brings the window to 15
    # (count 21) computes, the next ones not until the count crosses 40.
    sel = start(window=40, min_instances=15, clusters=2)
    assert sel.selected_features() == ()
    assert feed(sel, X, [7, 7]) == [0, 0]
    assert sel.selected() == () and sel.state.scores.tolist() == [0.0] * 4
    assert feed(sel, X[14:], [7, 7, 7, 7]) == [1, 1, 1, 2]
    assert sel.state.computed_at == 42
    # A crossing of refresh while the window is still short computes nothing.
    early = start(window=40, refresh=5, min_instances=12, clusters=2)
    assert feed(early, X, [5, 5, 3, 2]) == [0, 0, 1, 2]


def test_a_computation_is_nrfs_on_the_window_oldest_first() -> None:
    X = stream(30, d=5, seed=3)
    params = {"window": 12, "refresh": 6, "min_instances": 12, "clusters": 2, "neighbours": 2}
    sel = start(d=5, **params)
    feed(sel, X, [8, 8, 8, 6])  # the ring has wrapped (30 mod 12 = 6)
    assert sel.state.position == 6 and sel.state.computed_at == 30
    direct = nrfs(X[18:], 2, clusters=2, neighbours=2)
    assert sel.state.selected == direct.selected
    assert np.array_equal(sel.state.scores, direct.scores)
    assert [f.name for f in sel.selected_features()] == [f"f{j}" for j in direct.selected]
    assert [f.score for f in sel.selected_features()] == [direct.scores[j] for j in direct.selected]
    assert sel.selected()[0] == "f0"


def test_labels_are_ignored_but_checked() -> None:
    X = stream(20)
    a, b = start(window=20, min_instances=20, clusters=2), start(window=20, min_instances=20)
    a.learn_instances(X, np.arange(20.0))
    b.learn_instances(X)
    assert np.array_equal(a.state.window, b.state.window)
    with pytest.raises(InvalidInput, match="Expected 20 labels"):
        a.learn_instances(X, [1.0])


def test_empty_batches_change_nothing() -> None:
    sel = start(window=10, min_instances=5, clusters=2)
    before = blob(sel)
    u = sel.learn_instances(np.zeros((0, 4)))
    assert (u.instances, u.selection_changed) == (0, False) and blob(sel) == before


def test_duplicate_and_constant_windows_compute_without_warnings() -> None:
    # The suite turns warnings into errors: duplicates must not make any library warn.
    X = stream(30)
    X[10:30] = X[0]
    sel = start(window=30, min_instances=30, clusters=2)
    sel.learn_instances(X)
    assert len(sel.selected()) == 2
    flat = start(window=20, min_instances=20, clusters=3, similarity="cosine")
    flat.learn_instances(np.ones((20, 4)))
    assert len(flat.selected()) == 2


def test_sparse_instances_are_expanded() -> None:
    import scipy.sparse as sp

    X = stream(20) * (np.random.default_rng(8).random((20, 4)) < 0.5)
    a, b = start(window=20, min_instances=20, clusters=2), start(window=20, min_instances=20)
    a.learn_instances(X)
    b.learn_instances(sp.csr_matrix(X))
    assert np.array_equal(a.state.window, b.state.window)


def test_state_round_trip_keeps_the_ring_and_the_selection() -> None:
    X = stream(26)
    sel = start(window=10, refresh=8, min_instances=8, clusters=2, representatives=3)
    feed(sel, X, [9, 9, 8])
    raw = blob(sel)
    back = codec.decode(raw)
    resumed = NRFS.resume(NRFSParams.from_mapping(back.params), back.state)
    assert blob(resumed) == raw
    assert back.params["representatives"] == 3 and back.state.selected == sel.state.selected


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_paper_synthetic_stream_equals_the_direct_computation(seed: int) -> None:
    X, _ = make_dataset(seed)
    n = X.shape[0]
    sel = NRFS.start(
        NRFSParams.from_mapping(
            {"num_features": 4, "window": n, "min_instances": n, "representatives": 288}
        ),
        [f"f{j + 1}" for j in range(X.shape[1])],
    )
    counts = feed(sel, X, [100] * (n // 100) + [n % 100])
    assert counts[-1] == 1 and counts[-2] == 0  # one computation, at the end
    direct = nrfs(X, 4, representatives=288)
    assert sel.state.selected == direct.selected
    assert np.array_equal(sel.state.scores, direct.scores)
    assert sorted(sel.selected()) == ["f1", "f2", "f3", "f4"]
