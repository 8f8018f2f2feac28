"""``featurestream bench drift`` end to end through a spawned server (tiny sizes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from featurestream.bench import command
from featurestream.bench.drift_runs import configurations


def test_bench_drift_runs_each_configuration_through_a_served_process(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["drift", "--selector", "ofs", "--selector", "fsds", "--segment", "1500",
            "--stationary", "1000", "--every", "250", "--frame", "50", "--half-life", "300",
            "--plots", str(tmp_path / "plots"), "--json", str(tmp_path / "drift.json")]  # fmt: skip
    assert command.main(argv) == 0
    table = capsys.readouterr().out
    out = json.loads((tmp_path / "drift.json").read_text())
    labels = [(row["target"], row["configuration"]) for row in out["summary"]]
    assert labels == [
        ("binary", "ofs"),
        ("binary", "ofs half_life=300"),
        ("binary", "ofs reset=page_hinkley"),
        ("unsupervised", "fsds"),
        ("unsupervised", "fsds half_life=300"),
        ("unsupervised", "fsds reset=page_hinkley"),
    ]
    assert "| unsupervised | fsds reset=page_hinkley |" in table
    runs = out["runs"]
    for r in runs:
        assert (r["drift_events"] is None) == ("reset=" not in r["label"])
    assert [(r["label"], r["switch"]) for r in runs][:2] == [
        ("ofs", "abrupt"),
        ("ofs", "stationary"),
    ]
    for r in runs:
        n = 3_000 if r["switch"] == "abrupt" else 1_000
        assert [t for t, _ in r["curve"]] == list(range(250, n + 1, 250))
        assert all(0.0 <= v <= 1.0 for _, v in r["curve"]) and r["us_per_instance"] > 0
        assert r["switches"] == ([1_500] if r["switch"] == "abrupt" else [])
    # FSDS forgetting follows the new structure; its F1 at the end is that of the truth.
    fsds = next(r for r in runs if r["label"] == "fsds half_life=300" and r["switch"] == "abrupt")
    assert fsds["curve"][-1][1] == 1.0 and fsds["recoveries"][0]["to_recovered"] <= 1_500
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "drift-binary-abrupt.png", "drift-binary-stationary.png",
        "drift-unsupervised-abrupt.png", "drift-unsupervised-stationary.png",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [["--every", "150", "--frame", "100"], ["--seeds", "a"], ["--segment", "0"],
     ["--half-life", "0"], ["--selector", "saola"], ["--drift", "ddm"]],
)  # fmt: skip
def test_bench_drift_refuses_bad_options(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        command.main(["drift", *argv])
    assert exc.value.code == 2


def test_bench_drift_counts_the_drift_events_of_the_reset_configurations(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "drift.json"
    argv = ["drift", "--selector", "ofs", "--segment", "2000", "--d", "50", "--stationary",
            "1000", "--every", "250", "--frame", "50", "--json", str(path)]  # fmt: skip
    assert command.main(argv) == 0
    table = capsys.readouterr().out
    out = json.loads(path.read_text())
    for r in out["runs"]:
        watched = r["label"] == "ofs reset=page_hinkley"
        assert r["params"].get("on_drift") == ("reset" if watched else None)
        if watched:
            assert r["drift_events"] is not None and r["drift_events"] == len(r["drift_at"])
            assert all(0 < t <= r["instances"] for t in r["drift_at"])
        else:
            assert r["drift_events"] is None and r["drift_at"] == []
    # OFS's error jumps at the switch: the watch sees it, and the stream resets.
    moving, still = (r for r in out["runs"] if r["label"] == "ofs reset=page_hinkley")
    assert moving["switches"] == [2_000] and still["switches"] == []
    assert moving["drift_events"] >= 1
    assert any(t > 2_000 for t in moving["drift_at"])
    row = next(r for r in out["summary"] if r["configuration"] == "ofs reset=page_hinkley")
    assert row["false_alarms"] == still["drift_events"]
    assert row["detections"] == moving["drift_events"]
    assert "| false alarms | detections |" in table
    line = next(x for x in table.splitlines() if "| ofs reset=page_hinkley |" in x)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[6:8] == [str(still["drift_events"]), str(moving["drift_events"])]
    plain = next(x for x in table.splitlines() if x.startswith("| binary | ofs |"))
    assert [c.strip() for c in plain.strip("|").split("|")][6:8] == ["-", "-"]


def test_configurations_add_a_reset_configuration_per_selector_and_target() -> None:
    configs = configurations(["kbest", "ofs"], ["binary", "multiclass"], 500.0, drift="adwin")
    assert [(c.target, c.label) for c in configs] == [
        ("binary", "kbest"),
        ("binary", "kbest half_life=500"),
        ("binary", "kbest reset=adwin"),
        ("binary", "ofs"),
        ("binary", "ofs half_life=500"),
        ("binary", "ofs reset=adwin"),
        ("multiclass", "kbest"),
        ("multiclass", "kbest half_life=500"),
        ("multiclass", "kbest reset=adwin"),
    ]
    reset = configs[2]
    assert reset.params == {"num_features": 5, "drift": "adwin", "on_drift": "reset"}
    assert reset.watches and not reset.forgets and not configs[1].watches
    plain = configurations(["kbest"], ["binary"], 500.0, drift="none")
    assert [c.label for c in plain] == ["kbest", "kbest half_life=500"]
    assert configurations(["kbest"], ["binary"], 500.0) == plain
    with pytest.raises(ValueError):
        configurations(["kbest"], ["binary"], 500.0, drift="ddm")
