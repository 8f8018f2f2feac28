"""StreamEngine: the state cache, and conflicts between two engines (two processes)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import numpy as np
import pytest

from featurestream.config import Settings
from featurestream.engine import StreamEngine, wire
from featurestream.errors import NumericallyUnstable, StreamNotFound
from featurestream.store.memory import InMemoryStore

pytestmark = pytest.mark.anyio


class CountingStore(InMemoryStore):
    """The memory store, counting calls (a spy, not a double: behaviour is unchanged)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    async def load(self, stream_id: str) -> Any:
        self.calls["load"] += 1
        return await super().load(stream_id)

    async def commit(self, stream_id: str, commit: Any) -> int:
        self.calls["commit"] += 1
        return await super().commit(stream_id, commit)


SETTINGS = Settings(store_url="memory://")


async def _create(engine: StreamEngine, y: np.ndarray) -> None:
    await engine.create(
        stream_id="s",
        algorithm="saola",
        params={"alpha": 0.05},
        target=y.tolist(),
        feature_names=None,
    )


async def test_a_process_holding_the_latest_version_does_not_reload_state() -> None:
    store = CountingStore()
    engine = StreamEngine(store, SETTINGS)
    rng = np.random.default_rng(0)
    y = rng.normal(size=30)
    await _create(engine, y)
    for i in range(5):
        await engine.add_features("s", [f"c{i}"], rng.normal(size=(1, 30)))
    assert store.calls["load"] == 0 and store.calls["commit"] == 5


async def test_a_stale_process_reloads_once_and_applies_on_the_winners_state() -> None:
    store = CountingStore()
    a, b = StreamEngine(store, SETTINGS), StreamEngine(store, SETTINGS)
    rng = np.random.default_rng(1)
    y = rng.normal(size=30)
    X = rng.normal(size=(4, 30)) + y
    await _create(a, y)
    await a.add_features("s", ["c0"], X[:1])
    await b.add_features("s", ["c1"], X[1:2])  # b has never seen s: one load
    assert store.calls["load"] == 1
    await a.add_features("s", ["c2"], X[2:3])  # a is stale: its commit fails, it reloads
    assert store.calls["load"] == 2
    assert store.calls["commit"] == 4  # 3 successful + 1 conflict
    status = wire.status(await a.status("s"))
    assert status["features_seen"] == 3 and status["version"] == 3


async def test_concurrent_writers_in_one_process_are_serialised() -> None:
    store = CountingStore()
    engine = StreamEngine(store, SETTINGS)
    rng = np.random.default_rng(2)
    y = rng.normal(size=30)
    await _create(engine, y)
    X = rng.normal(size=(20, 30))
    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(engine.add_features, "s", [f"c{i}"], X[i : i + 1])
    assert wire.status(await engine.status("s"))["features_seen"] == 20
    assert store.calls["commit"] == 20  # no conflicts inside one process


async def test_the_lock_table_keeps_no_lock_nobody_needs() -> None:
    engine = StreamEngine(CountingStore(), SETTINGS)
    rng = np.random.default_rng(3)
    for i in range(50):
        with pytest.raises(StreamNotFound):
            await engine.add_features(f"missing-{i}", [f"c{i}"], rng.normal(size=(1, 30)))
    assert engine.cache.locks() == 0
    await _create(engine, rng.normal(size=30))
    await engine.add_features("s", ["c"], rng.normal(size=(1, 30)))
    assert await engine.delete("s")
    assert engine.cache.locks() == 0 and len(engine.cache) == 0


async def test_the_cache_is_bounded_by_the_count_of_streams() -> None:
    store = CountingStore()
    engine = StreamEngine(store, Settings(store_url="memory://", cache_streams=2))
    rng = np.random.default_rng(4)
    y = rng.normal(size=30)
    for sid in ("a", "b", "c"):
        await engine.create(
            stream_id=sid, algorithm="saola", params=None, target=y.tolist(), feature_names=None
        )
    assert len(engine.cache) == 2 and "a" not in engine.cache
    await engine.add_features("a", ["x"], rng.normal(size=(1, 30)))  # the oldest was evicted
    assert store.calls["load"] == 1 and "b" not in engine.cache


