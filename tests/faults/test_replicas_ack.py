"""Acknowledged writes on a single Redis with a replica, and readiness of a replica.

With ``FEATURESTREAM_REPLICAS_ACK=1`` every create, commit and delete waits
(Redis ``WAIT``) until a replica holds it; a replica that does not answer
(SIGSTOP) turns writes into ``503 store-unavailable``, outcome unknown, and a
retry of the same seq after it is back is applied once. A server pointed at a
replica is not ready and answers writes with 503, never 500.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest
import redis

from tests import support
from tests.conftest import RedisServer
from tests.faults.harness import Processes

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def _pair(factory: Callable[..., RedisServer]) -> tuple[RedisServer, RedisServer]:
    master = factory()
    replica = factory(extra=("--replicaof", "127.0.0.1", str(master.port)))
    _wait_link(replica)
    return master, replica


def _wait_link(replica: RedisServer, timeout: float = 15.0) -> None:
    client = redis.Redis(port=replica.port)
    try:
        deadline = time.monotonic() + timeout
        while client.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica did not sync"
            time.sleep(0.05)
    finally:
        client.close()


def _features(c: httpx.Client, seq: int) -> httpx.Response:
    X, _ = support.wdbc()
    body = {
        "producer": "p",
        "seq": seq,
        "features": [{"name": f"f{seq}", "values": X[seq].tolist()}],
    }
    return c.post("/v1/streams/s/features", json=body)


def test_writes_wait_for_a_replica_and_are_503_while_it_does_not_answer(
    processes: Processes, redis_server_factory: Callable[..., RedisServer], key_prefix: str
) -> None:
    master, replica = _pair(redis_server_factory)
    env = {"FEATURESTREAM_REPLICAS_ACK": "1", "FEATURESTREAM_REPLICAS_ACK_TIMEOUT": "0.5"}
    (server,) = processes.start(1, master.url, key_prefix, env=env)
    _, y = support.wdbc()
    with httpx.Client(base_url=server.url, timeout=30) as c:
        r = c.post("/v1/streams", json={"id": "s", "algorithm": "saola", "target": y.tolist()})
        assert r.status_code == 201, r.text
        assert _features(c, 1).status_code == 200
        replica.pause()
        try:
            for _ in range(2):
                # Applied on the master, never acknowledged; the retry (a replay of the
                # stored response) waits for the replica too.
                r = _features(c, 2)
                assert r.status_code == 503, r.text
                assert r.json()["type"] == "/problems/store-unavailable"
                assert "outcome unknown" in r.json()["detail"]
            assert c.get("/readyz").status_code == 200, "the master still takes writes"
        finally:
            replica.resume()
        _wait_link(replica)
        r = _features(c, 2)
        assert r.status_code == 200 and r.headers["Idempotent-Replay"] == "true", r.text
        assert _features(c, 3).status_code == 200
        status = c.get("/v1/streams/s/status").json()
        assert status["features_seen"] == 3, "each update applied once"
        assert c.get("/v1/streams/s").json()["version"] == 3
        # The replica holds every acknowledged update.
        client = redis.Redis(port=replica.port)
        try:
            log = client.lrange(f"{key_prefix}:{{s}}:names-log", 0, -1)
        finally:
            client.close()
        assert log == [b"f1", b"f2", b"f3"]
        assert c.delete("/v1/streams/s").status_code == 204


def test_a_server_on_a_replica_is_not_ready_and_answers_writes_503(
    processes: Processes, redis_server_factory: Callable[..., RedisServer], key_prefix: str
) -> None:
    _, replica = _pair(redis_server_factory)
    (server,) = processes.start(1, replica.url, key_prefix)
    _, y = support.wdbc()
    with httpx.Client(base_url=server.url, timeout=30) as c:
        assert c.get("/readyz").status_code == 503
        assert c.get("/readyz").status_code == 503
        # Why, in the log: once, when the answer changed, not at every probe.
        log = server.log_path.read_text()
        assert log.count("not ready: Redis is a replica (ROLE)") == 1, log
        r = c.post("/v1/streams", json={"id": "s", "algorithm": "saola", "target": y.tolist()})
        assert r.status_code == 503, r.text
        assert r.json()["type"] == "/problems/store-unavailable"
        # Promoted (as a failover would): ready, and writes go through.
        client = redis.Redis(port=replica.port)
        try:
            client.execute_command("REPLICAOF", "NO", "ONE")  # type: ignore[no-untyped-call]
        finally:
            client.close()
        assert c.get("/readyz").status_code == 200
        r = c.post("/v1/streams", json={"id": "s", "algorithm": "saola", "target": y.tolist()})
        assert r.status_code == 201, r.text
