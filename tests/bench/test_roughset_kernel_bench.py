"""``featurestream bench roughset``: the plain transcriptions agree with the selectors.

Small data only; asserts what the results say, never how fast anything was.
"""

from __future__ import annotations

import numpy as np
import pytest

from featurestream.bench import main
from featurestream.bench.ossfs_kernel import leukemia_like, madelon_like
from featurestream.bench.roughset_kernel import PLAIN, agree, in_process, run, table


@pytest.mark.parametrize("algorithm", sorted(PLAIN))
@pytest.mark.parametrize("seed", [0, 1])
def test_the_transcription_selects_what_the_selector_selects(algorithm: str, seed: int) -> None:
    X, y = leukemia_like(seed)
    X = X[:300]
    ours = in_process(algorithm, X, y)
    assert ours and agree(ours, PLAIN[algorithm](X, y))


@pytest.mark.parametrize("algorithm", sorted(PLAIN))
def test_the_transcription_agrees_on_fewer_madelon_like_rows(algorithm: str) -> None:
    X, y = madelon_like(0)
    X, y = X[:40, :300], y[:300]
    assert agree(in_process(algorithm, X, y), PLAIN[algorithm](X, y))


def test_the_transcription_agrees_through_passes_and_replacements() -> None:
    # Columns that separate the classes reach dependency 1: OFS-A3M's pass, and
    # OFS-Density's; weak ones before them are replaced (K-OFSD) or removed.
    rng = np.random.default_rng(5)
    n = 40
    y = rng.permutation(np.arange(n) % 2).astype(float)
    X = rng.normal(size=(30, n))
    X[5::6] = 10.0 * y + 0.01 * rng.random((5, n))
    X[7] = 3.0  # a constant column
    for algorithm in sorted(PLAIN):
        assert agree(in_process(algorithm, X, y), PLAIN[algorithm](X, y)), algorithm


def test_disagreement_is_seen() -> None:
    assert not agree([("1", 0.5)], [(1, 0.5 * (1 + 1e-6))])
    assert not agree([("1", 0.5)], [(2, 0.5)])


def test_a_run_reports_both_implementations() -> None:
    timings, agreed, sizes = run(1, ["ofs_density"], ["leukemia-like 72x7000"], seed=0)
    assert [t.implementation for t in timings] == ["in process", "plain numpy"]
    assert agreed == {"leukemia-like 72x7000 ofs_density": True}
    assert "| leukemia-like 72x7000 ofs_density | in process |" in table(timings, agreed, sizes)


def test_the_command_refuses_a_bad_repeat_and_an_unknown_algorithm() -> None:
    with pytest.raises(SystemExit):
        main(["roughset", "--repeat", "0"])
    with pytest.raises(SystemExit):
        main(["roughset", "--algorithm", "saola"])
