"""``featurestream bench drift`` end to end through a spawned server (tiny sizes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from featurestream.bench import command


def test_bench_drift_runs_each_configuration_through_a_served_process(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["drift", "--selector", "ofs", "--selector", "fsds", "--segment", "1500",
            "--stationary", "1000", "--every", "250", "--frame", "50", "--half-life", "300",
            "--plots", str(tmp_path), "--json"]  # fmt: skip
    assert command.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    labels = [(row["target"], row["configuration"]) for row in out["summary"]]
    assert labels == [
        ("binary", "ofs"),
        ("binary", "ofs half_life=300"),
        ("unsupervised", "fsds"),
        ("unsupervised", "fsds half_life=300"),
    ]
    runs = out["runs"]
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
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "drift-binary-abrupt.png", "drift-binary-stationary.png",
        "drift-unsupervised-abrupt.png", "drift-unsupervised-stationary.png",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [["--every", "150", "--frame", "100"], ["--seeds", "a"], ["--segment", "0"],
     ["--half-life", "0"], ["--selector", "saola"]],
)  # fmt: skip
def test_bench_drift_refuses_bad_options(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        command.main(["drift", *argv])
    assert exc.value.code == 2
