"""FIRES and NRFS in ``featurestream bench``: the suite's parameters and runs, and NRFS scaling.

Small sizes only; asserts what the results say, never how fast anything was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from featurestream.bench import main
from featurestream.bench.datasets import instance_spec, make_instances
from featurestream.bench.runs import NRFS_COMPUTATIONS, NRFS_WINDOW, default_params
from featurestream.bench.scaling import Grid, run_scaling, table, window_point
from featurestream.config import Settings
from tests.client.live import LiveServer

INSTANCE_SETS = ["--dataset", "stream-d1000", "--dataset", "stream-d100000"]
BOTH = ["--algorithm", "fires", "--algorithm", "nrfs"]


@pytest.fixture(scope="module")
def live_url() -> Iterator[str]:
    server = LiveServer(Settings(store_url="memory://")).start()
    yield server.url
    server.stop()


def test_fires_standardises_dense_instances_only() -> None:
    dense = make_instances(instance_spec("stream-d1000", quick=True))
    sparse = make_instances(instance_spec("stream-d100000", quick=True))
    assert default_params("fires", dense) == {"num_features": 20, "scale": "standard"}
    assert default_params("fires", sparse) == {"num_features": 20, "scale": "none"}


@pytest.mark.parametrize(("n", "refresh"), [(600, NRFS_WINDOW), (20_000, 5_000), (100_000, 25_000)])
def test_nrfs_window_and_refresh_keep_the_computations_bounded(n: int, refresh: int) -> None:
    data = make_instances(instance_spec("stream-d1000").scaled(n, 30))
    p = default_params("nrfs", data)
    assert p == {"num_features": 20, "window": NRFS_WINDOW, "refresh": refresh}
    assert n // p["refresh"] <= NRFS_COMPUTATIONS


def test_suite_runs_fires_on_both_instance_sets_and_nrfs_on_the_dense_one(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["--quick", *INSTANCE_SETS, *BOTH, "--skip-service", "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    runs = {(r["dataset"], r["algorithm"]): r for r in results}
    assert set(runs) == {
        ("stream-d1000", "fires"),
        ("stream-d100000", "fires"),
        ("stream-d1000", "nrfs"),
    }
    assert runs["stream-d1000", "fires"]["params"]["scale"] == "standard"
    assert runs["stream-d100000", "fires"]["params"]["scale"] == "none"
    for r in results:
        assert r["error"] is None and r["complete"] and r["rate"] > 0
        assert r["selected"] == 20
    # The planted features decide the label: FIRES finds them on both sets.
    assert runs["stream-d1000", "fires"]["recall"] >= 0.8
    assert runs["stream-d100000", "fires"]["recall"] >= 0.8


@pytest.mark.parametrize("path", ["sdk", "raw", "json"])
def test_service_runs_select_what_the_selectors_do_in_process(
    live_url: str, tmp_path: Path, path: str
) -> None:
    out = tmp_path / "r.json"
    argv = ["--quick", *INSTANCE_SETS, *BOTH, "--url", live_url, "--path", path]
    assert main([*argv, "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    service = [r for r in results if r["mode"] == "service"]
    assert {(r["dataset"], r["algorithm"]) for r in service} == {
        ("stream-d1000", "fires"),
        ("stream-d100000", "fires"),
        ("stream-d1000", "nrfs"),
    }
    for r in service:
        assert r["path"] == path and r["identical"] is True and r["bytes_sent"] > 0
        assert r["items"] == r["planned"] and r["selected"] == 20


def test_window_point_times_one_computation() -> None:
    p = window_point("nrfs", 40, 12)
    assert (p.algorithm, p.axis, p.x, p.n, p.size, p.items) == ("nrfs", "window", 40, 40, 12, 1)
    assert p.seconds_per_item > 0


def test_nrfs_curves_against_window_and_m() -> None:
    grid = Grid.quick()
    points = run_scaling(grid, (), (), window_algorithms=("nrfs",))
    curves = {(p.axis, p.x, p.n, p.size) for p in points}
    assert curves == {("window", n, n, grid.m_for_windows) for n in grid.windows} | {
        ("m", m, grid.window_for_ms, m) for m in grid.ms
    }
    text = table(points)
    assert "nrfs vs window:" in text and "nrfs vs m:" in text


def test_scaling_command_plots_fires_and_nrfs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    png, out = tmp_path / "s.png", tmp_path / "s.json"
    argv = ["scaling", "--quick", *BOTH, "--plot", str(png), "--json", str(out)]
    assert main(argv) == 0
    points = json.loads(out.read_text())["points"]
    assert {(p["algorithm"], p["axis"]) for p in points} == {
        ("fires", "d"),
        ("nrfs", "window"),
        ("nrfs", "m"),
    }
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "one computation" in capsys.readouterr().out
