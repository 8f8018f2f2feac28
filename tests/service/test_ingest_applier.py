"""Messages of a log applied through the engine: the outcome of each rule, in process."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from featurestream.config import Settings
from featurestream.engine import StreamEngine
from featurestream.ingest.applier import Applied, Applier, Dead
from featurestream.ingest.messages import Message
from featurestream.store.memory import InMemoryStore

pytestmark = pytest.mark.anyio

D = 6
OFS = {
    "algorithm": "ofs",
    "params": {"num_features": 2},
    "feature_names": [f"x{i}" for i in range(D)],
}


def npy(A: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, A)
    return buf.getvalue()


def batch(seed: int, rows: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, D))
    return X, np.where(X[:, 0] > 0, 1.0, -1.0)


def msg(
    position: int,
    body: bytes,
    *,
    stream: str | None = "s",
    kind: str | None = "instances",
    content_type: str | None = None,
    create: dict[str, Any] | None = None,
    partition: str = "redis:log",
) -> Message:
    made = None if create is None else json.dumps(create).encode()
    return Message(partition, position, str(position), stream, kind, content_type, body, made)


def json_body(X: np.ndarray, y: np.ndarray) -> bytes:
    return json.dumps({"X": X.tolist(), "y": y.tolist()}).encode()


@pytest.fixture
async def engine() -> AsyncIterator[StreamEngine]:
    store = InMemoryStore()
    await store.open()
    yield StreamEngine(store, Settings(store_url="memory://"))
    await store.close()


async def state(engine: StreamEngine, sid: str) -> bytes:
    return (await engine.store.load(sid)).blob


async def test_create_apply_replay_with_skipping_positions(engine: StreamEngine) -> None:
    applier = Applier(engine)
    (X1, y1), (X2, y2), (X3, y3) = batch(1), batch(2), batch(3)
    labelled = np.column_stack([X2, y2])
    first = [
        msg(10, json_body(X1, y1), create=OFS),
        msg(17, npy(labelled), content_type="application/x-npy"),
        msg(40, json_body(X3, y3)),
    ]
    assert await applier.apply(first) == [Applied(), Applied(), Applied()]
    # Delivered again (a consumer died before acknowledging): replays, nothing applied twice.
    assert await applier.apply(first) == [Applied(replayed=True)] * 3
    events = (await engine.events("s")).events
    batches = [e for e in events if e.body["type"] == "batch"]
    # One commit: each frame's batch names its seq (the message's position).
    assert [e.body["seq"] for e in batches] == [10, 17, 40]
    assert {e.producer for e in batches} == {"redis:log"}
    # The same three batches written as HTTP writes them give the same bytes.
    await engine.create(
        stream_id="ref",
        public_id="s",
        algorithm="ofs",
        params=OFS["params"],
        target=None,
        feature_names=OFS["feature_names"],
    )
    for X, y in ((X1, y1), (X2, y2), (X3, y3)):
        await engine.add_instances("ref", X, y)
    assert await state(engine, "s") == await state(engine, "ref")


async def test_hostile_messages_are_dead_with_their_problems_and_change_nothing(
    engine: StreamEngine,
) -> None:
    applier = Applier(engine)
    X, y = batch(1)
    assert await applier.apply([msg(1, json_body(X, y), create=OFS)]) == [Applied()]
    before = await state(engine, "s")
    good = np.column_stack([X, y])
    hostile = [
        msg(2, npy(good)[:-7], content_type="application/x-npy"),  # truncated
        msg(3, json_body(X[:, :3], y)),  # wrong shape
        msg(4, json_body(X, y), stream="nowhere"),  # unknown stream, no create
        msg(5, json_body(X, y), kind="rows"),  # unknown kind
        msg(6, json_body(X, y), stream=None),  # no stream
        msg(7, json_body(X, y), content_type="text/csv"),
        msg(8, b"\xff\xfe"),  # not UTF-8
        msg(9, json.dumps({"X": X.tolist(), "y": y.tolist(), "seq": 3}).encode()),
        msg(10, json_body(X, y), stream="t", create={"algorithm": "nope"}),
        msg(11, json_body(X, y), stream="t", create={**OFS, "id": "other"}),
        msg(12, npy(good), content_type="application/x-npz"),  # not a zip
        msg(13, json_body(X, y), kind="features"),  # columns for an instance stream
    ]
    outcomes = await applier.apply(hostile)
    assert all(isinstance(o, Dead) for o in outcomes), outcomes
    statuses = [o.problem.status for o in outcomes if isinstance(o, Dead)]
    assert statuses == [422, 422, 404, 422, 422, 415, 422, 409, 422, 422, 422, 409], statuses
    assert await state(engine, "s") == before
    with pytest.raises(Exception, match="t"):
        await engine.get("t")
    # Delivered again: dead again with the same problems (a refused frame's is stored).
    again = await applier.apply(hostile)
    assert [o.problem.status for o in again if isinstance(o, Dead)] == statuses


async def test_feature_and_group_messages(engine: StreamEngine) -> None:
    applier = Applier(engine)
    rng = np.random.default_rng(0)
    target = rng.normal(size=30).tolist()
    create = {"algorithm": "saola", "params": {}, "target": target}
    cols = rng.normal(size=(3, 30))
    features = json.dumps(
        {"features": [{"name": f"f{i}", "values": cols[i].tolist()} for i in range(2)]}
    ).encode()
    columns = npy(cols[2:3].T)
    outcomes = await applier.apply(
        [
            msg(5, features, stream="f", kind="features", create=create),
            msg(9, columns, stream="f", kind="features", content_type="application/x-npy"),
            msg(9, columns, stream="f", kind="features", content_type="application/x-npy"),
            msg(12, b"[]", stream="f", kind="groups", content_type="application/x-npy"),
        ]
    )
    assert outcomes[:3] == [Applied(), Applied(), Applied(replayed=True)]
    assert isinstance(outcomes[3], Dead) and outcomes[3].problem.status == 415
    names = [
        e.body.get("names") for e in (await engine.events("f")).events if e.body["type"] == "batch"
    ]
    assert names == [["f0", "f1"], ["redis:log:9:0"]]


async def test_interleaved_streams_keep_each_streams_order(engine: StreamEngine) -> None:
    applier = Applier(engine, tenant="acme")
    messages = []
    for k in range(12):
        X, y = batch(k)
        sid = "ab"[k % 2] if k % 3 else "a"
        messages.append(msg(100 + 3 * k, json_body(X, y), stream=sid, create=OFS))
    assert await applier.apply(messages) == [Applied()] * 12
    for sid in "ab":
        events = (await engine.events(f"acme~{sid}")).events
        seqs = [e.body["seq"] for e in events if e.body["type"] == "batch"]
        assert seqs == [m.position for m in messages if m.stream == sid]
        assert (await engine.get(f"acme~{sid}")).id == sid
