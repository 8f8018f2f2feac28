"""``featurestream bench`` options: suite selection, budgets, JSON output, scaling, old modes."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from featurestream.bench import main
from featurestream.bench.command import _judge, render_table
from featurestream.bench.datasets import feature_spec, make_features
from featurestream.bench.runs import (
    GROUP_SIZE,
    RunResult,
    chunk_bounds,
    compare,
    features_in_process,
)
from featurestream.config import Settings
from tests.client.live import LiveServer


@pytest.fixture(scope="module")
def live_url() -> Iterator[str]:
    server = LiveServer(Settings(store_url="memory://")).start()
    yield server.url
    server.stop()


@pytest.mark.parametrize(
    "argv",
    [
        ["--dataset", "mnist"],
        ["--algorithm", "lasso", "--quick"],
        ["--params", "[1, 2]"],
        ["--params", "{not json"],
        ["--algorithm", "all"],  # the single-run modes take one algorithm
        ["--mode", "instances", "--algorithm", "alpha_investing"],
    ],
)
def test_bad_options_exit_with_usage_error(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2


def test_suite_in_process_only_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    argv = ["--quick", "--dataset", "dorothea", "--algorithm", "saola", "--algorithm", "ofs"]
    code = main([*argv, "--skip-service", "--json", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    # ofs is an instance-stream selector: it does not run on a feature set.
    assert [(r["dataset"], r["algorithm"], r["mode"]) for r in data["results"]] == [
        ("dorothea", "saola", "in-process")
    ]
    assert data["meta"]["server_spawned"] is False and data["meta"]["store"] is None


def test_budget_stops_a_run_after_a_chunk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    argv = ["--quick", "--dataset", "thrombin", "--algorithm", "saola", "--skip-service"]
    code = main([*argv, "--chunk", "500", "--budget", "0", "--json", str(out)])
    assert code == 0
    (r,) = json.loads(out.read_text())["results"]
    assert r["items"] == 500 and r["planned"] == 3000 and r["complete"] is False
    assert "stopped when the --budget ran out" in capsys.readouterr().out


def test_given_url_is_used_and_its_memory_not_measured(live_url: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    argv = ["--quick", "--dataset", "dorothea", "--algorithm", "saola", "--url", live_url]
    assert main([*argv, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    service = next(r for r in data["results"] if r["mode"] == "service")
    assert service["identical"] is True and service["path"] == "sdk"  # the default
    assert service["peak_rss_bytes"] is None and "not spawned" in service["rss_note"]
    assert data["meta"]["server_spawned"] is False and data["meta"]["url_given"] is True


def test_group_saola_chunks_hold_whole_groups() -> None:
    d = make_features(feature_spec("dorothea", quick=True))
    bounds = chunk_bounds(d, "group_saola", 1234)
    assert bounds[0] == (0, 1230) and bounds[-1][1] == d.b
    assert all(lo % GROUP_SIZE == 0 for lo, _ in bounds)
    dense = make_features(feature_spec("dense", quick=True))
    assert chunk_bounds(dense, "saola", 10**9) == [(0, dense.b)]


def test_compare_and_judge() -> None:
    d = make_features(feature_spec("dorothea", quick=True))
    ref = features_in_process(d, "saola", {}, chunk=700)
    assert ref.complete and ref.items == d.b
    svc = RunResult(**{**ref.__dict__, "mode": "service", "seconds": 2 * ref.seconds})
    compare(svc, ref)
    assert svc.identical is True and svc.ratio == pytest.approx(2.0)
    other = RunResult(**{**svc.__dict__, "selection": ref.selection[:-1], "identical": None})
    compare(other, ref)
    assert other.identical is False
    assert "NO" in render_table([other])

    full = RunResult(**{**ref.__dict__, "dataset": "dorothea", "mode": "service", "seconds": 1.5})
    _judge(full, quick=False)
    assert full.target == "<= 2 s" and full.met is True
    slow = RunResult(**{**full.__dict__, "seconds": 2.5})
    _judge(slow, quick=False)
    assert slow.met is False and "MISSED" in render_table([slow])
    _judge(quick := RunResult(**{**full.__dict__, "target": None, "met": None}), quick=True)
    assert quick.target is None and quick.met is None


@pytest.mark.parametrize(
    ("dataset", "algorithm", "path", "chunk", "seconds", "rate", "verdict"),
    [
        # The user's paths are held to their own bounds ...
        ("dorothea", "saola", "sdk", 20_000, 0.9, 0.0, ("<= 1 s", True)),
        ("dorothea", "saola", "sdk", 20_000, 1.1, 0.0, ("<= 1 s", False)),
        ("thrombin", "saola", "sdk", 20_000, 1.6, 0.0, ("<= 1.5 s", False)),
        ("news20", "saola", "sdk", 20_000, 11.0, 0.0, ("<= 12 s", True)),
        ("dorothea", "saola", "json", 20_000, 1.6, 0.0, ("<= 1.5 s", False)),
        ("stream-d1000", "ofs", "sdk", None, 1.0, 59_000.0, (">= 60000 inst/s", False)),
        ("stream-d1000", "ofs", "sdk", None, 1.0, 61_000.0, (">= 60000 inst/s", True)),
        ("stream-d1000", "fsds", "sdk", 5_000, 1.0, 14_000.0, (">= 15000 inst/s", False)),
        # ... the hand-built path, and features in requests of another size, to the service's.
        ("dorothea", "saola", "raw", 20_000, 1.6, 0.0, ("<= 2 s", True)),
        ("dorothea", "saola", "json", 5_000, 1.6, 0.0, ("<= 2 s", True)),
        ("dorothea", "saola", "sdk", 5_000, 1.6, 0.0, ("<= 2 s", True)),
        ("dorothea", "fast_osfs", "sdk", 20_000, 21.0, 0.0, ("<= 20 s", False)),
        ("stream-d1000", "ofs", "raw", None, 1.0, 10_000.0, (None, None)),
    ],
)
def test_a_service_run_is_judged_by_the_bound_of_its_path(
    dataset: str,
    algorithm: str,
    path: str,
    chunk: int | None,
    seconds: float,
    rate: float,
    verdict: tuple[str | None, bool | None],
) -> None:
    kind = "instances" if dataset.startswith("stream-") else "features"
    r = RunResult(dataset, algorithm, "service", kind, 100, 10, 10, 10, seconds, rate, 0, 0.0, {})
    r.path = path
    _judge(r, quick=False, chunk=chunk)
    assert (r.target, r.met) == verdict
    # In process the same run is held to the selector's bound only, if it has one.
    ref = RunResult(**{**r.__dict__, "mode": "in-process", "path": None, "target": None})
    _judge(ref, quick=False, chunk=chunk)
    assert ref.target == ("<= 20 s" if algorithm == "fast_osfs" else None)


@pytest.mark.slow
def test_single_run_modes_still_print_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--columns", "300", "--rows", "200", "--repeat", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["mode"] for r in rows] == ["in-process", "service"]
    assert rows[1]["recall"] == rows[0]["recall"] == 1.0
    assert rows[1]["selected"] == rows[0]["selected"]
    argv = ["--mode", "instances", "--instances", "300", "--dim", "30", "--repeat", "1"]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["algorithm"] == "ofs" and rows[1]["same_selection"] is True


def test_scaling_quick_writes_points_and_a_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    png, out = tmp_path / "s.png", tmp_path / "s.json"
    argv = ["scaling", "--quick", "--algorithm", "saola", "--algorithm", "ofs"]
    assert main([*argv, "--plot", str(png), "--json", str(out)]) == 0
    points = json.loads(out.read_text())["points"]
    assert {(p["algorithm"], p["axis"]) for p in points} == {
        ("saola", "n"),
        ("saola", "size"),
        ("ofs", "d"),
        ("ofs-sparse", "d"),
    }
    assert all(p["seconds_per_item"] > 0 for p in points)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "plot written" in capsys.readouterr().out


def test_scaling_without_matplotlib_skips_the_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    png = tmp_path / "s.png"
    argv = ["--scaling", "--quick", "--algorithm", "alpha_investing", "--plot", str(png)]
    assert main(argv) == 0
    assert not png.exists()
    assert "matplotlib is not installed" in capsys.readouterr().out


def test_latency_reads_on_schedule_while_a_writer_streams(
    live_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["latency", "--url", live_url, "--seconds", "1", "--rate", "50"]
    assert main([*argv, "--write-rate", "2000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reads"] == 50 and out["not_ok"] == 0
    assert 0 < out["p50_ms"] <= out["p90_ms"] <= out["p99_ms"] <= out["max_ms"]
    # The writer was streaming all along: its rate is near the pace asked for.
    assert out["write_rate"] == 2000 and 500 < out["writer_instances_per_second"] < 2600
    assert out["steal_percent"] is None or 0.0 <= out["steal_percent"] <= 100.0
    # Then the same reads with the writer stopped, as long (at most 3 s): the floor.
    assert out["idle_reads"] == 50 and out["idle_not_ok"] == 0
    assert 0 < out["idle_p50_ms"] <= out["idle_p99_ms"]


def test_latency_runs_repeat_on_one_server_and_report_the_spread_of_p99(
    live_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["latency", "--url", live_url, "--seconds", "0.5", "--rate", "40"]
    assert main([*argv, "--write-rate", "1000", "--repeat", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["reads"] for r in out["runs"]] == [20, 20]
    p99 = sorted(r["p99_ms"] for r in out["runs"])
    assert out["p99_ms_median"] == pytest.approx((p99[0] + p99[1]) / 2)
    assert main([*argv, "--write-rate", "1000", "--repeat", "2"]) == 0
    text = capsys.readouterr().out
    assert "run 1: GET /selected" in text and "run 2: GET /selected" in text
    assert "p99 over 2 runs: min" in text
    assert text.count("the same reads once the writer stopped (20, non-200 0): p50") == 2
    assert "p99 once the writer stopped: min" in text
    with pytest.raises(SystemExit):
        main([*argv, "--repeat", "0"])
    with pytest.raises(SystemExit):
        main([*argv, "--idle-seconds", "-1"])


def test_latency_idle_reads_can_be_left_out(
    live_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["latency", "--url", live_url, "--seconds", "0.5", "--rate", "40", "--write-rate"]
    assert main([*argv, "1000", "--idle-seconds", "0", "--repeat", "2"]) == 0
    text = capsys.readouterr().out
    assert "once the writer stopped" not in text
    assert main([*argv, "1000", "--idle-seconds", "0.25", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reads"] == 20 and out["idle_reads"] == 10


def test_latency_idle_reads_run_once_the_writer_is_gone(
    live_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each call of the reader is recorded (the seconds asked for, the writer processes
    alive then) and answered at once: the second call, the idle reads, finds no
    writer, lasts --seconds at most 3 s, and its non-200 reads are counted apart."""
    import multiprocessing

    from featurestream.bench import latency

    calls: list[tuple[float, int]] = []

    async def reader(
        url: str, path: str, rate: float, seconds: float
    ) -> tuple[list[float], list[float], int]:
        calls.append((seconds, len(multiprocessing.active_children())))
        k = len(calls)
        return [0.001 * k] * 10, [0.001 * k] * 10, k - 1

    monkeypatch.setattr(latency, "_read", reader)
    result = latency.measure(live_url, "given", 40, 10.0, 1000.0)
    assert calls == [(10.0, 1), (3.0, 0)]
    assert (result.reads, result.not_ok, result.p99_ms) == (10, 0, pytest.approx(1.0))
    assert (result.idle_reads, result.idle_not_ok) == (10, 1)
    assert result.idle_p99_ms == pytest.approx(2.0)
    assert result.idle_seconds == 3.0
    calls.clear()
    result = latency.measure(live_url, "given", 40, 1.5, 1000.0, idle_seconds=0)
    assert calls == [(1.5, 1)] and result.idle_reads == 0 and result.idle_p99_ms is None
    assert "once the writer stopped" not in latency.report(result, False)


