"""Redis Cluster: the whole HTTP and WebSocket surface on a real 3-master cluster.

Every key of a stream carries the hash tag ``{<id>}``, so the cluster keeps a
stream on one slot, where the commit script (and its SPUBLISH) is legal; the
only other key written is each tenant's index, on its own. The live tests run
``featurestream serve`` processes on ``redis+cluster://`` against six
``redis-server --cluster-enabled yes`` processes that the tests start (three
masters, three replicas: ``tests/deploy/cluster.py``), with streams whose ids
hash to every master.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot
from websockets.sync.client import ClientConnection, connect

from featurestream.api.auth import hash_key
from featurestream.api.deps import STREAM_ID_PATTERN
from featurestream.config import Settings, parse_cluster_url
from featurestream.store.keys import stream_keys, tenant_index_key
from featurestream.store.redis import RedisStore
from tests import support
from tests.deploy.cluster import Cluster, Node
from tests.faults.harness import Processes, ServerProcess

stream_ids = st.from_regex(STREAM_ID_PATTERN, fullmatch=True)
prefixes = st.from_regex(Settings.model_fields["key_prefix"].metadata[-1].pattern, fullmatch=True)


def stream_slots(prefix: str, stream_id: str) -> set[int]:
    k = stream_keys(prefix, stream_id)
    return {key_slot(key.encode()) for key in (*k.all(), k.channel, k.barrier)}


@given(prefix=st.sampled_from(["fs", "prod.fs", "a:b"]) | prefixes, stream_id=stream_ids)
def test_all_keys_of_a_stream_and_its_channel_share_the_slot_of_its_id(
    prefix: str, stream_id: str
) -> None:
    assert stream_slots(prefix, stream_id) == {key_slot(stream_id.encode())}


def test_hash_tag_is_the_stream_id() -> None:
    # CRC16 of "churn" mod 16384; "fs:{churn}:state" hashes only what is inside the braces.
    assert key_slot(b"fs:{churn}:state") == key_slot(b"churn") != key_slot(b"fs:churn:state")


def test_streams_spread_and_only_the_tenant_index_is_outside_a_stream() -> None:
    slots = {next(iter(stream_slots("fs", f"s{i}"))) for i in range(200)}
    assert len(slots) > 150, "distinct streams must land on different slots"
    for tenant in ("acme", "beta", None):
        index = tenant_index_key("fs", tenant)
        assert "{" not in index and index != "fs:streams"  # no set of every stream
        assert index not in stream_keys("fs", f"{tenant}~churn").all()
    # Each tenant's index is a key of its own: tenants spread over the slots too.
    assert key_slot(tenant_index_key("fs", "acme").encode()) != key_slot(
        tenant_index_key("fs", "beta").encode()
    )


def test_cluster_store_urls() -> None:
    target = parse_cluster_url("redis+cluster://a:7000,b:7001")
    assert (target.nodes, target.ssl, target.password) == ([("a", 7000), ("b", 7001)], False, None)
    assert Settings(store_url="rediss+cluster://u:p@h:7000").store_cluster
    for bad in (
        "redis+cluster://",
        "redis+cluster://h",
        "redis+cluster://h:0",
        "redis+cluster://h:1/2",
    ):
        with pytest.raises(ValueError):
            Settings(store_url=bad)


def test_replicas_ack_needs_redis_and_a_wait_shorter_than_a_store_call() -> None:
    assert Settings(store_url="redis://h:6379/0", replicas_ack=1).replicas_ack == 1
    with pytest.raises(ValueError, match="needs a Redis store"):
        Settings(store_url="memory://", replicas_ack=1)
    with pytest.raises(ValueError, match="below store_timeout"):
        Settings(store_url="redis://h:6379/0", replicas_ack=1, replicas_ack_timeout=2.0)


# --------------------------------------------------------------------------- live


KEYS = {"acme": "key-of-acme", "beta": "key-of-beta"}
PREFIX = "fsc"
STREAMS = 60


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster.start()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys"
    path.write_text("".join(f"{t}:{hash_key(k)}\n" for t, k in KEYS.items()))
    return path


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    yield procs
    procs.close()


def auth(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[tenant]}"}


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def npz_columns(X: np.ndarray, names: list[str]) -> bytes:
    """Feature columns as a CSC matrix (n, b) with the names in the archive."""
    buf = io.BytesIO()
    sp.save_npz(buf, sp.csc_matrix(X.T))
    with np.load(io.BytesIO(buf.getvalue())) as z:
        members = dict(z)
    out = io.BytesIO()
    np.savez(out, **members, names=np.array(names))
    return out.getvalue()


def recv(ws: ClientConnection, timeout: float = 20) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(ws.recv(timeout=timeout))
    return message


def spread_ids(cluster: Cluster) -> list[tuple[str, str]]:
    """(tenant, id) of STREAMS streams, a third on each master's slots."""
    by_master: dict[int, list[tuple[str, str]]] = {n.port: [] for n in cluster.masters()}
    i = 0
    while min(len(v) for v in by_master.values()) < STREAMS // 3:
        tenant = "acme" if i % 2 else "beta"
        sid = f"s{i}"
        owner = cluster.owner(stream_keys(PREFIX, f"{tenant}~{sid}").meta).port
        if len(by_master[owner]) < STREAMS // 3:
            by_master[owner].append((tenant, sid))
        i += 1
    return [pair for pairs in zip(*by_master.values(), strict=True) for pair in pairs]


