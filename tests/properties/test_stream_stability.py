"""/stability of a stream against a direct computation from the formulas.

Random sequences of selections are committed to a store as a stream's log
(some commits change nothing, some bring new columns); the engine's answer is
compared with Jaccard and Nogueira's Phi written out from their definitions
(Nogueira, Sechidis, Brown, JMLR 2018, Eq. 4) over the selections after the
last K changes and the d features seen at the latest of them.
"""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from featurestream.engine import wire
from featurestream.engine.history import stability
from featurestream.engine.outcome import change_of
from featurestream.store.base import Commit
from featurestream.store.memory import InMemoryStore

UNIVERSE = [f"f{i}" for i in range(8)]


def direct_phi(selections: list[set[str]], d: int) -> float:
    """Phi from the definition; 1.0 when k_bar is 0 or d (all selections identical)."""
    M = len(selections)
    k_bar = sum(len(s) for s in selections) / M
    if k_bar in (0, d):
        return 1.0
    names = sorted(set().union(*selections))
    total = 0.0
    for f in names:  # features never selected have p_f = 0: a zero term each
        p = sum(f in s for s in selections) / M
        total += M / (M - 1) * p * (1 - p)
    return 1 - (total / d) / ((k_bar / d) * (1 - k_bar / d))


def direct_jaccard(a: set[str], b: set[str]) -> float:
    return 1.0 if not (a | b) else len(a & b) / len(a | b)


# One commit: the selection after it, and how many new columns it brought.
commits = st.lists(
    st.tuples(st.frozensets(st.sampled_from(UNIVERSE)), st.integers(0, 3)),
    min_size=1,
    max_size=25,
)


async def _build(kind: str, steps: list[tuple[frozenset[str], int]]) -> tuple[InMemoryStore, int]:
    store = InMemoryStore()
    # Columns seen: at least every feature any selection holds (they were seen).
    seen = len(UNIVERSE)
    info: dict[str, Any] = {"id": "s", "algorithm": "x", "kind": kind}
    info.update({"n_instances": 10} if kind == "features" else {"n_features": 20})
    empty = wire.selection(wire.parse_selection(b'{"version":0,"features":[]}'))
    await store.create("s", info, "inc", b"", "t0", empty, b"{}")
    before: list[str] = []
    last = ""
    for v, (chosen, columns) in enumerate(steps, start=1):
        after = sorted(chosen)
        seen += columns
        events = [{"type": "batch", "names": [], "count": columns}] if columns else []
        doc = {"version": v, "features": [{"name": n, "score": 1.0} for n in after]}
        cid = uuid.uuid4().hex
        await store.commit(
            "s",
            Commit(
                commit_id=cid,
                incarnation="inc",
                expected_version=v - 1,
                expected_commit=last,
                blob=b"",
                updated_at=f"t{v}",
                selection=orjson.dumps({**doc, "updated_at": f"t{v}"}),
                status=orjson.dumps({"features_seen": seen}),
                events=wire.log_entry(
                    None, "p", events, at=f"t{v}", change=change_of(before, after)
                ),
            ),
        )
        last = cid
        before = after
    return store, seen


@pytest.mark.parametrize("kind", ["features", "instances"])
@given(steps=commits, last=st.integers(2, 30))
def test_stability_equals_the_formulas(kind: str, steps: list[Any], last: int) -> None:
    async def run() -> Any:
        store, seen = await _build(kind, steps)
        return await stability(store, "s", last), seen

    got, seen = anyio.run(run)
    # Direct: the selection after each version that changed the set, the last `last`.
    sels: list[tuple[int, set[str]]] = []
    prev: set[str] = set()
    seen_at = len(UNIVERSE)
    seen_by_version = {}
    for v, (chosen, columns) in enumerate(steps, start=1):
        seen_at += columns
        seen_by_version[v] = seen_at
        if set(chosen) != prev:
            sels.append((v, set(chosen)))
        prev = set(chosen)
    sels = sels[-last:]
    assert list(got.versions) == [v for v, _ in sels]
    assert list(got.sizes) == [len(s) for _, s in sels]
    expected_j = [direct_jaccard(sels[i][1], sels[i + 1][1]) for i in range(len(sels) - 1)]
    assert got.jaccard == pytest.approx(expected_j, abs=1e-12)
    # d: the fixed feature space, or the columns seen at the latest selection compared.
    latest = seen_by_version[sels[-1][0]] if sels else seen
    d = 20 if kind == "instances" else latest
    assert got.features == d
    if len(sels) < 2:
        assert got.nogueira is None
    else:
        assert got.nogueira == pytest.approx(direct_phi([s for _, s in sels], d), abs=1e-9)
        assert np.isfinite(got.nogueira)
        assert got.nogueira >= -1 / (len(sels) - 1) - 1e-9


def test_identical_and_disjoint_selections_hit_the_bounds() -> None:
    # f0 -> f1 -> f0 -> f1: alternating disjoint selections of one feature out of 8.
    steps = [(frozenset({"f0"}), 0), (frozenset({"f1"}), 0)] * 2
    got = anyio.run(lambda: _stab("instances", steps, 20))
    assert got.jaccard == [0.0, 0.0, 0.0]
    assert got.nogueira == pytest.approx(direct_phi([{"f0"}, {"f1"}] * 2, 20))
    # All features of the universe selected, then none: k_bar = d/2 ... and nothing NaN.
    everything = frozenset(UNIVERSE)
    got = anyio.run(lambda: _stab("features", [(everything, 0), (frozenset(), 0)], 20))
    assert got.features == len(UNIVERSE)
    assert got.nogueira == pytest.approx(direct_phi([set(everything), set()], len(UNIVERSE)))


async def _stab(kind: str, steps: list[Any], last: int) -> Any:
    store, _ = await _build(kind, steps)
    return await stability(store, "s", last)
