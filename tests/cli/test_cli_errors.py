"""Malformed files and refused requests: one line on stderr, exit status 1, nothing created."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from featurestream._entry import main
from featurestream_client import Client
from tests.conftest import free_port

GOOD = "a,b,y\n1,2,3\n4,5,6\n7,8,9\n2,1,0\n"


def run_failing(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 1
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.splitlines()
    assert len(lines) == 1, out.err
    return lines[0]


@pytest.mark.parametrize(
    ("name", "content", "target", "expected"),
    [
        ("ragged.csv", "a,b,y\n1,2,3\n4,5\n", "y", "line 3 has 2 cells; the header has 3"),
        ("text.csv", "a,b,y\n1,2,3\n4,five,6\n", "y", "line 3, column 'b': 'five' is not a number"),
        (
            "empty-cell.csv",
            "a,b,y\n1,,3\n",
            "y",
            "line 2, column 'b' is empty (data row 1). Impute the missing values",
        ),
        ("nan.csv", "a,b,y\n1,nan,3\n", "y", "row 1, column 'b': nan is not a finite number"),
        ("empty.csv", "", "y", "the file is empty"),
        ("header.csv", "a,b,y\n", "y", "no data rows"),
        ("dup.csv", "a,a,y\n1,2,3\n", "y", "column 'a' appears twice"),
        ("good.csv", GOOD, "z", "unknown target column 'z'; the columns are a, b, y"),
        ("good.csv", GOOD, "7", "target column 7 is out of range"),
        ("data.txt", GOOD, "y", "unsupported file type"),
    ],
)
def test_malformed_files(
    tmp_path: Path,
    url: str,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: str,
    target: str,
    expected: str,
) -> None:
    path = tmp_path / name
    path.write_text(content)
    with Client(url) as c:
        before = len(c.streams())
        line = run_failing(
            ["replay", str(path), "--algorithm", "saola", "--target", target, "--url", url], capsys
        )
        assert len(c.streams()) == before
    assert line.startswith("featurestream replay: ") and expected in line


def test_malformed_npy_and_missing_files(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "flat.npy", np.arange(5.0))
    np.save(tmp_path / "words.npy", np.array([["a", "b"]]))
    (tmp_path / "junk.npy").write_bytes(b"not an array")
    argv = ["--algorithm", "saola", "--target", "0", "--url", url]
    assert "must be 2-D" in run_failing(["replay", str(tmp_path / "flat.npy"), *argv], capsys)
    assert "must hold numbers" in run_failing(
        ["replay", str(tmp_path / "words.npy"), *argv], capsys
    )
    assert "not a readable .npy" in run_failing(
        ["replay", str(tmp_path / "junk.npy"), *argv], capsys
    )
    assert "no such file" in run_failing(["replay", str(tmp_path / "none.csv"), *argv], capsys)


def test_parquet_without_pyarrow_says_what_to_install(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "data.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # import fails as if absent
    line = run_failing(["replay", str(path), "--algorithm", "saola", "--target", "y"], capsys)
    assert "needs pyarrow: pip install pyarrow" in line


def test_parquet_is_read_with_pyarrow(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rng = np.random.default_rng(0)
    y = rng.normal(size=40)
    table = pa.table({"noise": rng.normal(size=40), "signal": y + 0.1, "y": y})
    pq.write_table(table, tmp_path / "d.parquet")
    argv = ["replay", str(tmp_path / "d.parquet"), "--algorithm", "saola", "--target", "y"]
    assert main([*argv, "--url", url, "--json"]) == 0
    assert '"signal"' in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--params", "{alpha: 1}"], "--params is not valid JSON"),
        (["--params", "[1]"], "--params must be a JSON object"),
        (["--params", '{"alpha": 5}'], "(422 invalid-parameter)"),
        (["--algorithm", "nope"], "unknown algorithm 'nope'; the server hosts"),
        (["--chunk", "0"], "--chunk must be >= 1"),
    ],
)
def test_bad_options_and_refused_requests(
    tmp_path: Path,
    url: str,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    expected: str,
) -> None:
    path = tmp_path / "good.csv"
    path.write_text(GOOD)
    argv = ["replay", str(path), "--algorithm", "saola", "--target", "y", "--url", url, *extra]
    assert expected in run_failing(argv, capsys)


def test_feature_algorithms_need_a_target(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "good.csv"
    path.write_text(GOOD)
    line = run_failing(["replay", str(path), "--algorithm", "saola", "--url", url], capsys)
    assert "give --target COL" in line


def test_unreachable_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    line = run_failing(["streams", "--url", url, "--timeout", "1"], capsys)
    assert line.startswith(f"featurestream streams: cannot reach the server at {url}")


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["replay"])
    assert exc.value.code == 2
    assert "--algorithm" in capsys.readouterr().err


def test_text_the_csv_module_cannot_read_is_one_line(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not UTF-8, a cell beyond the csv module's limit, an unknown encoding: one line each,
    nothing created; the right --encoding reads the same file."""
    latin = tmp_path / "latin.csv"
    latin.write_bytes("a,b,caf\xe9\n1,2,3\n4,5,6\n2,1,0\n".encode("latin-1"))
    huge = tmp_path / "huge.csv"
    huge.write_text("a,y\n1," + "9" * 2_000_000 + "\n")
    argv = ["--algorithm", "saola", "--url", url]
    with Client(url) as c:
        before = len(c.streams())
        line = run_failing(["replay", str(latin), "--target", "b", *argv], capsys)
        assert "byte 0xe9 at offset 7 is not utf-8 text" in line and "--encoding" in line
        line = run_failing(["replay", str(huge), "--target", "y", *argv], capsys)
        assert "not a readable .csv file (field larger than field limit" in line
        line = run_failing(["replay", str(latin), "--encoding", "nope", *argv], capsys)
        assert line.endswith("--encoding 'nope' is not an encoding Python knows.")
        assert len(c.streams()) == before
        assert main(["replay", str(latin), "--target", "b", "--encoding", "latin-1", *argv]) == 0
        assert len(c.streams()) == before + 1