async def test_the_cache_is_bounded_by_the_bytes_of_state() -> None:
    store = CountingStore()
    engine = StreamEngine(store, Settings(store_url="memory://", cache_bytes=1))
    rng = np.random.default_rng(5)
    await _create(engine, rng.normal(size=30))
    assert len(engine.cache) == 0 and engine.cache.bytes == 0
    for i in range(3):
        await engine.add_features("s", [f"c{i}"], rng.normal(size=(1, 30)))
    # No state fits: every write reads the stream from the store.
    assert store.calls["load"] == 3 and engine.cache.locks() == 0


async def test_a_refused_non_finite_state_leaves_the_cached_selector_as_it_was() -> None:
    """A write that would make the state not finite is refused (numerically-unstable);
    the cached selector goes back to its previous state, so the stream goes on exactly
    as if the write had never come, with no reload."""
    store = CountingStore()
    engine = StreamEngine(store, SETTINGS)
    # Unscaled: the default max-abs scaling maps the huge values below to +-1.
    params = {"num_features": 2, "mode": "partial", "seed": 7, "scale": "none"}
    names = ["a", "b", "c"]
    for sid in ("s", "twin"):
        await engine.create(
            stream_id=sid, algorithm="ofs", params=params, target=None, feature_names=names
        )
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(6, 3)), np.array([1.0, 0.0] * 3)
    for sid in ("s", "twin"):
        await engine.add_instances(sid, X, y)
    huge = np.full((8, 3), 1.7e308) * np.array([1.0, -1.0, 1.0])
    with pytest.raises(NumericallyUnstable) as info:
        await engine.add_instances("s", huge, np.array([1.0, 0.0] * 4))
    assert info.value.stream_id == "s"
    assert (await engine.get("s")).version == 1
    for sid in ("s", "twin"):
        await engine.add_instances(sid, X[::-1], y)
    assert store.calls["load"] == 0
    same = [engine.cache.peek(sid) for sid in ("s", "twin")]
    assert all(live is not None for live in same)
    a, b = (live.selector.snapshot() for live in same if live is not None)
    np.testing.assert_array_equal(a.w, b.w)
    assert a.instances_seen == b.instances_seen == 12


def _as_stored_before_scale(blob: bytes) -> bytes:
    """An OFS state as versions before ``scale`` stored it: no parameter, no statistics."""
    import json

    from featurestream import codec

    header, body = codec.decode_header(blob)
    del header["params"]["scale"]
    del header["fields"]["scale_mean"], header["fields"]["scale_M2"]
    raw = json.dumps(header, separators=(",", ":")).encode()
    return codec._PREFIX.pack(codec.MAGIC, codec.FORMAT_VERSION, len(raw)) + raw + blob[body:]


async def test_an_ofs_stream_stored_before_scale_keeps_the_values_as_sent() -> None:
    # Decided for streams older than `scale`: they learnt from raw values, and
    # keep doing so after an upgrade (Params.legacy), whatever today's default.
    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 3)) * [1.0, 100.0, 0.01]
    y = (X[:, 1] > 0).astype(float)
    store = InMemoryStore()
    engine = StreamEngine(store, SETTINGS)
    names = ["a", "b", "c"]
    for sid in ("old", "raw"):
        await engine.create(
            stream_id=sid,
            algorithm="ofs",
            params={"num_features": 2, "scale": "none"},
            target=None,
            feature_names=names,
        )
        await engine.add_instances(sid, X[:30], y[:30])
    # "old" as an older version left it in the store: no `scale` anywhere.
    stored = store._streams["old"]
    stored.blob = _as_stored_before_scale(stored.blob)
    del stored.info["params"]["scale"]
    fresh = StreamEngine(store, SETTINGS)  # a restarted process: nothing cached
    assert (await fresh.get("old")).params["scale"] == "none"
    for sid in ("old", "raw"):
        await fresh.add_instances(sid, X[30:], y[30:])
    old, raw = await fresh.selection("old"), await fresh.selection("raw")
    old_sel, raw_sel = wire.parse_selection(old.document), wire.parse_selection(raw.document)
    assert old_sel.features == raw_sel.features and old_sel.version == raw_sel.version == 2
    assert (await fresh.status("old")).counters == (await fresh.status("raw")).counters
