"""The store's limits against real server processes: a re-created stream, a full Redis,
and the bounds on what is kept (event log, stored responses, cache, lock table).

* A process that cached a stream must notice that another process deleted and
  created it again (a new incarnation): its answers come from the new stream.
* Redis at ``maxmemory`` (noeviction) refuses writes: ``503 store-full``,
  counted, ``/readyz`` not ready until Redis has room again, nothing applied.
* The event log keeps ``event_retention`` entries, the stored responses
  ``replay_bytes`` per stream, the cache ``cache_bytes`` of decoded state, and
  the lock table nothing for ids that are not streams.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest
import redis
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from featurestream.engine.idempotency import PREFIX_SIZE
from featurestream.engine.packing import pack
from featurestream.store.keys import stream_keys
from tests.conftest import RedisServer
from tests.faults.harness import Processes, instances_http, metric, npy

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def _features(names: list[str], X: np.ndarray, seq: int, producer: str = "p") -> dict[str, Any]:
    """An npy POST of feature columns (``X`` is (n, b))."""
    return {
        "content": npy(X),
        "headers": {
            "Content-Type": "application/x-npy",
            "X-Feature-Names": ",".join(names),
            "X-Seq": str(seq),
            "X-Producer": producer,
        },
    }


def _saola(c: httpx.Client, url: str, stream_id: str, y: Any) -> None:
    """Create a SAOLA feature stream of target ``y``."""
    body = {"id": stream_id, "algorithm": "saola", "target": np.asarray(y, dtype=float).tolist()}
    r = c.post(url + "/v1/streams", json=body)
    assert r.status_code == 201, r.text


def _ofs(c: httpx.Client, url: str, stream_id: str, names: list[str]) -> None:
    """Create an OFS instance stream over ``names``."""
    body = {
        "id": stream_id,
        "algorithm": "ofs",
        "params": {"num_features": 2},
        "feature_names": names,
    }
    r = c.post(url + "/v1/streams", json=body)
    assert r.status_code == 201, r.text


def _json_features(names: list[str], X: np.ndarray, seq: int) -> dict[str, Any]:
    features = [{"name": n, "values": x.tolist()} for n, x in zip(names, X, strict=True)]
    return {"json": {"producer": "p", "seq": seq, "features": features}}


# --------------------------------------------------------------------------- re-created streams


def test_a_stream_deleted_and_created_again_elsewhere_is_noticed_by_a_process_that_cached_it(
    processes: Processes, redis_url: str, key_prefix: str
) -> None:
    a, b = processes.start(2, redis_url, key_prefix)
    rng = np.random.default_rng(8)
    with httpx.Client(timeout=20) as c:
        # Process A caches a feature stream of 5 instances, and an instance stream.
        y5 = rng.normal(size=5).tolist()
        _saola(c, a.url, "f", y5)
        r = c.post(
            a.url + "/v1/streams/f/features", **_json_features(["a"], rng.normal(size=(1, 5)), 1)
        )
        assert r.status_code == 200, r.text
        _ofs(c, a.url, "i", ["u", "v", "w"])
        for seq in (1, 2, 3):
            A = np.column_stack([rng.normal(size=(4, 3)), rng.integers(0, 2, 4)])
            assert (
                c.post(a.url + "/v1/streams/i/instances", **instances_http(A, "p", seq)).status_code
                == 200
            )
        _ofs(c, a.url, "k", ["u", "v"])
        A = np.column_stack([rng.normal(size=(4, 2)), rng.integers(0, 2, 4)])
        assert (
            c.post(a.url + "/v1/streams/k/instances", **instances_http(A, "p", 1)).status_code
            == 200
        )

        # Process B deletes them and creates them again: other sizes, another kind.
        for sid in ("f", "i", "k"):
            assert c.delete(f"{b.url}/v1/streams/{sid}").status_code == 204
        y8 = rng.normal(size=8).tolist()
        _saola(c, b.url, "f", y8)
        _ofs(c, b.url, "i", ["u", "v", "w"])
        _saola(c, b.url, "k", y8)

        # A answers for the new streams: 8 values per column (a JSON body is checked
        # against the stream's size before the write)...
        r = c.post(
            a.url + "/v1/streams/f/features", **_json_features(["a"], rng.normal(size=(1, 8)), 1)
        )
        assert r.status_code == 200, r.text
        assert r.json()["version"] == 1 and r.headers.get("idempotent-replay") != "true"
        # ... seq 1 of the new instance stream is fresh, not a replay of the old one ...
        A = np.column_stack([rng.normal(size=(4, 3)), rng.integers(0, 2, 4)])
        r = c.post(a.url + "/v1/streams/i/instances", **instances_http(A, "p", 1))
        assert r.status_code == 200, r.text
        assert r.json()["version"] == 1 and r.headers.get("idempotent-replay") != "true"
        # ... and the next expected seq is the new stream's.
        r = c.post(a.url + "/v1/streams/i/instances", **instances_http(A, "p", 5))
        assert r.status_code == 409 and r.json()["expected_seq"] == 2, r.text
        # A feature stream now: features are accepted.
        r = c.post(a.url + "/v1/streams/k/features", **_features(["z"], rng.normal(size=(8, 1)), 1))
        assert r.status_code == 200, r.text


# --------------------------------------------------------------------------- full Redis


def _fill(client: redis.Redis) -> list[str]:
    """Take Redis's memory past maxmemory with filler keys (a write is accepted while
    memory is within maxmemory, whatever it adds); returns their names."""
    keys = []
    for i in range(1000):
        try:
            client.set(f"filler-{i}", b"x" * 65536)
        except redis.exceptions.OutOfMemoryError:
            return keys
        keys.append(f"filler-{i}")
    raise AssertionError("Redis never ran out of memory")


def test_redis_out_of_memory_is_a_503_store_full_counted_and_not_ready(
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
) -> None:
    store = redis_server_factory(extra=("--maxmemory", "8mb", "--maxmemory-policy", "noeviction"))
    server = processes.server(store.url, key_prefix).start()
    rng = np.random.default_rng(11)
    n = 200
    y = rng.normal(size=n)
    client = redis.Redis.from_url(store.url)
    try:
        with httpx.Client(base_url=server.url, timeout=20) as c:
            _saola(c, "", "m", y.tolist())
            names = [f"a{i}" for i in range(20)]
            X = np.column_stack([y + rng.normal(size=n) for _ in names])
            assert c.post("/v1/streams/m/features", **_features(names, X, 1)).status_code == 200
            body = {
                "id": "mi",
                "algorithm": "ofs",
                "params": {"num_features": 2},
                "feature_names": ["u", "v", "w"],
            }
            assert c.post("/v1/streams", json=body).status_code == 201
            assert c.get("/readyz").status_code == 200
            fillers = _fill(client)
            # Writes are refused, each time, with the problem that says why.
            names = [f"b{i}" for i in range(20)]
            X = np.column_stack([y + rng.normal(size=n) for _ in names])
            for _ in range(3):
                r = c.post("/v1/streams/m/features", **_features(names, X, 2))
                assert r.status_code == 503, r.text
                problem = r.json()
                assert problem["type"] == "/problems/store-full", problem
                assert "maxmemory" in problem["detail"] and r.headers["retry-after"]
            # Over the WebSocket too: the error, then 1013.
            A = np.column_stack([rng.normal(size=(4, 3)), rng.integers(0, 2, 4)])
            with connect(server.url.replace("http", "ws") + "/v1/streams/mi/ws?producer=w") as ws:
                ws.send(npy(A))
                messages = []
                with pytest.raises(ConnectionClosed) as closed:
                    for _ in range(10):
                        messages.append(ws.recv(timeout=10))
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013, messages
            assert any("/problems/store-full" in str(m) for m in messages), messages
            # Counted, and the process says it is not ready; reads still work.
            assert metric(server.url, "featurestream_store_errors_total") >= 3
            assert metric(server.url, "featurestream_store_full_total") >= 3
            t = time.monotonic()
            ready = c.get("/readyz")
            assert ready.status_code == 503 and time.monotonic() - t < 3
            assert c.get("/v1/streams/m/selected").status_code == 200
            assert c.get("/v1/streams/m").json()["version"] == 1  # nothing applied
            # Room again: ready, and the same seq is applied once.
            client.delete(*fillers)
            assert c.get("/readyz").status_code == 200
            r = c.post("/v1/streams/m/features", **_features(names, X, 2))
            assert r.status_code == 200 and r.json()["version"] == 2, r.text
            r = c.post("/v1/streams/m/features", **_features(names, X, 2))
            assert r.headers.get("idempotent-replay") == "true"
    finally:
        client.close()


# --------------------------------------------------------------------------- bounded growth


def test_event_log_keeps_event_retention_entries_and_older_pages_are_gone(
    processes: Processes, redis_url: str, key_prefix: str
) -> None:
    server = processes.server(
        redis_url, key_prefix, env={"FEATURESTREAM_EVENT_RETENTION": "100"}
    ).start()
    rng = np.random.default_rng(12)
    y = rng.normal(size=10)
    with httpx.Client(base_url=server.url, timeout=20) as c:
        _saola(c, "", "e", y.tolist())
        for seq in range(1, 131):
            r = c.post(
                "/v1/streams/e/features", **_features([f"c{seq}"], rng.normal(size=(10, 1)), seq)
            )
            assert r.status_code == 200, r.text
        client = redis.Redis.from_url(redis_url)
        try:
            assert client.xlen(stream_keys(key_prefix, "e").events) == 100
        finally:
            client.close()
        # From the start: the oldest entry kept.
        page = c.get("/v1/streams/e/events", params={"limit": 1}).json()
        assert page["events"][0]["version"] == 31
        # After an event no longer kept: gone, and the answer says from where it is kept.
        r = c.get("/v1/streams/e/events", params={"after": "5-0"})
        assert r.status_code == 410, r.text
        assert r.json()["type"] == "/problems/history-trimmed" and r.json()["oldest_version"] == 31
        # Entry 30 is gone, so whether events followed 30-0 in it cannot be told: gone too.
        assert c.get("/v1/streams/e/events", params={"after": "30-0"}).status_code == 410
        # From inside the oldest entry kept: nothing is missing.
        r = c.get("/v1/streams/e/events", params={"after": "31-0", "limit": 500})
        assert r.status_code == 200
        assert [e["version"] for e in r.json()["events"]][-1] == 130


def test_stored_responses_are_bounded_by_bytes_per_stream(
    processes: Processes, redis_url: str, key_prefix: str
) -> None:
    limit = 1024 * 1024
    server = processes.server(
        redis_url, key_prefix, env={"FEATURESTREAM_REPLAY_BYTES": str(limit)}
    ).start()
    rng = np.random.default_rng(13)
    n = 4
    y = rng.normal(size=n)
    sizes = []  # bytes each response takes in Redis (compressed: see engine/packing.py)
    with httpx.Client(base_url=server.url, timeout=30) as c:
        _saola(c, "", "r", y.tolist())
        seq = 0
        while sum(sizes) <= 2 * limit and seq < 80:  # the responses alone exceed the bound
            seq += 1
            # Names that compress little, so that a few dozen requests fill the bound.
            names = [f"s{seq}-{uuid.uuid4().hex}" for _ in range(2000)]
            last = _json_features(names, rng.normal(size=(2000, n)), seq)
            r = c.post("/v1/streams/r/features", **last)
            assert r.status_code == 200, r.text
            sizes.append(PREFIX_SIZE + len(pack(r.content)))
        assert sum(sizes) > 2 * limit, sizes
        client = redis.Redis.from_url(redis_url)
        try:
            k = stream_keys(key_prefix, "r")
            kept = {f: len(v) for f, v in client.hgetall(k.responses).items()}
        finally:
            client.close()
        assert 0 < sum(kept.values()) <= limit, sum(kept.values())
        # The newest are kept and replayed (the same request again); a replay of a dropped
        # one is refused as too old.
        r = c.post("/v1/streams/r/features", **last)
        assert r.status_code == 200 and r.headers.get("idempotent-replay") == "true"
        r = c.post("/v1/streams/r/features", **_features(["s1-x"], np.zeros((n, 1)), 1))
        assert r.status_code == 409, r.text
        assert "older than the replay window" in r.json()["detail"]
        assert r.json()["expected_seq"] == seq + 1


def test_the_cache_is_bounded_by_the_memory_of_decoded_states(
    processes: Processes, redis_url: str, key_prefix: str
) -> None:
    # Instance streams of 20,000 long names: some 0.5 MB encoded, three times that decoded.
    d = 20_000
    names = [f"a-rather-long-feature-name-{i:06d}" for i in range(d)]
    bound = 4 * 1024 * 1024
    server = processes.server(
        redis_url, key_prefix, env={"FEATURESTREAM_CACHE_BYTES": str(bound)}
    ).start()
    rng = np.random.default_rng(14)
    client = redis.Redis.from_url(redis_url)
    encoded = []
    try:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            for s in range(4):
                body = {
                    "id": f"c{s}",
                    "algorithm": "ofs",
                    # Values as sent: the state is then the weights and the names alone.
                    "params": {"num_features": 5, "scale": "none"},
                    "feature_names": names,
                }
                assert c.post("/v1/streams", json=body).status_code == 201
                A = np.column_stack([rng.normal(size=(2, d)), rng.integers(0, 2, 2)])
                assert (
                    c.post(f"/v1/streams/c{s}/instances", **instances_http(A, "p", 1)).status_code
                    == 200
                )
                encoded.append(client.strlen(stream_keys(key_prefix, f"c{s}").state))
            held = metric(server.url, "featurestream_cache_bytes")
            streams = metric(server.url, "featurestream_cache_streams")
    finally:
        client.close()
    # Measured, the decoded states weigh far more than their encoding, and the cache
    # keeps only as many as fit: by encoded length all four would have.
    assert held <= bound
    assert sum(encoded) < bound
    assert 1 <= streams < 4
    assert held / streams > 2 * max(encoded)


def test_ten_thousand_unknown_stream_ids_leave_no_lock_behind(processes: Processes) -> None:
    server = processes.server("memory://", "fs").start()
    A = npy(np.ones((2, 3)))

    async def hammer() -> list[int]:
        limits = httpx.Limits(max_connections=32)
        async with httpx.AsyncClient(base_url=server.url, timeout=30, limits=limits) as c:
            gate = asyncio.Semaphore(32)

            async def one(i: int) -> int:
                async with gate:
                    if i % 2:
                        r = await c.delete(f"/v1/streams/nobody-{i}")
                    else:
                        r = await c.post(
                            f"/v1/streams/nobody-{i}/instances",
                            content=A,
                            headers={"Content-Type": "application/x-npy", "X-Seq": "1"},
                        )
                    return r.status_code

            return await asyncio.gather(*(one(i) for i in range(10_000)))

    statuses = asyncio.run(hammer())
    assert set(statuses) == {404}
    assert metric(server.url, "featurestream_stream_locks") == 0
    assert metric(server.url, "featurestream_cache_streams") == 0
