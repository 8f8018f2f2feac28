"""Failover of a Redis Cluster master in the middle of HTTP writes and a WebSocket stream.

A real cluster (three masters, three replicas, AOF ``appendfsync always``,
``cluster-node-timeout`` 1 s: ``tests/deploy/cluster.py``) and two
``featurestream serve`` processes with ``FEATURESTREAM_REPLICAS_ACK=1``. A
feature stream (HTTP producer, JSON and .npy requests, sent to either process)
and an instance stream (WebSocket producer of .npy frames) live on the same
master; partway through, that master is killed with SIGKILL and its replica
takes over. Producers retry what was not acknowledged (HTTP: the same seq;
WebSocket: from the last ack + 1). Afterwards, read on the new master: every
acknowledged update is there with the very answer the client got, none is
applied twice, and the state, the log, the producers' seqs and the stored
responses agree. Each seeded run takes a few seconds; the killed node is
restarted once the replica has taken over (it rejoins as the new master's
replica: until then, with no replica left, no write can be acknowledged).

With a replica paused (SIGSTOP), writes to its master's streams get 503 and
are not acknowledged; after SIGCONT the same writes succeed, applied once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import redis
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from featurestream.store.keys import stream_keys
from tests.deploy.cluster import Cluster, Node
from tests.faults.harness import (
    CLOSE_TRY_AGAIN_LATER,
    FeatureProducer,
    FeatureRequest,
    FeatureWorkload,
    FrameProducer,
    Processes,
    ServerProcess,
    consistency_problems,
    create_stream,
    feature_workload,
    instance_workload,
    lost_acks,
    random_route,
    read_stored,
    seed_note,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

PREFIX = "fsf"
ENV = {
    "FEATURESTREAM_REPLICAS_ACK": "1",
    "FEATURESTREAM_REPLICAS_ACK_TIMEOUT": "0.5",
    "FEATURESTREAM_STORE_TIMEOUT": "2",
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster.start()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def servers(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[ServerProcess]]:
    procs = Processes(Path(tmp_path_factory.mktemp("servers")))
    try:
        yield procs.start(2, cluster.url, PREFIX, env=ENV)
    finally:
        procs.close()


def _ids_on(cluster: Cluster, master: Node, tag: str, count: int) -> list[str]:
    out: list[str] = []
    i = 0
    while len(out) < count:
        sid = f"{tag}{i}"
        if cluster.owner(stream_keys(PREFIX, sid).meta) is master:
            out.append(sid)
        i += 1
    return out


def _url(node: Node) -> str:
    return f"redis://127.0.0.1:{node.port}/0"


class Watcher(threading.Thread):
    """A WebSocket client that only follows a stream's selection (it sends nothing)."""

    def __init__(self, server: ServerProcess, stream_id: str) -> None:
        super().__init__(daemon=True)
        self.url = server.ws_url(stream_id)
        self.versions: list[int] = []
        self.close_code: int | None = None
        self.ready = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        with connect(self.url, open_timeout=10) as conn:
            try:
                while not self.stop.is_set():
                    try:
                        msg = json.loads(conn.recv(timeout=0.2))
                    except TimeoutError:
                        continue
                    if msg["type"] == "selection":
                        self.versions.append(int(msg["version"]))
                        self.ready.set()
            except ConnectionClosed as exc:
                self.close_code = exc.rcvd.code if exc.rcvd else None


