"""``featurestream bench ofs-kernel``: the plain loop agrees with OFS, and the table prints."""

from __future__ import annotations

import numpy as np
import pytest

from featurestream.bench import main, ofs_kernel
from featurestream.selectors.ofs import OFS, OFSParams


@pytest.mark.parametrize("B", [30, 4])
def test_plain_loop_follows_ofs(B: int) -> None:
    X, y = ofs_kernel.make_stream(300, 30, seed=1)
    w, mistakes = ofs_kernel.plain_ofs(X, y, B)
    sel = OFS.start(OFSParams(num_features=B, scale="none"), [f"f{i}" for i in range(30)])
    u = sel.learn_instances(X, y)
    assert u.mistakes == mistakes
    # BLAS sums in another order than OFS: equal up to rounding.
    np.testing.assert_allclose(w, sel.state.w, rtol=1e-12, atol=1e-14)


def test_run_times_both_implementations() -> None:
    timings = ofs_kernel.run(n=200, dims=[30], budgets=(None, 5), repeat=2)
    assert [(t.implementation, t.num_features) for t in timings] == [
        ("ofs in process", 30),
        ("plain numpy loop", 30),
        ("ofs in process", 5),
        ("plain numpy loop", 5),
    ]
    assert all(len(t.times) == 2 for t in timings)
    assert timings[0].mistakes == timings[1].mistakes
    assert "x OFS" in ofs_kernel.table(timings, 200)


def test_run_times_ofs_at_every_budget_before_the_plain_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OFS at each budget runs under the same conditions: none right after the plain loop."""
    calls: list[tuple[str, int, int]] = []

    def record(implementation: str, X: np.ndarray, y: np.ndarray, B: int) -> int:
        calls.append((implementation, X.shape[0], B))
        return 0

    monkeypatch.setattr(ofs_kernel, "_one", record)
    ofs_kernel.run(n=40, dims=[12], budgets=(None, 3), repeat=2)
    timed = [(name, B) for name, rows, B in calls if rows == 40]
    per_pair = ofs_kernel.WARM_RUNS + 2
    assert timed == (
        [("ofs in process", 12)] * per_pair
        + [("ofs in process", 3)] * per_pair
        + [("plain numpy loop", 12)] * per_pair
        + [("plain numpy loop", 3)] * per_pair
    )


def test_run_keeps_a_budget_given_twice_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """num_features = d given as None and as d: two rows, each with its own runs."""
    calls = iter(range(1000))
    monkeypatch.setattr(ofs_kernel, "_one", lambda name, X, y, B: next(calls))
    timings = ofs_kernel.run(n=40, dims=[12], budgets=(None, 12), repeat=2)
    ofs_rows = [t for t in timings if t.implementation == "ofs in process"]
    assert [t.num_features for t in ofs_rows] == [12, 12]
    # Each row reports the last of its own runs (the fake returns the call's number: 0 is
    # the compile, then two untimed and two timed runs per budget).
    assert [t.mistakes for t in ofs_rows] == [4, 8]
    assert all(len(t.times) == 2 for t in timings)


def test_bench_ofs_kernel_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["ofs-kernel", "--instances", "50", "--dim", "20", "--budget", "3", "--repeat", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "plain numpy loop" in out and "ofs in process" in out
