"""Issue 16, the CLI's habits: CSV files as people have them, create/delete, short
event rows, a streams table that says what its size means, ``events --follow``.

The server is a ``featurestream serve`` child process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from featurestream._entry import main
from featurestream_client import Client
from tests import support
from tests.support import ServeProcess


@pytest.fixture(scope="module")
def server() -> Iterator[ServeProcess]:
    proc = ServeProcess("memory://").start()
    yield proc
    proc.kill()


@pytest.fixture
def url(server: ServeProcess) -> str:
    return server.url


def new_id() -> str:
    return f"c-{uuid.uuid4().hex[:12]}"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def wdbc_file(path: Path, sep: str = ",", labels: tuple[str, str] = ("0", "1")) -> Path:
    """The breast-cancer rows with an id column first and the diagnosis as text labels."""
    X, y = support.wdbc()
    names = ["patient_id", *support.names(X.shape[0]), "diagnosis"]
    lines = [sep.join(names)]
    for i, row in enumerate(X.T):
        label = labels[int(y[i])]
        lines.append(sep.join([f"P{i:05d}", *(repr(float(v)) for v in row), label]))
    path.write_text("\n".join(lines) + "\n")
    return path


def selected(doc: dict[str, object]) -> list[str]:
    return [f["name"] for f in doc["selected"]]  # type: ignore[attr-defined]


def test_replay_reads_the_csv_files_people_have(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    numeric = wdbc_file(tmp_path / "numeric.csv")
    # The same data with ';' cells and class names instead of 0/1 (sorted: B < M as 0 < 1).
    named = wdbc_file(tmp_path / "named.csv", sep=";", labels=("B", "M"))
    common = ["--algorithm", "saola", "--target", "diagnosis", "--drop", "patient_id"]
    code, out, err = run(capsys, "replay", str(numeric), *common, "--url", url, "--json")
    assert code == 0, err
    first = json.loads(out)
    code, out, err = run(
        capsys, "replay", str(named), *common, "--delimiter", ";", "--url", url, "--json"
    )
    assert code == 0, err
    assert selected(json.loads(out)) == selected(first) == ["f21", "f27"]
    # Instance streams: string labels travel as given; the server codes the classes in
    # sorted order, so the answer equals the 0/1 one.
    inst = ["--algorithm", "ofs", "--target", "diagnosis", "--drop", "patient_id", "--chunk", "50"]
    inst += ["--params", '{"num_features": 5}', "--url", url, "--json"]
    code, out, err = run(capsys, "replay", str(numeric), *inst)
    assert code == 0, err
    by_number = selected(json.loads(out))
    code, out, err = run(capsys, "replay", str(named), "--delimiter", ";", *inst)
    assert code == 0, err
    assert "coded" not in err
    named_doc = json.loads(out)
    assert selected(named_doc) == by_number
    with Client(url) as c:
        info = c.get_stream(named_doc["stream"]).refresh()
    # Labels that are not numbers resolve to "multiclass"; with two classes every
    # algorithm uses its binary rule (OFS accepts the stream).
    assert info.target_type == "multiclass" and list(info.classes) == ["B", "M"]


def test_replay_into_ofs_says_what_it_needs_and_reports_its_mistakes(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = str(wdbc_file(tmp_path / "bc.csv", labels=("B", "M")))
    with Client(url) as c:
        before = {s.id for s in c.streams()}
    drop = ["--drop", "patient_id"]
    code, _, err = run(capsys, "replay", data, "--algorithm", "ofs", *drop, "--url", url)
    assert code == 1
    assert "if it holds the labels, give --target diagnosis" in err
    numeric = str(wdbc_file(tmp_path / "bc01.csv"))
    code, _, err = run(capsys, "replay", numeric, "--algorithm", "ofs", *drop, "--url", url)
    assert code == 1
    assert "ofs learns from labelled rows: give --target COL" in err
    code, _, err = run(
        capsys, "replay", data, "--algorithm", "ofs", *drop, "--target", "diagnosis", "--url", url
    )
    assert code == 1
    assert "ofs needs num_features (the budget B of selected features)" in err
    assert "--params '{\"num_features\": 10}'" in err
    with Client(url) as c:
        assert {s.id for s in c.streams()} == before  # nothing was created
    args = ["--target", "diagnosis", "--drop", "patient_id", "--url", url]
    args += ["--params", '{"num_features": 10}']
    code, out, err = run(capsys, "replay", data, "--algorithm", "ofs", *args)
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("prequential mistakes"))
    mistakes = int(line.split(": ")[1].split(" of ")[0])
    assert line.endswith(f"{mistakes} of 569 rows ({100 * mistakes / 569:.1f}%)")
    assert mistakes / 569 <= 0.15


def test_replay_an_empty_cell_names_its_row_and_column(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "holes.csv"
    path.write_text("id,age,income,y\n1,30,100,0\n2,41,,1\n")
    sid = new_id()
    code, _, err = run(
        capsys,
        "replay",
        str(path),
        "--algorithm",
        "saola",
        "--target",
        "y",
        "--url",
        url,
        "--stream-id",
        sid,
    )
    assert code == 1
    assert "line 3, column 'income' is empty (data row 2)" in err
    assert "Impute the missing values" in err and "--drop income" in err
    with Client(url) as c:
        assert sid not in {s.id for s in c.streams()}


def test_create_append_and_delete(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y = support.wdbc()
    rows = np.column_stack([X.T, y])
    names = [*support.names(X.shape[0]), "diagnosis"]
    half = rows.shape[0] // 2
    for part, chunk in (("a", rows[:half]), ("b", rows[half:])):
        (tmp_path / f"{part}.csv").write_text(
            "\n".join([",".join(names), *(",".join(repr(float(v)) for v in r) for r in chunk)])
        )
    # The second file's columns in another order: matched by name.
    b = (tmp_path / "b.csv").read_text().splitlines()
    order = [names.index(n) for n in reversed(names)]
    (tmp_path / "b.csv").write_text(
        "\n".join(",".join(line.split(",")[i] for i in order) for line in b)
    )
    sid = new_id()
    code, out, err = run(
        capsys,
        "create",
        "ofs",
        "--stream-id",
        sid,
        "--data",
        str(tmp_path / "a.csv"),
        "--target",
        "diagnosis",
        "--params",
        '{"num_features": 5}',
        "--url",
        url,
    )
    assert code == 0, err
    assert out.strip() == f"created {sid} (ofs, 30 features)"
    for part in ("a", "b"):
        code, out, err = run(
            capsys,
            "replay",
            str(tmp_path / f"{part}.csv"),
            "--append",
            "--stream-id",
            sid,
            "--target",
            "diagnosis",
            "--url",
            url,
            "--json",
        )
        assert code == 0, err
    appended = selected(json.loads(out))
    code, out, err = run(
        capsys,
        "replay",
        str(tmp_path / "a.csv"),
        "--algorithm",
        "ofs",
        "--target",
        "diagnosis",
        "--params",
        '{"num_features": 5}',
        "--url",
        url,
        "--json",
        "--chunk",
        "1000",
    )
    with Client(url) as c:
        whole = c.create_stream("ofs", feature_names=names[:-1], params={"num_features": 5})
        whole.add_instances(rows[:, :-1], rows[:, -1])
        assert appended == whole.selected().names
        assert c.get_stream(sid).refresh().n_features == 30
    code, out, err = run(capsys, "delete", sid, "--url", url)
    assert (code, out.strip()) == (0, f"deleted {sid}")
    code, out, err = run(capsys, "delete", sid, "--url", url)
    assert code == 1 and "does not exist" in err


def test_create_passes_target_type(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = wdbc_file(tmp_path / "w.csv")
    sid = new_id()
    code, _, err = run(
        capsys,
        "create",
        "saola",
        "--stream-id",
        sid,
        "--data",
        str(path),
        "--drop",
        "patient_id",
        "--target",
        "diagnosis",
        "--target-type",
        "binary",
        "--url",
        url,
    )
    with Client(url) as c:
        streams = {s.id: s for s in c.streams()}
    if code == 0:  # a server that knows target_type
        assert streams[sid].raw.get("target_type") == "binary"
    else:  # a server without it refuses the field: nothing is created
        assert "target_type" in err and sid not in streams


def test_events_rows_are_short_and_streams_say_what_size_means(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y = support.wdbc()
    with Client(url) as c:
        stream = c.create_stream("saola", target=y)
        long = [f"a_feature_with_a_rather_long_name_{i:03d}" for i in range(30)]
        stream.add_features(X.T, long)
    code, out, err = run(capsys, "events", stream.id, "--url", url)
    assert code == 0, err
    rows = out.splitlines()
    assert max(len(r) for r in rows) < 200, max(rows, key=len)
    assert "30 features" in rows[1]
    code, out, _ = run(capsys, "streams", "--url", url)
    line = next(r for r in out.splitlines() if r.startswith(stream.id))
    assert "569 rows" in line
    assert "size: a feature stream's instances" in out


def test_events_follow_prints_new_events_once_and_ctrl_c_exits_cleanly(url: str) -> None:
    X, y = support.wdbc()
    with Client(url) as c:
        stream = c.create_stream("saola", target=y)
        stream.add_features(X[:2].T, ["u0", "u1"])
    cmd = [sys.executable, "-m", "featurestream", "events", stream.id, "--follow"]
    cmd += ["--interval", "0.2", "--url", url]
    with subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
        preexec_fn=support.default_sigint,
    ) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            lines = [proc.stdout.readline() for _ in range(4)]  # the header, 3 events
            with Client(url) as c:
                c.stream(stream.id).add_features(X[2:3].T, ["late"])
            lines += [proc.stdout.readline() for _ in range(3)]
            time.sleep(1.0)  # a few more polls: nothing is printed twice
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
        rest = proc.stdout.read()
        err = proc.stderr.read()
    assert code == 130, err  # the status of an interrupt, and no traceback
    assert "Traceback" not in err
    ids = [line.split()[0] for line in lines[1:] + rest.splitlines()]
    # The first batch, then the late one: every event once, in order.
    assert ids == ["1-0", "1-1", "1-2", "2-0", "2-1", "2-2"], lines
    assert "2 features" in lines[1]


def test_replay_into_fires_reports_its_prequential_accuracy(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """FIRES keeps no mistake counter: the line comes from its prequential evaluation.

    FIRES predicts a batch with the model before it: batches of 20 rows."""
    data = str(wdbc_file(tmp_path / "bc.csv", labels=("B", "M")))
    args = ["--target", "diagnosis", "--drop", "patient_id", "--url", url, "--chunk", "20"]
    args += ["--params", '{"num_features": 10}']
    code, out, err = run(capsys, "replay", data, "--algorithm", "fires", *args)
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("prequential accuracy"))
    stream_id = out.split()[1]
    with Client(url) as c:
        live = c.stream(stream_id).evaluation()
    assert live.kind == "prequential" and live.score is not None
    assert line == (
        "prequential accuracy (each row predicted before it is learnt): "
        f"{live.score:.4f} over {live.raw['instances']} rows"
    )
    assert live.raw["instances"] == 569 and live.score >= 0.8
    code, out, err = run(capsys, "replay", data, "--algorithm", "fires", "--json", *args)
    assert code == 0, err
    assert json.loads(out)["prequential_accuracy"] == pytest.approx(live.score)
