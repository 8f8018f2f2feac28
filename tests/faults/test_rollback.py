"""A stream rolled back under two processes that hold it cached: detected, never diverges.

A failover to a replica that missed the last writes, a second of AOF lost, a
backup restored: the stream goes back to an older version, and version numbers
are then used again with other contents. Here every key of the stream is
copied (DUMP), more is written, and the older copy is restored (RESTORE) while
two server processes hold the stream cached. Writes must notice: the producer
is told the true next seq (409 ``expected_seq``) and resends from there, so no
acknowledged-but-missing update goes unreported, and the event log and the
state agree (the state is the serial application of the log).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import numpy as np
import pytest
import redis
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from featurestream.store.keys import stream_keys
from tests.conftest import RedisServer
from tests.faults.harness import (
    CONCURRENT_UPDATE,
    STORE_UNAVAILABLE,
    Ack,
    FeatureRequest,
    Processes,
    ProducerLog,
    consistency_problems,
    create_stream,
    feature_workload,
    instance_workload,
    instances_http,
    lost_acks,
    npy,
    read_event_log,
    read_stored,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

SEQUENCE_CONFLICT = "/problems/sequence-conflict"


def dump_stream(url: str, prefix: str, stream_id: str) -> dict[str, bytes | None]:
    """Every key of the stream, copied in one transaction (a consistent cut)."""
    keys = stream_keys(prefix, stream_id).all()
    client = redis.Redis.from_url(url)
    try:
        with client.pipeline(transaction=True) as pipe:
            for key in keys:
                pipe.dump(key)
            return dict(zip(keys, pipe.execute(), strict=True))
    finally:
        client.close()


def restore_stream(url: str, copy: dict[str, bytes | None]) -> None:
    """Put the copy back, in one transaction: the stream as it was when copied."""
    client = redis.Redis.from_url(url)
    try:
        with client.pipeline(transaction=True) as pipe:
            for key, value in copy.items():
                pipe.delete(key)
                if value is not None:
                    pipe.restore(key, 0, value)
            pipe.execute()
    finally:
        client.close()


def stored_version(url: str, prefix: str, stream_id: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return int(client.hget(stream_keys(prefix, stream_id).meta, "version") or 0)
    finally:
        client.close()


@dataclass
class Producer:
    """Sends its requests in seq order to one server; a 409 sequence conflict moves it to
    the seq the server expects (it resends from there)."""

    name: str
    url: str
    requests: list[FeatureRequest]
    next: int = 1
    acks: dict[int, Ack] = field(default_factory=dict)
    # (seq sent, expected seq told): every time the server said an update is missing.
    told: list[tuple[int, int]] = field(default_factory=list)
    superseded: list[int] = field(default_factory=list)  # acked, then applied again

    @property
    def done(self) -> bool:
        return self.next > len(self.requests)

    def send(self, client: httpx.Client, stream_id: str) -> httpx.Response:
        """Send the next seq until it is answered 200 or 409 sequence-conflict."""
        seq = self.next
        for _ in range(50):
            r = client.post(
                f"{self.url}/v1/streams/{stream_id}/features",
                **self.requests[seq - 1].http(self.name, seq),
            )
            kind = r.json().get("type")
            if r.status_code == 200:
                if seq in self.acks:
                    self.superseded.append(seq)
                body = r.json()
                self.acks[seq] = Ack(seq, int(body["version"]), r.content)
                self.next = seq + 1
                return r
            if r.status_code == 409 and kind == SEQUENCE_CONFLICT:
                expected = int(r.json()["expected_seq"])
                self.told.append((seq, expected))
                self.next = expected
                return r
            assert (r.status_code, kind) in ((409, CONCURRENT_UPDATE), (503, STORE_UNAVAILABLE))
        raise AssertionError(f"{self.name}: seq {seq} never answered")

    def log(self) -> ProducerLog:
        log = ProducerLog(self.name, len(self.requests))
        log.acks = dict(self.acks)
        return log


def test_a_restored_older_copy_of_a_stream_is_detected_by_the_processes_that_cached_it(
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
) -> None:
    store = redis_server_factory()
    a, b = processes.start(2, store.url, key_prefix)
    workload = feature_workload(710, producers=("p1", "p2"), requests=40)
    create_stream(a.url, workload, "rb")
    p1 = Producer("p1", a.url, workload.requests["p1"])
    p2 = Producer("p2", b.url, workload.requests["p2"])
    with httpx.Client(timeout=30) as c:
        # Both processes write the stream (and hold it cached), one request each in turn.
        for _ in range(10):
            p2.send(c, "rb")
            p1.send(c, "rb")
        copy = dump_stream(store.url, key_prefix, "rb")
        at_copy = stored_version(store.url, key_prefix, "rb")
        for _ in range(8):
            p2.send(c, "rb")
            p1.send(c, "rb")
        # A's copy is the latest: its version is the last p1 was acknowledged with.
        cached_by_a = p1.acks[p1.next - 1].version
        assert cached_by_a == stored_version(store.url, key_prefix, "rb") == at_copy + 16

        restore_stream(store.url, copy)

        # B's producer is told where the stream really is, and writes from there until
        # the store is back at the very version A holds, with other contents.
        r = p2.send(c, "rb")
        assert r.status_code == 409 and p2.told[-1] == (19, 11), p2.told
        while stored_version(store.url, key_prefix, "rb") < cached_by_a:
            assert p2.send(c, "rb").status_code == 200
        assert stored_version(store.url, key_prefix, "rb") == cached_by_a
        # Same incarnation, same version: only the last commit id tells A's copy is not
        # the store's. A must not commit on top of it.
        r = p1.send(c, "rb")
        assert r.status_code == 409, r.text
        assert p1.told[-1] == (19, 11), p1.told

        # Both resend from where they were told, to the end.
        while not (p1.done and p2.done):
            for p in (p1, p2):
                if not p.done:
                    p.send(c, "rb")

    stored = read_stored(store.url, key_prefix, "rb")
    # The log and the state agree: versions consecutive, each seq once and in order,
    # the state the serial application of the logged batches.
    assert consistency_problems(stored, workload) == []
    for server in (a, b):
        assert read_event_log(server.url, "rb") == stored.batches
    for p in (p1, p2):
        assert [x.seq for x in stored.batches if x.producer == p.name] == list(range(1, 41))
        # The latest ack of every seq holds ...
        assert lost_acks(stored, p.log()) == []
        # ... and every update acknowledged then lost with the rollback was reported:
        # the producer was told to resend from a seq at or before it.
        assert p.superseded == list(range(11, 19)), p.superseded
        assert min(expected for _, expected in p.told) <= min(p.superseded)


def test_a_websocket_producer_is_told_where_a_rolled_back_stream_is(
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
) -> None:
    store = redis_server_factory()
    server, other = processes.start(2, store.url, key_prefix)
    workload = instance_workload(711, "ofs", frames=30)
    create_stream(server.url, workload, "rw")
    payloads = [npy(f) for f in workload.frames]
    acks: dict[int, int] = {}

    def send(conn: object, seq: int) -> dict[str, object]:
        conn.send(payloads[seq - 1])  # type: ignore[attr-defined]
        while True:
            msg = json.loads(conn.recv(timeout=20))  # type: ignore[attr-defined]
            if msg["type"] != "selection":
                return msg

    with connect(server.ws_url("rw", producer="q", seq=1)) as conn:
        for seq in range(1, 6):
            msg = send(conn, seq)
            assert msg["type"] == "ack" and msg["ack"] == seq, msg
        copy = dump_stream(store.url, key_prefix, "rw")
        for seq in range(6, 11):
            msg = send(conn, seq)
            assert msg["type"] == "ack", msg
            acks[seq] = int(msg["version"])
        restore_stream(store.url, copy)
        # Another process writes until the stream is back at the version this session's
        # process holds, with other contents (another producer's batches).
        with httpx.Client(timeout=20) as c:
            for seq in range(1, 6):
                r = c.post(
                    f"{other.url}/v1/streams/rw/instances",
                    **instances_http(workload.frames[seq - 1], "h", seq),
                )
                assert r.status_code == 200, r.text
        assert stored_version(store.url, key_prefix, "rw") == acks[10]
        # The next frame finds the stream is not what this session was acknowledged:
        # refused with the seq the stream expects, and the connection ends.
        msg = send(conn, 11)
        assert msg["type"] == "error" and msg["seq"] == 11, msg
        assert np.asarray(msg["error"]["expected_seq"]) == 6, msg
        with pytest.raises(ConnectionClosed) as closed:
            conn.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    with connect(server.ws_url("rw", producer="q", seq=6)) as conn:
        for seq in range(6, 31):
            msg = send(conn, seq)
            assert msg["type"] == "ack" and msg["ack"] == seq, msg
    stored = read_stored(store.url, key_prefix, "rw")
    assert consistency_problems(stored, workload) == []
    assert [x.seq for x in stored.batches if x.producer == "q"] == list(range(1, 31))
