"""Producer records stay bounded: a retention for idle producers and a cap per stream.

Against a real server process on the memory store and on Redis. Before the
bound, 1,000 writes with distinct producers left 1,000 entries in a stream's
producer records, and every WebSocket naming no producer left its ``ws-<uuid>``
for good.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import redis as redis_lib
from websockets.sync.client import connect

from featurestream.store.keys import stream_keys
from tests import support
from tests.support import ServeProcess

D = 4
CAP = 5


@pytest.fixture(params=["memory", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return "memory://"
    return str(request.getfixturevalue("redis_url"))


def _server(store_url: str, prefix: str, **env: str) -> ServeProcess:
    return ServeProcess(store_url, prefix, env=env).start()


@pytest.fixture
def capped(store_url: str, key_prefix: str) -> Iterator[ServeProcess]:
    server = _server(store_url, key_prefix, FEATURESTREAM_MAX_PRODUCERS=str(CAP))
    yield server
    server.kill()


def _stream(http: httpx.Client) -> str:
    sid = f"pr-{uuid.uuid4().hex[:10]}"
    body = {"id": sid, "algorithm": "ofs", "params": {"num_features": 2}}
    body["feature_names"] = support.names(D)
    assert http.post("/v1/streams", json=body).status_code == 201
    return sid


def _write(http: httpx.Client, sid: str, producer: str, seq: int) -> httpx.Response:
    rng = np.random.default_rng(seq)
    body: dict[str, Any] = {"X": rng.normal(size=(2, D)).tolist(), "y": [0, 1]}
    body |= {"producer": producer, "seq": seq}
    return http.post(f"/v1/streams/{sid}/instances", json=body)


def _ws_url(server: ServeProcess, sid: str) -> str:
    return f"ws://127.0.0.1:{server.port}/v1/streams/{sid}/ws"


def _frame(seed: int) -> bytes:
    """One instance as an .npy frame, its label (0/1) in the last column."""
    x = np.random.default_rng(seed).normal(size=(1, D))
    buf = io.BytesIO()
    np.save(buf, np.column_stack([x, (x[:, 0] > 0).astype(float)]))
    return buf.getvalue()


def _forgotten(r: httpx.Response, producer: str) -> None:
    assert r.status_code == 409, r.text
    problem = r.json()
    assert problem["type"].endswith("/sequence-conflict")
    assert (problem["producer"], problem["expected_seq"]) == (producer, 1)
    assert "holds no record of this producer" in problem["detail"]


def _redis_records(server: ServeProcess, sid: str) -> tuple[int, int]:
    """Entries of the stream's producer records and times, read off Redis."""
    k = stream_keys(server.prefix, sid)
    client = redis_lib.Redis.from_url(server.store_url)
    try:
        return int(client.hlen(k.producers)), int(client.hlen(k.seen))
    finally:
        client.close()


def test_past_the_cap_the_least_recently_seen_producers_are_forgotten(
    capped: ServeProcess,
) -> None:
    with httpx.Client(base_url=capped.url, timeout=30) as http:
        sid = _stream(http)
        for i in range(2 * CAP):
            assert _write(http, sid, f"p{i}", 1).status_code == 200
            time.sleep(0.002)  # distinct times: the order of the writes is the order seen
        version = http.get(f"/v1/streams/{sid}").json()["version"]
        # The oldest were dropped: their next seq is 1 again, and the refusal says why.
        for i in range(CAP):
            _forgotten(_write(http, sid, f"p{i}", 2), f"p{i}")
        assert http.get(f"/v1/streams/{sid}").json()["version"] == version
        # The latest are kept: their sequences go on.
        for i in range(CAP, 2 * CAP):
            assert _write(http, sid, f"p{i}", 2).status_code == 200
        # Sockets that name no producer each make one; the records stay within the cap.
        for k in range(2 * CAP):
            with connect(_ws_url(capped, sid)) as ws:
                first = json.loads(ws.recv(timeout=20))
                ws.send(_frame(k))
                while json.loads(ws.recv(timeout=20))["type"] == "selection":
                    pass
            assert first["producer"].startswith("ws-")
        # p9 was the latest HTTP producer; the sockets pushed every HTTP producer out.
        _forgotten(_write(http, sid, f"p{2 * CAP - 1}", 3), f"p{2 * CAP - 1}")
        if capped.store_url.startswith("redis"):
            assert _redis_records(capped, sid) == (CAP, CAP)


def test_a_producer_idle_past_the_retention_starts_afresh(store_url: str, key_prefix: str) -> None:
    server = _server(store_url, key_prefix, FEATURESTREAM_PRODUCER_RETENTION="1")
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            sid = _stream(http)
            assert _write(http, sid, "a", 1).status_code == 200
            assert _write(http, sid, "a", 2).status_code == 200
            time.sleep(1.5)
            # Another producer's write drops "a", idle for longer than the retention.
            assert _write(http, sid, "b", 1).status_code == 200
            _forgotten(_write(http, sid, "a", 3), "a")
            # Its sequence starts afresh: seq 1 is a new write, applied once.
            before = http.get(f"/v1/streams/{sid}").json()["version"]
            first = _write(http, sid, "a", 1)
            assert first.status_code == 200
            assert http.get(f"/v1/streams/{sid}").json()["version"] == before + 1
            again = _write(http, sid, "a", 1)
            assert again.status_code == 200 and again.json() == first.json()
            assert http.get(f"/v1/streams/{sid}").json()["version"] == before + 1
            if store_url.startswith("redis"):
                assert _redis_records(server, sid) == (2, 2)
    finally:
        server.kill()
