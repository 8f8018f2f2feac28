"""A stream's drift watch (engine/drift.py): its signal, detections, state and events."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from river import drift as river_drift

from featurestream.engine.drift import (
    MOVED,
    Watch,
    batch_signal,
    check_drift,
    drift_event,
    moved,
    observe,
)
from featurestream.errors import InvalidInput
from featurestream.selectors import FIRES, FIRESParams
from featurestream.selectors.decisions import SelectedFeature
from featurestream.stats.drift import PageHinkley


def errors(seed: int = 0) -> list[float]:
    """0/1 errors: rare for 300 instances, then frequent (an abrupt change)."""
    rng = np.random.default_rng(seed)
    return (np.r_[rng.random(300) < 0.05, rng.random(300) < 0.6]).astype(float).tolist()


def fed(detector: str, values: list[float], cuts: list[int]) -> tuple[Watch, list[int]]:
    watch, found, seen = Watch.start(detector), [], 0
    for lo, hi in itertools.pairwise(cuts):
        watch, got = observe(watch, values[lo:hi], seen, hi - lo, ())
        found += [d.instances_seen for d in got]
        seen = hi
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
    stored = Watch(first.detector, tuple(first.state), first.scores)
    rest, late = observe(stored, values[200:], 200, len(values) - 200, ())
    assert early + [d.instances_seen for d in late] == found and rest == straight


def test_a_predicting_selector_gives_its_errors_and_any_other_its_total_score() -> None:
    before = SimpleNamespace(predicted=3, recent=np.array([True, True, False]))
    after = SimpleNamespace(predicted=5, recent=np.array([True, True, False, False, True]))
    assert batch_signal(after, before, 2, ()) == [1.0, 0.0]
    top = (SelectedFeature("a", 0.5), SelectedFeature("b", 0.25))
    assert batch_signal(SimpleNamespace(), SimpleNamespace(), 4, top) == [0.75]
    assert batch_signal(SimpleNamespace(), SimpleNamespace(), 0, top) == []


def test_one_total_score_per_batch_is_counted_at_the_batch_end() -> None:
    watch = Watch.start("page_hinkley")
    ph = PageHinkley(threshold=50.0)
    seen, found, expected = 0, [], []
    for b in range(80):
        score = 0.0 if b < 40 else 5.0
        top = (SelectedFeature("a", score),)
        watch, got = observe(watch, [score], seen, 10, top)
        seen += 10
        found += [d.instances_seen for d in got]
        if ph.update(score):
            expected.append(seen)
    assert found == expected and found


def test_a_drift_of_a_real_selector_after_its_labels_flip() -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(1200, 4))
    y = np.where(X[:, 0] > 0, 1, 0)
    y[600:] = 1 - y[600:]
    sel = FIRES.start(FIRESParams(num_features=2, scale="none"), ["a", "b", "c", "d"])
    watch, seen, found = Watch.start("page_hinkley"), 0, []
    for lo in range(0, 1200, 25):
        before = sel.state
        sel.learn_instances(X[lo : lo + 25], y[lo : lo + 25])
        values = batch_signal(sel.state, before, 25, sel.selected_features())
        watch, got = observe(watch, values, seen, 25, sel.selected_features())
        seen += 25
        found += got
    # The error falls while the model learns (Page-Hinkley is two-sided), then jumps.
    assert any(600 < d.instances_seen <= 700 for d in found)
    found = [d for d in found if d.instances_seen > 600]
    event = drift_event(7, "page_hinkley", found[0])
    assert event["type"] == "drift" and event["statistic"] > 50.0
    assert set(event) == {"type", "version", "detector", "instances_seen", "statistic", "moved"}


def test_moved_names_the_largest_changes_at_most_five() -> None:
    before = {f"f{i}": float(i) for i in range(8)}
    after = {f"f{i}": 0.0 for i in range(8)}
    got = moved(before, after)
    assert len(got) == MOVED and [m["name"] for m in got] == ["f7", "f6", "f5", "f4", "f3"]
    assert moved({"a": 1.0}, {"a": 1.0}) == []


def test_unknown_settings_are_refused() -> None:
    check_drift("adwin", "reset")
    with pytest.raises(InvalidInput, match="drift must be one of none, page_hinkley, adwin"):
        check_drift("cusum", "log")
    with pytest.raises(InvalidInput, match="on_drift"):
        check_drift("none", "restart")
