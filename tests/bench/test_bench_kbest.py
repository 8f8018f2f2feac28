"""``featurestream bench kbest``: both paths side by side, min/median/max, the same selection."""

from __future__ import annotations

import json

import pytest

from featurestream.bench import command, kbest_rate


def test_bench_kbest_measures_both_paths_and_their_ratio(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["kbest", "--instances", "300", "--dim", "40", "--frame", "50", "--repeat", "2"]
    assert command.main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    for path in ("in-process", "service/sdk"):
        r = result[path]
        assert 0 < r["min"] <= r["median"] <= r["max"]
    assert result["ratio"] == result["service/sdk"]["median"] / result["in-process"]["median"]
    assert result["identical"] is True and result["d"] == 40


def test_bench_kbest_table_names_the_figures() -> None:
    r = {"min": 1.0, "median": 2.0, "max": 3.0}
    text = kbest_rate.render(
        {"in-process": r, "service/sdk": r, "ratio": 1.0, "identical": True,
         "instances": 10, "d": 5, "frame": 2}
    )  # fmt: skip
    assert "| in-process | 1 | 2 | 3 |" in text and "feature-updates per second" in text
