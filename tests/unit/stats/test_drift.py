"""Page-Hinkley and ADWIN (stats/drift.py) against River's, by hand and by property."""

from __future__ import annotations

import numpy as np
import pytest
import river.drift as river_drift
from hypothesis import given, settings
from hypothesis import strategies as st

from featurestream.stats.drift import ADWIN, DETECTORS, PageHinkley, detections


def _sequence(seed: int) -> list[float]:
    """One of four kinds of seeded signal: 0/1 errors with shifts, Gaussian shifts, stationary."""
    rng = np.random.default_rng(seed)
    n = 1500
    kind = seed % 4
    if kind == 0:
        parts = [rng.binomial(1, p, n) for p in (0.2, 0.5, 0.1)]
    elif kind == 1:
        parts = [rng.normal(0.0, 1.0, n), rng.normal(0.8, 1.0, n)]
    elif kind == 2:
        parts = [rng.binomial(1, 0.3, 3 * n)]
    else:
        parts = [rng.normal(0.0, 5.0, n), rng.normal(15.0, 10.0, n), rng.normal(-2.0, 1.0, n)]
    return [float(x) for x in np.concatenate(parts)]


def _river_detections(detector: object, values: list[float]) -> list[int]:
    found = []
    for i, x in enumerate(values):
        detector.update(x)  # type: ignore[attr-defined]
        if detector.drift_detected:  # type: ignore[attr-defined]
            found.append(i)
    return found


CONFIGS = [
    ("page_hinkley", {}),
    ("page_hinkley", {"threshold": 10.0, "min_instances": 5}),
    ("page_hinkley", {"threshold": 10.0, "mode": "up"}),
    ("page_hinkley", {"threshold": 10.0, "mode": "down"}),
    ("adwin", {}),
    ("adwin", {"clock": 4}),
]
RIVER = {"page_hinkley": river_drift.PageHinkley, "adwin": river_drift.ADWIN}


@pytest.mark.parametrize(("name", "params"), CONFIGS)
def test_same_detection_indices_as_river_on_20_seeded_sequences(
    name: str, params: dict[str, float | str]
) -> None:
    total = 0
    for seed in range(20):
        values = _sequence(seed)
        ours = detections(DETECTORS[name](**params), values)  # type: ignore[arg-type]
        theirs = _river_detections(RIVER[name](**params), values)
        assert ours == theirs, seed
        total += len(ours)
    assert total > 20  # the sequences do make both detect


def test_page_hinkley_by_hand() -> None:
    # x = 0, 0, 3 with delta 0, alpha 1: means 0, 0, 1; deviations 0, 0, 2.
    ph = PageHinkley(delta=0.0, alpha=1.0, threshold=1.5, min_instances=1)
    assert not ph.update(0.0)
    assert not ph.update(0.0)
    assert ph.statistic == 0.0
    assert ph.update(3.0)  # up = 2, min(up) = 0: 2 > 1.5
    assert ph.statistic == 2.0
    assert ph.n == 0  # restarted


def test_page_hinkley_detects_a_fall_too() -> None:
    ph = PageHinkley(delta=0.0, alpha=1.0, threshold=1.5, min_instances=1)
    assert [ph.update(x) for x in (0.0, 0.0, -3.0)] == [False, False, True]


def test_page_hinkley_modes_count_one_direction() -> None:
    for mode, rise, fall in (("up", True, False), ("down", False, True)):
        ph = PageHinkley(delta=0.0, alpha=1.0, threshold=1.5, min_instances=1, mode=mode)
        assert [ph.update(x) for x in (0.0, 0.0, 3.0)][-1] is rise
        ph = PageHinkley(delta=0.0, alpha=1.0, threshold=1.5, min_instances=1, mode=mode)
        assert [ph.update(x) for x in (0.0, 0.0, -3.0)][-1] is fall


def test_adwin_says_which_way_the_mean_moved() -> None:
    up, down = ADWIN(clock=1), ADWIN(clock=1)
    assert detections(up, [0.0] * 100 + [1.0] * 50) and up.rising
    assert detections(down, [1.0] * 100 + [0.0] * 50) and not down.rising


def test_page_hinkley_waits_for_min_instances() -> None:
    ph = PageHinkley(delta=0.0, alpha=1.0, threshold=1.5, min_instances=4)
    assert [ph.update(x) for x in (0.0, 0.0, 3.0, 3.0)] == [False, False, False, True]


def test_adwin_checks_only_on_its_clock_past_the_grace_period() -> None:
    adwin = ADWIN(clock=4, grace_period=10)
    values = [0.0] * 8 + [1.0] * 8
    found = detections(adwin, values)
    assert all((i + 1) % 4 == 0 for i in found)
    assert detections(ADWIN(clock=4, grace_period=100), values) == []


def test_adwin_merges_buckets_into_powers_of_two() -> None:
    adwin = ADWIN(clock=10**9, max_buckets=2)
    for x in range(7):
        adwin.update(float(x))
    # 7 values, at most 2 buckets per size: sizes 1, 1 | 2 | 2... oldest values merged.
    sizes = [2**r for r, row in enumerate(adwin.rows) for _ in row]
    assert sum(sizes) == 7 == adwin.width
    assert all(len(row) <= 2 for row in adwin.rows)
    assert sum(t for row in adwin.rows for t, _ in row) == adwin.total == 21.0
    # The variance sum is the sum of squared deviations of 0..6 from their mean 3.
    assert adwin.variance == pytest.approx(28.0)
    assert sum(v for row in adwin.rows for _, v in row) + _between(adwin) == pytest.approx(28.0)


def _between(adwin: ADWIN) -> float:
    """The part of the window's squared deviations between its buckets."""
    mean = adwin.total / adwin.width
    return sum(2**r * (t / 2**r - mean) ** 2 for r, row in enumerate(adwin.rows) for t, _ in row)


def test_adwin_state_bounded_by_the_log_of_the_width() -> None:
    adwin = ADWIN()
    rng = np.random.default_rng(0)
    for x in rng.binomial(1, 0.3, 5000):
        adwin.update(float(x))
    assert adwin.width == 5000
    assert sum(len(row) for row in adwin.rows) <= (adwin.max_buckets + 1) * 13


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(["page_hinkley", "adwin"]),
    values=st.lists(st.floats(-10.0, 10.0), min_size=1, max_size=300),
    cut=st.integers(0, 300),
)
def test_a_restored_state_continues_exactly(name: str, values: list[float], cut: int) -> None:
    cls = DETECTORS[name]
    params = {"clock": 1} if name == "adwin" else {"threshold": 3.0, "min_instances": 5}
    whole = cls(**params)  # type: ignore[arg-type]
    expected = detections(whole, values)
    first = cls(**params)  # type: ignore[arg-type]
    head = detections(first, values[:cut])
    resumed = cls.from_state(first.to_state(), **params)
    tail = [i + len(values[:cut]) for i in detections(resumed, values[cut:])]
    assert head + tail == expected
    assert resumed.to_state() == whole.to_state()
