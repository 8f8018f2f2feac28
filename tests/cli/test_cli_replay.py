"""``featurestream replay``: files into streams, the same selection as the client's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from featurestream._entry import main
from featurestream_client import Client
from tests import support
from tests.client.live import LiveServer

NAMES = support.names(30)


def write_csv(path: Path, names: list[str], rows: np.ndarray) -> Path:
    lines = [",".join(names)] + [",".join(repr(float(v)) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def wdbc_csv(tmp_path: Path) -> Path:
    X, y = support.wdbc()
    return write_csv(tmp_path / "wdbc.csv", [*NAMES, "diagnosis"], np.column_stack([X.T, y]))


def replay_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["replay", *argv, "--json"]) == 0
    out = capsys.readouterr()
    doc: dict[str, object] = json.loads(out.out)
    return doc


def selected_names(doc: dict[str, object]) -> list[str]:
    return [f["name"] for f in doc["selected"]]  # type: ignore[attr-defined]


# ---------------------------------------------------------------- feature streams


def test_replay_csv_columns_into_a_feature_stream(
    wdbc_csv: Path, url: str, sid: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(wdbc_csv), "--algorithm", "saola", "--target", "diagnosis", "--url", url]
    assert main(["replay", *argv, "--stream-id", sid, "--chunk", "7"]) == 0
    out = capsys.readouterr()
    assert out.err == ""  # no progress bar when stderr is not a terminal
    lines = out.out.splitlines()
    assert lines[0].startswith(f"stream {sid} (saola, 30 features), version 5: 2 selected")
    # The score column says what the score is; the rows go best first.
    assert lines[1].split() == ["#", "name", "score", "(abs_correlation,", "highest", "first)"]
    assert [line.split()[1] for line in lines[2:]] == ["f27", "f21"]
    with Client(url) as c:
        stream = c.stream(sid)
        assert [e.seq for e in stream.iter_events() if e.type == "batch"] == [1, 2, 3, 4, 5]
        assert stream.status()["features_seen"] == 30


def test_replay_npy_with_a_target_position(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y = support.wdbc()
    path = tmp_path / "wdbc.npy"
    np.save(path, np.column_stack([y, X.T]))  # the target first
    doc = replay_json(capsys, str(path), "--algorithm", "saola", "--target", "0", "--url", url)
    # .npy columns are named by their position in the file.
    assert selected_names(doc) == ["x22", "x28"] and doc["kind"] == "features"
    np.save(path, np.column_stack([X.T, y]))
    doc = replay_json(capsys, str(path), "--algorithm", "saola", "--target", "-1", "--url", url)
    assert selected_names(doc) == ["x21", "x27"]
    doc = replay_json(capsys, str(path), "--algorithm", "saola", "--target", "x30", "--url", url)
    assert selected_names(doc) == ["x21", "x27"]


def test_replay_of_ten_thousand_columns_equals_the_client(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(7)
    n, p = 50, 10_000
    signals = rng.normal(size=(n, 4))
    y = signals.sum(axis=1) + 0.3 * rng.normal(size=n)
    X = rng.normal(size=(n, p))
    X[:, [17, 2500, 6000, 9999]] = signals
    names = [f"c{i}" for i in range(p)]
    path = write_csv(tmp_path / "wide.csv", [*names, "y"], np.column_stack([X, y]))
    doc = replay_json(
        capsys, str(path), "--algorithm", "saola", "--target", "y", "--url", url, "--quiet"
    )
    with Client(url) as c:
        s = c.create_stream("saola", target=y)
        reference = s.add_features(X, names=names)
        assert selected_names(doc) == list(reference.selected) == s.selected().names
        replayed = c.stream(str(doc["stream"]))
        assert replayed.status()["features_seen"] == p
        assert {"c17", "c6000", "c9999"} <= set(reference.selected)
        assert doc["version"] == 10  # 1000 columns per request by default


# ---------------------------------------------------------------- instance streams


def test_replay_rows_into_an_instance_stream(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    case = support.expected()["instance_streams"]["ofs"]
    X, y = support.instances()
    path = write_csv(
        tmp_path / "inst.csv", [*support.names(100, "x"), "label"], np.column_stack([X, y])
    )
    params = json.dumps(case["params"])
    doc = replay_json(
        capsys, str(path), "--algorithm", "ofs", "--target", "label", "--params", params,
        "--chunk", "400", "--url", url,
    )  # fmt: skip
    assert doc["kind"] == "instances"
    assert selected_names(doc) == [f"x{i}" for i in case["selected"]]
    with Client(url) as c:
        s = c.create_stream("ofs", feature_names=support.names(100, "x"), params=case["params"])
        assert list(s.add_instances(X, y, batch_size=400).selected) == selected_names(doc)


def test_replay_unsupervised_rows_without_a_target(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    case = support.expected()["instance_streams"]["fsds"]
    X, _ = support.instances()
    path = tmp_path / "inst.npy"
    np.save(path, X)
    params = json.dumps(case["params"])
    doc = replay_json(
        capsys, str(path), "--algorithm", "fsds", "--params", params, "--chunk", "50", "--url", url
    )
    assert selected_names(doc) == [f"x{i}" for i in case["selected"]]


# ---------------------------------------------------------------- progress


def test_progress_bar_on_request(
    wdbc_csv: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["replay", str(wdbc_csv), "--algorithm", "saola", "--target", "diagnosis"]
    assert main([*argv, "--url", url, "--chunk", "10", "--progress"]) == 0
    err = capsys.readouterr().err
    frames = err.rstrip("\n").split("\r")[1:]
    assert [f.split()[1] for f in frames] == ["0%", "33%", "66%", "100%"]
    assert frames[-1].startswith("replay 100% [" + "#" * 30 + "] 30/30 columns")
    assert main([*argv, "--url", url, "--progress", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_the_installed_command_runs(wdbc_csv: Path, cli_server: LiveServer) -> None:
    cmd = [sys.executable, "-m", "featurestream", "replay", str(wdbc_csv), "--algorithm", "saola"]
    cmd += ["--target", "diagnosis", "--url", cli_server.url, "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert selected_names(json.loads(proc.stdout)) == ["f21", "f27"] and proc.stderr == ""


@pytest.mark.redis
def test_replay_into_a_redis_backed_server(
    wdbc_csv: Path, cli_redis_server: LiveServer, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(wdbc_csv), "--algorithm", "saola", "--target", "diagnosis"]
    doc = replay_json(capsys, *argv, "--url", cli_redis_server.url)
    assert selected_names(doc) == ["f21", "f27"]


def test_replay_groups_by_a_name_separator(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    case = support.expected()["feature_streams"]["group_saola"]
    X, y = support.wdbc()
    names = [f"g{i // 5}.f{i}" for i in range(30)]  # six groups of five, as in the vector
    path = write_csv(tmp_path / "groups.csv", [*names, "diagnosis"], np.column_stack([X.T, y]))
    argv = [str(path), "--algorithm", "group_saola", "--target", "diagnosis", "--url", url]
    params = ["--params", json.dumps(case["params"])]
    doc = replay_json(capsys, *argv, *params, "--group-sep", ".", "--chunk", "10")
    assert selected_names(doc) == [names[i] for i in case["selected"]]
    assert doc["version"] == 3  # two groups (ten columns) per request
    assert [f["group"] for f in doc["selected"]] == ["g4", "g5"]
    assert main(["replay", *argv]) == 1
    assert "give --group-sep SEP" in capsys.readouterr().err
