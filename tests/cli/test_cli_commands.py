"""``selected``, ``events``, ``streams`` and ``status``; ``serve`` and ``bench`` still dispatch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from featurestream import cli
from featurestream._entry import build_parser, main
from featurestream_client import Client, Stream
from featurestream_client import cli as client_cli
from tests import support

NAMES = support.names(30)


@pytest.fixture
def stream(url: str, sid: str) -> Stream:
    X, y = support.wdbc()
    with Client(url) as c:
        s = c.create_stream("saola", target=y, id=sid)
        s.add_features(X.T, names=NAMES, chunk_columns=15)
    return s


def test_selected_as_table_and_json(
    stream: Stream, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["selected", stream.id, "--url", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"stream {stream.id}, version 2: 2 selected"
    # The table ranks by score, best first (|r|: f27 0.79, f21 0.46); the JSON keeps
    # the selector's own order.
    assert [line.split()[:2] for line in lines[2:]] == [["1", "f27"], ["2", "f21"]]
    assert main(["selected", stream.id, "--url", url, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == 2 and [f["name"] for f in doc["features"]] == ["f21", "f27"]


def test_events_as_table_and_json_lines(
    stream: Stream, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Client(url) as c:
        everything = list(c.stream(stream.id).iter_events())
    assert main(["events", stream.id, "--url", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == client_cli.EVENT_COLUMNS
    assert [line.split()[0] for line in lines[1:]] == [e.id for e in everything]
    assert lines[1].split() == [
        "1-0",
        "1",
        "1",
        stream.producer,
        "batch",
        "15",  # a batch shows how many features it brought (--json has their names)
        "features",
        "-",
    ]
    assert main(["events", stream.id, "--url", url, "--json", "--limit", "4"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["id"] for e in events] == ["1-0", "1-1", "1-2", "1-3"]
    assert main(["events", stream.id, "--url", url, "--json", "--after", "2-0"]) == 0
    rest = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["id"] for e in rest] == [e.id for e in everything if e.version == 2][1:]


def test_streams_and_status(stream: Stream, url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["streams", "--url", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "algorithm", "kind", "size", "version", "updated_at"]
    row = next(line.split() for line in lines if line.startswith(stream.id))
    assert row[1:6] == ["saola", "features", "569", "rows", "2"]
    assert main(["streams", "--url", url, "--json"]) == 0
    assert stream.id in {s["id"] for s in json.loads(capsys.readouterr().out)}
    assert main(["status", stream.id, "--url", url]) == 0
    table = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines()[1:])
    assert table["features_seen"] == "30" and table["algorithm"] == "saola"
    assert main(["status", stream.id, "--url", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["features_seen"] == 30


def test_unknown_stream(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("selected", "events", "status"):
        assert main([command, "no-such-stream", "--url", url]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"featurestream {command}: ") and "(404 stream-not-found)" in err
        assert len(err.splitlines()) == 1


def test_events_follow_prints_new_events_until_interrupted(stream: Stream, url: str) -> None:
    cmd = [sys.executable, "-m", "featurestream", "events", stream.id, "--follow"]
    cmd += ["--interval", "0.05", "--url", url, "--json"]
    with subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=support.default_sigint,
    ) as proc:
        try:
            assert proc.stdout is not None
            with Client(url) as c:
                everything = [e.id for e in c.stream(stream.id).iter_events()]
            seen = [json.loads(proc.stdout.readline())["id"] for _ in everything]
            assert seen == everything
            with Client(url) as c:
                c.stream(stream.id).add_features(np.ones((569, 1)), names=["constant"])
            new = [json.loads(proc.stdout.readline()) for _ in range(2)]
            assert [e["type"] for e in new] == ["batch", "rejected"]
            assert new[1]["names"] == ["constant"] and new[1]["reason"] == "constant"
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()  # SIGINT ignored (inherited SIG_IGN): fail, do not hang
                raise
    assert code == 130


def test_serve_and_bench_still_dispatch(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["serve", "--port", "8123", "--store", "memory://"])
    assert args.func is cli._serve and args.port == 8123
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--help"])
    assert exc.value.code == 0 and "featurestream bench" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.startswith("featurestream ")


def test_url_comes_from_the_environment(
    stream: Stream, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {**os.environ, "FEATURESTREAM_URL": url}
    proc = subprocess.run(
        [sys.executable, "-m", "featurestream", "status", stream.id, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["id"] == stream.id


def test_the_server_command_line_leaves_the_client_package_alone() -> None:
    code = "import sys\nimport featurestream.cli\nprint('featurestream_client' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
