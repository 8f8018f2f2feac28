"""``featurestream bench ossfs-dd``: the plain transcription agrees with the selector.

Small data only; asserts what the results say, never how fast anything was.
"""

from __future__ import annotations

import numpy as np
import pytest

from featurestream.bench import main
from featurestream.bench.ossfs_kernel import (
    agree,
    in_process,
    leukemia_like,
    madelon_like,
    plain_ossfs_dd,
)
from featurestream.selectors import OSSFSDD, OSSFSDDParams


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_transcription_selects_what_the_selector_selects(seed: int) -> None:
    X, y = leukemia_like(seed)
    X = X[:400]
    ours = in_process(X, y)
    assert ours and agree(ours, plain_ossfs_dd(X, y))


@pytest.mark.parametrize("seed", [3, 4])
def test_the_transcription_agrees_through_flushes_and_evictions(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 50
    y = rng.normal(size=n)
    X = rng.normal(size=(80, n)) + rng.uniform(0, 0.6, size=(80, 1)) * y
    X[10] = 3.0  # a constant column
    sel = OSSFSDD.start(OSSFSDDParams(k1=0.0, k2=1.0, pool_size=4), y)
    d = sel.learn_features([str(i) for i in range(80)], X)
    assert sel.state.flushes > 0 and any(x.evicted for x in d)
    ours = [(f.name, float(f.score or 0.0)) for f in sel.selected_features()]
    assert agree(ours, plain_ossfs_dd(X, y, k1=0.0, k2=1.0, pool=4))


def test_disagreement_is_seen() -> None:
    assert not agree([("1", 2.0)], [(1, 2.0 * (1 + 1e-6))])
    assert not agree([("1", 2.0)], [(2, 2.0)])


def test_the_madelon_like_set_has_the_papers_shape() -> None:
    X, y = madelon_like()
    assert X.shape == (500, 2600) and set(np.unique(y)) == {0.0, 1.0}


def test_the_command_refuses_a_bad_repeat() -> None:
    with pytest.raises(SystemExit):
        main(["ossfs-dd", "--repeat", "0"])
