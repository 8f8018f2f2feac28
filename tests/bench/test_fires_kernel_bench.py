"""``featurestream bench fires-kernel``: the transcription agrees with FIRES, and the table prints.

Small sizes only; asserts what the runs compute, never how fast anything was.
"""

from __future__ import annotations

import numpy as np
import pytest

from featurestream.bench import fires_kernel, main
from featurestream.bench.ofs_kernel import make_stream
from featurestream.selectors.fires import FIRES, FIRESParams


@pytest.mark.parametrize("batch", [100, 37])
def test_plain_transcription_follows_fires(batch: int) -> None:
    X, y = make_stream(500, 40, seed=3)
    ref = fires_kernel.plain_fires(X, y, 8, batch)
    sel = FIRES.start(FIRESParams(num_features=8, scale="none"), [f"f{i}" for i in range(40)])
    for lo in range(0, 500, batch):
        sel.learn_instances(X[lo : lo + batch], (y[lo : lo + batch] + 1) / 2)  # labels 0/1
    np.testing.assert_allclose(sel.state.mu[0], ref.mu, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(sel.state.sigma[0], ref.sigma, rtol=1e-12)
    assert sel.selected() == tuple(f"f{j}" for j in ref.top)
    # The planted features (the label is the sign of the first ten) lead.
    assert set(ref.top[:8].tolist()) <= set(range(10))


def test_agreement_notices_a_different_update() -> None:
    X, y = make_stream(300, 30, seed=4)
    assert fires_kernel.agreement(X, y, 5, 100).holds
    # Another batching is another stream: the check must be able to fail.
    ref = fires_kernel.plain_fires(X, y, 5, 100)
    other = fires_kernel.plain_fires(X, y, 5, 30)
    assert fires_kernel._max_rel(ref.mu, other.mu) > fires_kernel.RTOL


def test_run_times_all_three_and_checks_each_dimension() -> None:
    timings, checks = fires_kernel.run(n=300, dims=[30, 50], num_features=5, repeat=2)
    assert [(t.implementation, t.d) for t in timings] == [
        (name, d) for d in (30, 50) for name in fires_kernel.IMPLEMENTATIONS
    ]
    assert all(len(t.times) == 2 and min(t.times) > 0 for t in timings)
    assert [c.d for c in checks] == [30, 50] and all(c.holds for c in checks)
    text = fires_kernel.table(timings, checks, 300, 100)
    assert "x FIRES" in text and "agree" in text and "DISAGREE" not in text


def test_bench_fires_kernel_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fires-kernel", "--instances", "200", "--dim", "20", "--top", "3", "--repeat", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "fires in process" in out and "plain numpy" in out and "load average" in out


def test_bench_fires_kernel_refuses_bad_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["fires-kernel", "--batch", "0"])
    assert info.value.code == 2
    assert "at least 1" in capsys.readouterr().err