@pytest.mark.parametrize("seed", range(10))
def test_master_killed_mid_writes_loses_no_acknowledged_update(
    seed: int, cluster: Cluster, servers: list[ServerProcess], request: pytest.FixtureRequest
) -> None:
    rng = np.random.default_rng([seed, 41])
    cluster.heal()
    cluster.remember_masters()
    masters = cluster.masters()
    victim = masters[int(rng.integers(len(masters)))]
    fid, wid = _ids_on(cluster, victim, f"r{seed}-", 2)
    features = feature_workload(seed, requests=40, columns=(1, 3))
    frames = instance_workload(seed, "ofs", frames=120, rows=4)
    create_stream(servers[0].url, features, fid)
    create_stream(servers[1].url, frames, wid)
    route = random_route([s.url for s in servers], np.random.default_rng([seed, 3]))
    http = FeatureProducer(
        fid, "p", features.requests["p"], route, deadline=60, pause=0.05, interval=0.05
    )
    ws_server = servers[seed % 2]
    ws = FrameProducer(
        wid, "q", frames.frames, lambda: ws_server, window=8, deadline=60, pause=0.05, interval=0.02
    )
    kill_after = int(rng.integers(5, 15))
    with seed_note(seed, f"python -m pytest -p no:cacheprovider '{request.node.nodeid}'", servers):
        # Follows the feature stream on the process the WebSocket producer does not use.
        watcher = Watcher(servers[1 - seed % 2], fid)
        watcher.start()
        assert watcher.ready.wait(10), "the watcher got no first message"
        http.start()
        ws.start()
        deadline = time.monotonic() + 30
        while http.log.last_ack < kill_after or ws.log.last_ack < 3 * kill_after:
            assert time.monotonic() < deadline, "the producers did not get going"
            assert not (http.log.failures or ws.log.failures), http.log.failures + ws.log.failures
            time.sleep(0.01)
        victim.kill()
        acked_at_kill = (http.log.last_ack, ws.log.last_ack)
        # Until a replica takes over (more than cluster-node-timeout), a slot's master is
        # down: the processes are not ready.
        assert httpx.get(servers[0].url + "/readyz", timeout=10).status_code == 503
        heir = cluster.wait_failover(victim)
        # The heir has no replica left, so no write can be acknowledged (503) until
        # the killed node is back: restarted on its files, it rejoins as the heir's
        # replica, as an orchestrator would bring it back.
        victim.start()
        http.join(70)
        ws.join(70)
        assert not http.is_alive() and not ws.is_alive()
        assert http.log.failures == [] and ws.log.failures == []
        assert http.log.last_ack == http.log.total and ws.log.last_ack == ws.log.total
        assert acked_at_kill[0] < http.log.total or acked_at_kill[1] < ws.log.total, (
            "the kill did not land mid-stream"
        )
        assert not [s for s in http.log.statuses if s >= 500 and s != 503], http.log.statuses
        assert 1011 not in ws.log.close_codes, ws.log.close_codes
        # The outage was seen as 503s / 1013s (or a dropped request), never as a 500.
        assert (
            http.log.store_errors
            + ws.log.store_errors
            + ws.log.close_codes[CLOSE_TRY_AGAIN_LATER]
            + http.log.refused_connections
            >= 1
            or http.log.sent > http.log.total
        )
        for sid, workload, log in ((fid, features, http.log), (wid, frames, ws.log)):
            stored = read_stored(_url(heir), PREFIX, sid)
            assert lost_acks(stored, log) == [], f"acknowledged updates lost on {sid}"
            assert consistency_problems(stored, workload) == []
            assert stored.producers[log.name] == log.total
        for s in servers:
            assert httpx.get(s.url + "/readyz", timeout=10).status_code == 200
        # The watcher's process subscribed the channel again on the new master: a change
        # of the selection now reaches it, over the connection it had all along.
        extra = _selection_changing_request(features, seed)
        r = httpx.post(
            servers[0].url + f"/v1/streams/{fid}/features",
            **extra.http("p", http.log.total + 1),
            timeout=30,
        )
        assert r.status_code == 200, r.text
        changed = int(r.json()["version"])
        deadline = time.monotonic() + 10
        while changed not in watcher.versions and watcher.is_alive():
            assert time.monotonic() < deadline, (watcher.versions[-3:], changed)
            time.sleep(0.05)
        watcher.stop.set()
        watcher.join(10)
        assert watcher.close_code is None, f"the watcher was closed ({watcher.close_code})"
        assert changed in watcher.versions
    print(
        f"seed {seed}: killed {victim.port} after {acked_at_kill} acks; "
        f"http 503s {http.log.store_errors}, ws closes {dict(ws.log.close_codes)}"
    )


def _selection_changing_request(workload: FeatureWorkload, seed: int) -> FeatureRequest:
    """A column equal to the target: SAOLA selects it, so the selection changes."""
    name = f"target-copy-{seed}"
    workload.columns[name] = workload.y.copy()
    return FeatureRequest((name,), workload.y[None, :].copy(), "json")


def test_with_the_replica_paused_writes_are_503_and_succeed_after_it_resumes(
    cluster: Cluster, servers: list[ServerProcess]
) -> None:
    cluster.heal()
    master = cluster.masters()[0]
    replica = cluster.replica_of(master)
    (sid,) = _ids_on(cluster, master, "paused-", 1)
    features = feature_workload(7, requests=3, columns=(1, 1))
    create_stream(servers[0].url, features, sid)
    path = f"/v1/streams/{sid}/features"
    with httpx.Client(timeout=30) as c:
        assert (
            c.post(servers[0].url + path, **features.requests["p"][0].http("p", 1)).status_code
            == 200
        )
        replica.pause()
        try:
            for server in servers:
                r = c.post(server.url + path, **features.requests["p"][1].http("p", 2))
                assert r.status_code == 503, r.text
                assert "outcome unknown" in r.json()["detail"]
        finally:
            replica.resume()
        deadline = time.monotonic() + 20
        while True:
            r = c.post(servers[1].url + path, **features.requests["p"][1].http("p", 2))
            if r.status_code == 200:
                break
            assert r.status_code == 503 and time.monotonic() < deadline, r.text
            time.sleep(0.1)
        assert (
            c.post(servers[0].url + path, **features.requests["p"][2].http("p", 3)).status_code
            == 200
        )
    stored = read_stored(_url(master), PREFIX, sid)
    assert [b.seq for b in stored.batches] == [1, 2, 3], "each write applied once"
    assert consistency_problems(stored, features) == []
    # The replica holds the acknowledged writes (READONLY: a cluster replica serves reads
    # of its master's slots on that connection only).
    client = redis.Redis(port=replica.port, single_connection_client=True)
    try:
        client.execute_command("READONLY")  # type: ignore[no-untyped-call]
        assert client.hget(stream_keys(PREFIX, sid).meta, "version") == b"3"
    finally:
        client.close()