class Statuses:
    """Every HTTP status the test saw (no 5xx may be among them)."""

    def __init__(self) -> None:
        self.seen: Counter[int] = Counter()

    def hook(self, response: httpx.Response) -> None:
        self.seen[response.status_code] += 1


@pytest.mark.redis
@pytest.mark.slow
def test_sixty_streams_on_three_masters_the_whole_surface(
    cluster: Cluster, processes: Processes, keys_file: Path
) -> None:
    X, y = support.wdbc()
    Xi = np.random.default_rng(0).normal(size=(60, 8))
    yi = np.where(Xi[:, 0] + 0.5 * Xi[:, 3] > 0, 1.0, -1.0)
    env = {"FEATURESTREAM_API_KEYS_FILE": str(keys_file)}
    a, b = processes.start(2, cluster.url, PREFIX, env=env)
    ids = spread_ids(cluster)
    owners = Counter(cluster.owner(stream_keys(PREFIX, f"{t}~{s}").meta).port for t, s in ids)
    assert len(owners) == 3 and set(owners.values()) == {STREAMS // 3}
    statuses = Statuses()
    hooks = {"response": [statuses.hook]}
    with (
        httpx.Client(base_url=a.url, timeout=30, event_hooks=hooks) as ha,
        httpx.Client(base_url=b.url, timeout=30, event_hooks=hooks) as hb,
    ):
        assert ha.get("/readyz").status_code == hb.get("/readyz").status_code == 200
        for n, (tenant, sid) in enumerate(ids):
            h = auth(tenant)
            channel = stream_keys(PREFIX, f"{tenant}~{sid}").channel
            owner = cluster.owner(channel)
            if n % 2 == 0:
                _feature_stream(ha, hb, b, sid, h, X, y, cluster, owner, channel)
            else:
                _instance_stream(ha, hb, b, sid, h, Xi, yi, cluster, owner, channel)
            for path in ("", "/selected", "/status", "/events"):
                r = hb.get(f"/v1/streams/{sid}{path}", headers=h)
                assert r.status_code == 200, r.text
        for c in (ha, hb):
            for tenant in KEYS:
                r = c.get("/v1/streams", headers=auth(tenant))
                assert r.status_code == 200
                listed = sorted(s["id"] for s in r.json()["streams"])
                assert listed == sorted(s for t, s in ids if t == tenant)
        for n, (tenant, sid) in enumerate(ids):
            c = ha if n % 2 else hb
            assert c.delete(f"/v1/streams/{sid}", headers=auth(tenant)).status_code == 204
            assert hb.get(f"/v1/streams/{sid}", headers=auth(tenant)).status_code == 404
        for tenant in KEYS:
            assert ha.get("/v1/streams", headers=auth(tenant)).json()["streams"] == []
    assert not [s for s in statuses.seen if s >= 500], statuses.seen
    # Nothing is left behind, and there is no key shared by every stream.
    for node in cluster.masters():
        assert node.client().keys(f"{PREFIX}:*") == []


@contextmanager
def _subscribed(
    server: ServerProcess,
    sid: str,
    headers: dict[str, str],
    cluster: Cluster,
    owner: Any,
    channel: str,
) -> Iterator[ClientConnection]:
    url = server.url.replace("http", "ws") + f"/v1/streams/{sid}/ws"
    with connect(url, additional_headers=headers) as ws:
        first = recv(ws)
        assert first["type"] == "selection" and first["version"] == 0
        # Sharded pub/sub: the channel is subscribed on the master that owns its slot only.
        for node in cluster.masters():
            shard = node.client().execute_command("PUBSUB", "SHARDCHANNELS", channel)  # type: ignore[no-untyped-call]
            assert (shard == [channel.encode()]) == (node is owner), (node.port, owner.port)
        yield ws


def _next_selection(ws: ClientConnection) -> dict[str, Any]:
    while True:
        msg = recv(ws)
        if msg["type"] == "selection":
            return msg


def _feature_stream(
    ha: httpx.Client,
    hb: httpx.Client,
    b: ServerProcess,
    sid: str,
    h: dict[str, str],
    X: np.ndarray,
    y: np.ndarray,
    cluster: Cluster,
    owner: Any,
    channel: str,
) -> None:
    r = ha.post(
        "/v1/streams", json={"id": sid, "algorithm": "saola", "target": y.tolist()}, headers=h
    )
    assert r.status_code == 201, r.text
    with _subscribed(b, sid, h, cluster, owner, channel) as ws:
        cols = [{"name": f"f{i}", "values": X[i].tolist()} for i in (20, 21)]
        r = ha.post(
            f"/v1/streams/{sid}/features",
            json={"producer": "p", "seq": 1, "features": cols},
            headers=h,
        )
        assert r.status_code == 200, r.text
        # Written through process a, seen by the subscriber on process b.
        seen = _next_selection(ws)
        assert seen["version"] == 1 and "f21" in seen["selected"]
    names = ["f26", "f27"]
    r = hb.post(
        f"/v1/streams/{sid}/features",
        content=npy(np.ascontiguousarray(X[[26, 27]].T)),
        headers={**h, "content-type": "application/x-npy", "X-Feature-Names": ",".join(names)},
    )
    assert r.status_code == 200, r.text
    r = ha.post(
        f"/v1/streams/{sid}/features",
        content=npz_columns(X[[3, 4]], ["f3", "f4"]),
        headers={**h, "content-type": "application/x-npz"},
    )
    assert r.status_code == 200, r.text
    # A replayed seq reads the stored response (on the stream's slot).
    r = hb.post(
        f"/v1/streams/{sid}/features", json={"producer": "p", "seq": 1, "features": cols}, headers=h
    )
    assert r.status_code == 200 and r.headers["Idempotent-Replay"] == "true"
    assert hb.get(f"/v1/streams/{sid}", headers=h).json()["version"] == 3


def _instance_stream(
    ha: httpx.Client,
    hb: httpx.Client,
    b: ServerProcess,
    sid: str,
    h: dict[str, str],
    X: np.ndarray,
    y: np.ndarray,
    cluster: Cluster,
    owner: Any,
    channel: str,
) -> None:
    names = support.names(X.shape[1], "x")
    body = {"id": sid, "algorithm": "ofs", "params": {"num_features": 3}, "feature_names": names}
    assert ha.post("/v1/streams", json=body, headers=h).status_code == 201
    with _subscribed(b, sid, h, cluster, owner, channel) as ws:
        r = ha.post(
            f"/v1/streams/{sid}/instances",
            json={"X": X[:20].tolist(), "y": y[:20].tolist()},
            headers=h,
        )
        assert r.status_code == 200, r.text
        assert _next_selection(ws)["version"] == 1
        # WebSocket frames on the same connection: JSON, then .npy (labels last).
        ws.send(json.dumps({"X": X[20:30].tolist(), "y": y[20:30].tolist()}))
        ws.send(npy(np.column_stack([X[30:40], y[30:40]])))
        acks = []
        while len(acks) < 2:
            msg = recv(ws)
            if msg["type"] != "selection":
                assert msg["type"] == "ack", msg
                acks.append(msg)
        assert [m["instances_seen"] for m in acks] == [30, 40]
    r = hb.post(
        f"/v1/streams/{sid}/instances",
        content=npy(np.column_stack([X[40:], y[40:]])),
        headers={**h, "content-type": "application/x-npy", "X-Label-Column": "last"},
    )
    assert r.status_code == 200 and r.json()["instances_seen"] == 60, r.text


def _move_slot(cluster: Cluster, slot: int, source: Node, target: Node) -> None:
    """Move one slot and its keys from ``source`` to ``target`` (what resharding does)."""
    src, dst = source.client(), target.client()
    src_id = src.execute_command("CLUSTER", "MYID").decode()  # type: ignore[no-untyped-call]
    dst_id = dst.execute_command("CLUSTER", "MYID").decode()  # type: ignore[no-untyped-call]
    dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)  # type: ignore[no-untyped-call]
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)  # type: ignore[no-untyped-call]
    while keys := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):  # type: ignore[no-untyped-call]
        src.execute_command(  # type: ignore[no-untyped-call]
            "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys
        )
    for node in cluster.masters():
        node.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)  # type: ignore[no-untyped-call]


