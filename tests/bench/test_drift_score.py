"""Group F1 and what it says after a switch, by hand (bench/drift_score.py, drift_report.py)."""

from __future__ import annotations

import numpy as np
import pytest

from featurestream.bench.drift_data import Concept
from featurestream.bench.drift_report import render, summarise
from featurestream.bench.drift_runs import RunResult
from featurestream.bench.drift_score import (
    f1,
    point_at,
    recoveries,
    stationary_f1,
    strict_f1,
)

# Features 0..7: groups of originals 0 and 1; 2 and 3 copy 0, 4 copies 1; 5..7 noise.
CONCEPT = Concept(np.array([0, 1, 0, 0, 1, -1, -1, -1]), np.array([0, 1]), np.ones(2), np.zeros(2))


@pytest.mark.parametrize(
    ("selected", "group", "strict"),
    [
        ([0, 1], 1.0, 1.0),  # both originals: h = 2, 2 * 2 / (2 + 2)
        ([2, 4], 1.0, 0.0),  # a copy of each: both groups hit, no original
        ([0, 2], 0.5, 0.5),  # one group twice: h = 1, 2 / 4
        ([0, 1, 5], 0.8, 0.8),  # a noise feature more: 4 / 5
        ([0, 2, 3, 5], 1 / 3, 1 / 3),  # h = 1: 2 / 6
        ([5, 6], 0.0, 0.0),
        ([], 0.0, 0.0),
    ],
)
def test_group_and_strict_f1_by_hand(selected: list[int], group: float, strict: float) -> None:
    assert f1(selected, CONCEPT) == pytest.approx(group)
    assert strict_f1(selected, CONCEPT) == pytest.approx(strict)


def test_recovery_counts_from_the_switch_to_the_first_point_at_09() -> None:
    curve = [(500, 1.0), (1_000, 1.0), (1_500, 0.0), (2_000, 0.6), (2_500, 0.9), (3_000, 1.0)]
    (r,) = recoveries(curve, [1_000], 3_000, offsets=[500, 1_000, 2_000, 2_001])
    assert r.switch == 1_000 and r.to_recovered == 1_500
    # Offsets: the point at 1,500 and at 2,000; 3,000 is the stream's end; beyond: None.
    assert r.at == {500: 0.0, 1_000: 0.6, 2_000: 1.0, 2_001: None}


def test_recovery_is_judged_up_to_the_next_switch() -> None:
    curve = [(100, 0.0), (200, 0.2), (300, 1.0), (400, 0.4)]
    first, second = recoveries(curve, [100, 300], 400, offsets=[100])
    # The 1.0 at 300 is still the first segment's last point: its recovery, not the second's.
    assert first.to_recovered == 200 and first.at == {100: 0.2}
    assert second.to_recovered is None and second.at == {100: 0.4}


def test_point_at_takes_the_last_point_not_after_t_and_after_the_switch() -> None:
    curve = [(100, 0.1), (250, 0.7), (400, 0.9)]
    assert point_at(curve, 300, 100) == 0.7
    assert point_at(curve, 249, 100) is None
    assert point_at(curve, 400, 250) == 0.9


def test_stationary_f1_is_the_mean_of_the_second_half() -> None:
    curve = [(25, 0.0), (50, 0.0), (75, 0.6), (100, 0.8)]
    assert stationary_f1(curve, 100) == pytest.approx(0.7)


def _run(label: str, switches: list[int], curve: list[tuple[int, float]], n: int) -> RunResult:
    r = RunResult(label, "kbest", "binary", "abrupt" if switches else "stationary", 0,
                  {}, n, n * 1e-5, curve, curve, switches)  # fmt: skip
    if switches:
        r.recoveries = recoveries(curve, switches, n, offsets=[5_000, 10_000])
    else:
        r.stationary_f1 = stationary_f1(curve, n)
    return r


def test_summary_and_table_of_one_configuration() -> None:
    moving = _run("kbest", [10_000], [(10_000, 1.0), (15_000, 0.6), (20_000, 1.0)], 20_000)
    still = _run("kbest", [], [(10_000, 0.4), (20_000, 1.0)], 20_000)
    (row,) = summarise([moving, still])
    assert row["f1_after"] == {5_000: 0.6, 10_000: 1.0}
    assert row["to_recovered"] == 10_000 and row["stationary_f1"] == 1.0
    # 0.2 s for 20,000 instances, twice: 10 us each.
    assert row["us_per_instance"] == pytest.approx(10.0)
    text = render([row], "header")
    assert "| binary | kbest | 0.60 | 1.00 | 10,000 | 1.00 | - | - | 10.0 |" in text
    assert row["false_alarms"] is None and row["detections"] is None


def test_summary_of_a_watch_counts_false_alarms_and_detections_over_seeds() -> None:
    runs = []
    for seed, (alarms, found) in enumerate([(1, 2), (0, 3)]):
        moving = _run("kbest reset=adwin", [10_000], [(10_000, 1.0), (20_000, 1.0)], 20_000)
        still = _run("kbest reset=adwin", [], [(10_000, 1.0), (20_000, 1.0)], 20_000)
        for r, count in ((moving, found), (still, alarms)):
            r.seed, r.drift_events = seed, count
        runs += [moving, still]
    (row,) = summarise(runs)
    assert (row["false_alarms"], row["detections"]) == (1, 5)
    assert "| 1.00 | 1 | 5 | 10.0 |" in render([row], "header")