def test_latency_says_when_the_idle_reads_could_not_run(
    live_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Idle reads asked for that could not connect: the run keeps its figures under
    load, and its report says the idle reads are missing instead of leaving them out."""
    from featurestream.bench import latency

    calls: list[float] = []

    async def reader(
        url: str, path: str, rate: float, seconds: float
    ) -> tuple[list[float], list[float], int]:
        calls.append(seconds)
        if len(calls) > 1:
            raise ConnectionRefusedError("the server went away")
        return [0.001] * 10, [0.001] * 10, 0

    monkeypatch.setattr(latency, "_read", reader)
    result = latency.measure(live_url, "given", 40, 1.0, 1000.0)
    assert calls == [1.0, 1.0] and result.reads == 10
    assert (result.idle_seconds, result.idle_reads, result.idle_p99_ms) == (1.0, 0, None)
    text = latency.report(result, False)
    assert "the same reads once the writer stopped: none (the writer did not stop" in text
    assert json.loads(latency.report(result, True))["idle_reads"] == 0
    both = latency.report_runs([result, result], False)
    assert both.count("stopped: none") == 2 and "p99 once the writer stopped" not in both


@pytest.mark.parametrize("path", ["sdk", "raw", "json"])
def test_each_path_selects_what_the_selector_does_in_process(
    live_url: str, tmp_path: Path, path: str
) -> None:
    out = tmp_path / "r.json"
    argv = ["--quick", "--dataset", "dorothea", "--dataset", "stream-d1000", "--url", live_url]
    argv += ["--algorithm", "saola", "--algorithm", "ofs", "--algorithm", "fsds"]
    assert main([*argv, "--path", path, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["meta"]["path"] == path
    service = [r for r in data["results"] if r["mode"] == "service"]
    assert {r["algorithm"] for r in service} == {"saola", "ofs", "fsds"}
    for r in service:
        assert r["path"] == path and r["identical"] is True and r["bytes_sent"] > 0
        assert r["items"] == r["planned"]
    assert all(r["path"] is None for r in data["results"] if r["mode"] == "in-process")
    # FSDS runs with the sketch and singular vectors the page's figures name, on both sides.
    fsds = [r for r in data["results"] if r["algorithm"] == "fsds"]
    assert [(r["params"]["sketch_size"], r["params"]["k"]) for r in fsds] == [(20, 10)] * 2


@pytest.mark.parametrize(
    ("writer", "ingest"),
    [
        ("sdk", "instances"),
        ("json", "instances"),
        ("websockets", "instances"),
        ("sdk", "features"),
        ("json", "features"),
        ("raw", "features"),
    ],
)
def test_latency_writers(
    live_url: str, capsys: pytest.CaptureFixture[str], writer: str, ingest: str
) -> None:
    argv = ["latency", "--url", live_url, "--seconds", "0.5", "--rate", "40", "--quick"]
    argv += ["--writer", writer, "--ingest", ingest, "--write-rate", "0", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["writer"] == writer and out["ingest"] == ingest
    assert out["reads"] == 20 and out["not_ok"] == 0
    assert out["writer_instances_per_second"] > 0


def test_latency_features_take_no_plain_websockets_writer() -> None:
    with pytest.raises(SystemExit):
        main(["latency", "--ingest", "features", "--writer", "websockets"])


@pytest.mark.parametrize("budget", [None, 0.0, 3600.0])
def test_sdk_instance_runs_stream_through_one_connection(
    live_url: str, budget: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The timed part is one stream_instances call: one WebSocket, its pipeline never
    drained between blocks (a call per block measured the reconnects, not the path)."""
    from featurestream.bench import sdk
    from featurestream.bench.datasets import instance_spec, make_instances

    opened: list[str] = []
    original = sdk.CountingClient._ws_connect

    def counted(self: sdk.CountingClient, path: str, query: object) -> object:
        opened.append(path)
        return original(self, path, query)

    monkeypatch.setattr(sdk.CountingClient, "_ws_connect", counted)
    data = make_instances(instance_spec("stream-d1000", quick=True))
    frames = -(-data.spec.n // data.spec.frame)
    assert frames > 1
    r = sdk.instances_sdk(live_url, data, "ofs", {"num_features": 20}, budget=budget)
    assert len(opened) == 2  # the untimed warm-up stream, then the timed one
    # A budget of 0 stops after the first frame; otherwise every frame goes.
    assert r.items == (data.spec.frame if budget == 0.0 else data.spec.n)