@pytest.mark.redis
@pytest.mark.slow
def test_a_subscription_follows_its_stream_when_the_slot_moves(
    cluster: Cluster, processes: Processes, keys_file: Path
) -> None:
    X, y = support.wdbc()
    env = {"FEATURESTREAM_API_KEYS_FILE": str(keys_file)}
    a, b = processes.start(2, cluster.url, PREFIX, env=env)
    h = auth("acme")
    sid = "moving"
    meta = stream_keys(PREFIX, f"acme~{sid}").meta
    channel = stream_keys(PREFIX, f"acme~{sid}").channel
    source = cluster.owner(meta)
    target = next(n for n in cluster.masters() if n is not source)
    statuses = Statuses()
    with httpx.Client(base_url=a.url, timeout=30, event_hooks={"response": [statuses.hook]}) as ha:
        body = {"id": sid, "algorithm": "saola", "target": y.tolist()}
        assert ha.post("/v1/streams", json=body, headers=h).status_code == 201
        url = b.url.replace("http", "ws") + f"/v1/streams/{sid}/ws"
        with connect(url, additional_headers=h) as ws:
            assert recv(ws)["version"] == 0
            cols = [{"name": "f21", "values": X[21].tolist()}]
            r = ha.post(f"/v1/streams/{sid}/features", json={"features": cols}, headers=h)
            assert r.status_code == 200
            assert _next_selection(ws)["version"] == 1
            _move_slot(cluster, key_slot(f"acme~{sid}".encode()), source, target)
            assert cluster.owner(meta) is target
            # The old owner told process b the channel left it; b subscribed it on the
            # new owner (and had the session re-read the selection: nothing new).
            deadline = time.monotonic() + 10
            while target.client().execute_command("PUBSUB", "SHARDCHANNELS", channel) != [  # type: ignore[no-untyped-call]
                channel.encode()
            ]:
                assert time.monotonic() < deadline, "not subscribed on the new owner"
                time.sleep(0.05)
            assert source.client().execute_command("PUBSUB", "SHARDCHANNELS", channel) == []  # type: ignore[no-untyped-call]
            # Process a follows the MOVED redirection; b's WebSocket sees the change.
            cols = [{"name": "f27", "values": X[27].tolist()}]
            r = ha.post(f"/v1/streams/{sid}/features", json={"features": cols}, headers=h)
            assert r.status_code == 200, r.text
            seen = _next_selection(ws)
            assert seen["version"] == 2 and "f27" in seen["selected"]
        assert ha.get(f"/v1/streams/{sid}/events", headers=h).status_code == 200
        assert ha.delete(f"/v1/streams/{sid}", headers=h).status_code == 204
    assert not [s for s in statuses.seen if s >= 500], statuses.seen


@pytest.mark.redis
@pytest.mark.slow
def test_readiness_after_a_failover_reads_the_topology_again(cluster: Cluster) -> None:
    # A process whose cluster client read the topology before a (manual) failover asks
    # the old master ROLE and hears "slave": before saying not ready, it reads the
    # topology again and asks once more, so its first probe after the failover is right.
    async def scenario() -> tuple[bool, bool]:
        store = RedisStore.from_settings(Settings(store_url=cluster.url, key_prefix=PREFIX))
        try:
            before = await store.ping()
            master = cluster.masters()[0]
            heir = cluster.replica_of(master)
            heir.client().execute_command("CLUSTER", "FAILOVER")
            deadline = time.monotonic() + 20
            while not (cluster.role(heir) == "master" and cluster.role(master) == "slave"):
                assert time.monotonic() < deadline, "the manual failover did not happen"
                await asyncio.sleep(0.05)
            cluster.wait_healthy()
            return before, await store.ping()
        finally:
            await store.close()

    assert asyncio.run(scenario()) == (True, True)
