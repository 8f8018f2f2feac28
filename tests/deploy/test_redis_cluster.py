"""Redis Cluster readiness: each stream's keys live on one slot (docs/operations.md).

Every key of a stream carries the hash tag ``{<id>}``, so Redis Cluster hashes
only the id and keeps the stream on one slot, where the multi-key commit script
is legal. The stream index ``<prefix>:streams`` is the only key outside a
stream's slot and is written by single-key commands. The live test runs the
whole HTTP surface against a one-node Redis Cluster, which still refuses any
command or script whose keys span slots (CROSSSLOT).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot
from starlette.testclient import TestClient

from featurestream.api import create_app
from featurestream.api.deps import STREAM_ID_PATTERN
from featurestream.config import Settings
from featurestream.store.keys import index_key, indexed_key, stream_keys, tenant_index_key
from tests import support
from tests.conftest import free_port

stream_ids = st.from_regex(STREAM_ID_PATTERN, fullmatch=True)
prefixes = st.from_regex(Settings.model_fields["key_prefix"].metadata[-1].pattern, fullmatch=True)


def stream_slots(prefix: str, stream_id: str) -> set[int]:
    k = stream_keys(prefix, stream_id)
    return {key_slot(key.encode()) for key in (*k.all(), k.channel)}


@given(prefix=st.sampled_from(["fs", "prod.fs", "a:b"]) | prefixes, stream_id=stream_ids)
def test_all_keys_of_a_stream_share_the_slot_of_its_id(prefix: str, stream_id: str) -> None:
    assert stream_slots(prefix, stream_id) == {key_slot(stream_id.encode())}


def test_hash_tag_is_the_stream_id() -> None:
    # CRC16 of "churn" mod 16384; "fs:{churn}:state" hashes only what is inside the braces.
    assert key_slot(b"fs:{churn}:state") == key_slot(b"churn") != key_slot(b"fs:churn:state")


def test_streams_spread_over_the_cluster_and_only_the_index_is_shared() -> None:
    slots = {next(iter(stream_slots("fs", f"s{i}"))) for i in range(200)}
    assert len(slots) > 150, "distinct streams must land on different slots"
    index = index_key("fs")
    assert "{" not in index, "the index carries no stream's tag"
    for sid in ("churn", "s1", "x"):
        assert index not in stream_keys("fs", sid).all()
    # The two sets compared when streams are indexed by tenant share a slot.
    assert key_slot(indexed_key("fs").encode()) == key_slot(index.encode())
    for tenant in ("acme", None):
        assert "{" not in tenant_index_key("fs", tenant)


# --------------------------------------------------------------------------- live


def _cluster_port() -> int:
    """A free port p whose cluster bus port p + 10000 is free too (so p <= 55535)."""
    for _ in range(200):
        port = free_port()
        if port > 55535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


def _start_cluster_node(directory: str) -> tuple[subprocess.Popen[bytes], int]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed (apt-get install redis-server)")
    port = _cluster_port()
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            directory,
            "--save",
            "",
            "--appendonly",
            "no",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--logfile",
            "redis.log",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("cluster node did not start")


@pytest.fixture
def cluster_url() -> Iterator[str]:
    """A one-node Redis Cluster owning all 16384 slots."""
    directory = tempfile.mkdtemp(prefix="fs-cluster-")
    try:
        proc, port = _start_cluster_node(directory)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    try:
        client = redis.Redis(port=port)
        client.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)  # type: ignore[no-untyped-call]
        deadline = time.monotonic() + 10
        while b"cluster_state:ok" not in client.execute_command(  # type: ignore[no-untyped-call]
            "CLUSTER", "INFO"
        ):
            assert time.monotonic() < deadline, "cluster did not become ok"
            time.sleep(0.05)
        # The node enforces slots: a multi-key command across slots is refused.
        with pytest.raises(redis.ResponseError, match="same slot"):
            client.mget("{a}x", "{b}y")
        client.close()
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.kill()
        proc.wait(10)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.redis
def test_every_endpoint_works_on_redis_cluster(cluster_url: str) -> None:
    X, y = support.wdbc()
    app = create_app(Settings(store_url=cluster_url))
    with TestClient(app) as c:
        r = c.post("/v1/streams", json={"id": "churn", "algorithm": "saola", "target": y.tolist()})
        assert r.status_code == 201
        for seq, start in enumerate(range(0, 30, 10), start=1):
            cols = [{"name": f"f{i}", "values": X[i].tolist()} for i in range(start, start + 10)]
            body = {"producer": "p", "seq": seq, "features": cols}
            assert c.post("/v1/streams/churn/features", json=body).status_code == 200
        # A replayed seq reads the stored response (same slot as the stream).
        r = c.post("/v1/streams/churn/features", json=body)
        assert r.status_code == 200 and r.headers["Idempotent-Replay"] == "true"
        selected = c.get("/v1/streams/churn/selected").json()
        assert [f["name"] for f in selected["features"]] == ["f21", "f27"]
        assert len(c.get("/v1/streams/churn/events", params={"limit": 1000}).json()["events"]) > 30
        assert c.get("/v1/streams/churn/status").status_code == 200
        assert [s["id"] for s in c.get("/v1/streams").json()["streams"]] == ["churn"]
        assert c.delete("/v1/streams/churn").status_code == 204
        assert c.get("/v1/streams/churn").status_code == 404
