"""A stream's drift watch (selectors/drift.py): its signal, detections, state and reset."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from river import drift as river_drift

from featurestream import codec
from featurestream.errors import InvalidParameter
from featurestream.selectors import FIRES, OFS, FIRESParams, KBest, KBestParams, OFSParams
from featurestream.selectors.decisions import InstanceUpdate, SelectedFeature
from featurestream.selectors.drift import MOVED, Watch, moved, observe, restarted, signal
from featurestream.stats.drift import PageHinkley


def errors(seed: int = 0) -> list[float]:
    """0/1 errors: rare for 300 instances, then frequent (an abrupt change)."""
    rng = np.random.default_rng(seed)
    return (np.r_[rng.random(300) < 0.05, rng.random(300) < 0.6]).astype(float).tolist()


def fed(detector: str, values: list[float], cuts: list[int]) -> tuple[Watch, list[int]]:
    """The watch after ``values`` fed in the pieces ``cuts`` gives, and the instance
    counts of its detections."""
    watch, found = Watch.start(detector), []
    for lo, hi in itertools.pairwise(cuts):
        watch, got = observe(watch, values[lo:hi])
        found += [lo + i + 1 for i, _ in got]
    return watch, found


@pytest.mark.parametrize("detector", ["page_hinkley", "adwin"])
def test_detections_are_rivers_whatever_the_batches(detector: str) -> None:
    values = errors()
    river = river_drift.PageHinkley() if detector == "page_hinkley" else river_drift.ADWIN()
    expected = []
    for i, x in enumerate(values):
        river.update(x)
        if river.drift_detected:
            expected.append(i + 1)  # the instance count at the detection
    assert expected
    one, found_one = fed(detector, values, list(range(len(values) + 1)))
    whole, found_whole = fed(detector, values, [0, len(values)])
    cut, found_cut = fed(detector, values, [0, 7, 250, 301, len(values)])
    assert found_one == found_whole == found_cut == expected
    assert one == whole == cut  # the stored state too


def test_a_watch_rebuilt_from_its_state_goes_on_as_the_uninterrupted_one() -> None:
    values = errors(1)
    straight, found = fed("page_hinkley", values, [0, len(values)])
    first, early = fed("page_hinkley", values[:200], [0, 200])
    held = OFS.start(OFSParams(num_features=1, drift="page_hinkley"), ["a"])
    held.state = replace(held.state, watch=first.stored())
    decoded = codec.decode(codec.encode("ofs", held.params.to_dict(), held.state))
    stored = Watch.of(decoded.state.watch, "page_hinkley")
    rest, late = observe(stored, values[200:])
    assert early + [200 + i + 1 for i, _ in late] == found and rest == straight


def test_a_predicting_selector_gives_its_errors_and_any_other_its_total_score() -> None:
    predicted = InstanceUpdate(instances=2, instances_seen=5, hits=np.array([False, True]))
    assert signal(predicted, ()) == [1.0, 0.0]
    top = (SelectedFeature("a", 0.5), SelectedFeature("b", 0.25))
    assert signal(InstanceUpdate(instances=4, instances_seen=4), top) == [0.75]
    assert signal(InstanceUpdate(instances=0, instances_seen=4), top) == []


def test_one_total_score_per_batch_is_counted_at_the_batch_end() -> None:
    """kbest's watch sees its selection's total score once per batch."""
    rng = np.random.default_rng(5)
    sel = KBest.start(KBestParams(num_features=1, drift="page_hinkley", half_life=20.0), ["a"])
    ph = PageHinkley(mode="down")  # a drift of a score is a fall
    found, expected = [], []
    for b in range(300):
        X = rng.normal(size=(10, 1))
        y = X[:, 0] + (0.01 if b < 100 else 30.0) * rng.normal(size=10)
        found += [d.instances_seen for d in sel.learn_instances(X, y).drifts]
        if ph.update(sum(f.score or 0.0 for f in sel.selected_features())):
            expected.append(10 * (b + 1))
    assert found == expected and found


def test_a_drift_of_a_real_selector_after_its_labels_flip() -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(1200, 4))
    y = np.where(X[:, 0] > 0, 1, 0)
    y[600:] = 1 - y[600:]
    params = FIRESParams(num_features=2, scale="none", drift="page_hinkley")
    sel = FIRES.start(params, ["a", "b", "c", "d"])
    found = []
    for lo in range(0, 1200, 25):
        found += sel.learn_instances(X[lo : lo + 25], y[lo : lo + 25]).drifts
    # Only the jump of the error counts, not its fall while the model learns.
    assert found and 600 < found[0].instances_seen <= 700
    late = found[0]
    assert late.statistic > 50.0 and not late.reset
    assert {m["name"] for m in late.moved} <= {"a", "b", "c", "d"}


def test_moved_names_the_largest_changes_at_most_five() -> None:
    before = {f"f{i}": float(i) for i in range(8)}
    after = {f"f{i}": 0.0 for i in range(8)}
    got = moved(before, after)
    assert len(got) == MOVED and [m["name"] for m in got] == ["f7", "f6", "f5", "f4", "f3"]
    assert moved({"a": 1.0}, {"a": 1.0}) == []


def test_unknown_settings_are_refused() -> None:
    FIRESParams(num_features=1, drift="adwin", on_drift="reset")
    with pytest.raises(InvalidParameter, match="'drift' parameter of FIRES must be a str among"):
        FIRESParams(num_features=1, drift="cusum")
    with pytest.raises(InvalidParameter, match="on_drift"):
        FIRESParams(num_features=1, on_drift="restart")


def _switch(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(2000, 4))
    y = np.where(X[:, 0] > 0, 1, 0)
    y[1000:] = np.where(X[1000:, 2] > 0, 1, 0)
    return X, y


def test_a_reset_restarts_the_selector_from_the_next_instance() -> None:
    """After a reset at instance i, the selector is a new one fed the instances after i
    (its watch and prequential record aside); the stream's count goes on."""
    X, y = _switch(3)
    names = ["a", "b", "c", "d"]
    sel = OFS.start(OFSParams(num_features=2, drift="page_hinkley", on_drift="reset"), names)
    update = sel.learn_instances(X, y)
    resets = [d.instances_seen for d in update.drifts]
    assert resets and all(d.reset for d in update.drifts)
    assert sel.instances_seen == len(X) == update.instances_seen
    fresh = OFS.start(OFSParams(num_features=2), names)
    fresh.learn_instances(X[resets[-1] :], y[resets[-1] :])
    assert np.array_equal(sel.state.w, fresh.state.w)
    assert sel.state.instances_seen == len(X) - resets[-1] == fresh.state.instances_seen
    assert sel.state.predicted == len(X)  # the prequential record covers the stream
    assert sel.state.watch[2] == resets[-1]  # the offset


def test_log_only_records_and_changes_nothing_the_selector_learns() -> None:
    X, y = _switch(4)
    names = ["a", "b", "c", "d"]
    watched = OFS.start(OFSParams(num_features=2, drift="adwin"), names)
    plain = OFS.start(OFSParams(num_features=2), names)
    assert watched.learn_instances(X, y).drifts
    assert not plain.learn_instances(X, y).drifts and not plain.state.watch
    assert np.array_equal(watched.state.w, plain.state.w)
    assert watched.selected() == plain.selected()


def test_restarted_keeps_the_target_type_and_the_prequential_record() -> None:
    sel = OFS.start(OFSParams(num_features=1), ["a", "b"], target_type="binary")
    sel.learn_instances(np.array([[1.0, 0.0], [0.0, 1.0]]), ["x", "y"])
    fresh = restarted(sel)
    assert fresh.target_type == "binary" and fresh.classes == ()
    assert fresh.predicted == 2 and fresh.instances_seen == 0
    assert not fresh.w.any()


def test_the_watch_stays_bounded() -> None:
    """The stored watch does not grow with the stream."""
    rng = np.random.default_rng(6)
    sizes = []
    for detector in ("page_hinkley", "adwin"):
        sel = OFS.start(OFSParams(num_features=2, drift=detector), ["a", "b", "c"])
        for n in (1_000, 20_000):
            X = rng.normal(size=(n, 3))
            sel.learn_instances(X, (X[:, 0] > 0).astype(int))
            sizes.append(len(repr(sel.state.watch)))
    assert sizes[1] <= sizes[0] + 64  # Page-Hinkley: a few numbers
    assert sizes[3] <= 4 * sizes[2] + 2048  # ADWIN: buckets per power of two of its width


@pytest.mark.parametrize("detector", ["page_hinkley", "adwin"])
def test_a_learning_curve_is_no_drift(detector: str) -> None:
    """A stationary stream: the error falls as FIRES learns, and nothing is detected
    (a watch that counted falls would, and with reset would restart again and again)."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(4000, 4))
    y = (X[:, 0] + 0.2 * rng.normal(size=4000) > 0).astype(int)
    params = FIRESParams(num_features=2, scale="none", drift=detector, on_drift="reset")
    sel = FIRES.start(params, ["a", "b", "c", "d"])
    found, errors = [], []
    for lo in range(0, 4000, 50):
        update = sel.learn_instances(X[lo : lo + 50], y[lo : lo + 50])
        found += update.drifts
        errors += signal(update, ())
    assert not found
    if detector == "page_hinkley":
        both = PageHinkley()  # two-sided, it would detect the fall
        assert [i for i, x in enumerate(errors) if both.update(x)]
