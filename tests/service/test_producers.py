"""Producers and their seqs against a real server process on Redis (issue 14, points 4-6, 16).

A (producer, seq) names one write: reused with other content it is refused,
never acknowledged with another write's answer; every channel checks
producer names alike; the idempotency headers hold for every body type; a
write with nothing in it makes no version.
"""

from __future__ import annotations

import io
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests import support
from tests.support import ServeProcess

pytestmark = [pytest.mark.redis, pytest.mark.slow]

D = 4
PARAMS = {"num_features": 3}


@pytest.fixture(scope="module")
def server(redis_url: str) -> Iterator[ServeProcess]:
    proc = ServeProcess(redis_url, f"fstest-{uuid.uuid4().hex[:12]}").start()
    yield proc
    proc.kill()


@pytest.fixture
def http(server: ServeProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


def sid() -> str:
    return f"p-{uuid.uuid4().hex[:10]}"


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def instance_stream(http: httpx.Client) -> str:
    stream = sid()
    body = {"id": stream, "algorithm": "ofs", "params": PARAMS, "feature_names": support.names(D)}
    assert http.post("/v1/streams", json=body).status_code == 201
    return stream


def feature_stream(http: httpx.Client, n: int = 8) -> str:
    stream = sid()
    body = {"id": stream, "algorithm": "saola", "target": np.arange(float(n)).tolist()}
    assert http.post("/v1/streams", json=body).status_code == 201
    return stream


def frame(rows: int, seed: int) -> bytes:
    """An .npy frame of ``rows`` instances, labels (0/1) in the last column."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, D))
    return npy(np.column_stack([X, (X[:, 0] > 0).astype(float)]))


def ws_url(server: ServeProcess, stream: str, query: str = "") -> str:
    return f"ws://127.0.0.1:{server.port}/v1/streams/{stream}/ws" + (f"?{query}" if query else "")


def recv(ws: ClientConnection) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(ws.recv(timeout=20))
    return message


def answers(ws: ClientConnection, count: int) -> list[dict[str, Any]]:
    """The next ``count`` acks and errors (selection messages skipped)."""
    out: list[dict[str, Any]] = []
    while len(out) < count:
        msg = recv(ws)
        if msg["type"] != "selection":
            out.append(msg)
    return out


def batches(http: httpx.Client, stream: str) -> list[dict[str, Any]]:
    r = http.get(f"/v1/streams/{stream}/events", params={"limit": 10000})
    return [e for e in r.json()["events"] if e["type"] == "batch"]


def version(http: httpx.Client, stream: str) -> int:
    return int(http.get(f"/v1/streams/{stream}").json()["version"])


# --------------------------------------------------------------------------- point 4


def _stream_frames(
    server: ServeProcess, stream: str, query: str, frames: list[bytes], out: dict[str, Any]
) -> None:
    with connect(ws_url(server, stream, query)) as ws:
        out["first"] = recv(ws)
        for f in frames:
            ws.send(f)
        out["answers"] = answers(ws, len(frames))


def test_two_sockets_of_one_producer_never_ack_each_others_frames(
    server: ServeProcess, http: httpx.Client
) -> None:
    stream = instance_stream(http)
    n = 12
    # Told apart by size: connection A sends frames of 1 instance, B frames of 2.
    sent = {"A": [frame(1, k) for k in range(n)], "B": [frame(2, 100 + k) for k in range(n)]}
    results: dict[str, dict[str, Any]] = {"A": {}, "B": {}}
    threads = [
        threading.Thread(
            target=_stream_frames,
            args=(server, stream, "producer=shared&seq=1", sent[c], results[c]),
        )
        for c in ("A", "B")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    applied = {e["seq"]: e["instances"] for e in batches(http, stream)}
    assert sorted(applied) == list(range(1, n + 1)), "each seq applied exactly once"
    acked = 0
    for conn, rows in (("A", 1), ("B", 2)):
        got = results[conn]["answers"]
        assert [m.get("ack", m.get("seq")) for m in got] == list(range(1, n + 1))
        for m in got:
            if m["type"] == "ack":
                # An acknowledged frame is the one that was applied under its seq.
                assert applied[m["ack"]] == rows, (conn, m)
                acked += 1
            else:
                assert m["error"]["status"] == 409, m
                assert m["error"]["type"] == "/problems/seq-reused"
                assert "seq reused with different content" in m["error"]["detail"]
                assert applied[m["seq"]] != rows
    assert acked == n
    status = http.get(f"/v1/streams/{stream}/status").json()
    assert status["instances_seen"] == sum(applied.values())


def test_sockets_naming_no_producer_each_get_their_own(
    server: ServeProcess, http: httpx.Client
) -> None:
    stream = instance_stream(http)
    n = 8
    sent = {c: [frame(1 + i, 10 * i + k) for k in range(n)] for i, c in enumerate("AB")}
    results: dict[str, dict[str, Any]] = {"A": {}, "B": {}}
    threads = [
        threading.Thread(target=_stream_frames, args=(server, stream, "", sent[c], results[c]))
        for c in "AB"
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    producers = {c: results[c]["first"]["producer"] for c in "AB"}
    assert producers["A"] != producers["B"]
    assert all(p.startswith("ws-") for p in producers.values())
    assert all(results[c]["first"]["seq"] == 1 for c in "AB")
    for c in "AB":
        assert [m["type"] for m in results[c]["answers"]] == ["ack"] * n
    logged = batches(http, stream)
    assert len(logged) == 2 * n
    assert sorted(e["producer"] for e in logged) == sorted([producers["A"], producers["B"]] * n)
    status = http.get(f"/v1/streams/{stream}/status").json()
    assert status["instances_seen"] == n * 1 + n * 2
    # The producer it was told resumes it: its frames are acknowledged, not applied again.
    with connect(ws_url(server, stream, f"producer={producers['A']}&seq=1")) as ws:
        assert recv(ws)["producer"] == producers["A"]
        ws.send(sent["A"][0])
        assert answers(ws, 1)[0]["ack"] == 1
    assert http.get(f"/v1/streams/{stream}/status").json()["instances_seen"] == 3 * n


def test_http_seq_reused_with_other_content_is_refused(http: httpx.Client) -> None:
    stream = feature_stream(http)
    path = f"/v1/streams/{stream}/features"
    first = {"producer": "p", "seq": 1, "features": [{"name": "a", "values": [1.0] * 8}]}
    other = {"producer": "p", "seq": 1, "features": [{"name": "b", "values": [2.0] * 8}]}
    ok = http.post(path, json=first)
    assert ok.status_code == 200
    r = http.post(path, json=other)
    assert r.status_code == 409 and r.json()["type"] == "/problems/seq-reused"
    assert r.json()["expected_seq"] == 2
    again = http.post(path, json=first)
    assert again.status_code == 200 and again.content == ok.content
    assert again.headers["idempotent-replay"] == "true"
    assert version(http, stream) == 1


# --------------------------------------------------------------------------- point 5


@pytest.mark.parametrize(
    "producer",
    ["", "x" * 30_000, "x" * 257, "p\tq"],
    ids=["empty", "30000", "257", "tab"],
)
def test_bad_x_producer_headers_are_422(http: httpx.Client, producer: str) -> None:
    stream = instance_stream(http)
    r = http.post(
        f"/v1/streams/{stream}/instances",
        content=frame(1, 0),
        headers={
            "content-type": "application/x-npy",
            "X-Label-Column": "last",
            "X-Producer": producer,
            "X-Seq": "1",
        },
    )
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == "X-Producer"
    assert version(http, stream) == 0


def test_a_newline_ends_no_producer_name_in_any_channel(
    server: ServeProcess, http: httpx.Client
) -> None:
    stream = instance_stream(http)
    body = {"producer": "p\n", "seq": 1, "X": [[0.0] * D], "y": [1]}
    r = http.post(f"/v1/streams/{stream}/instances", json=body)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "producer"
    with connect(ws_url(server, stream, "producer=p%0A")) as ws:
        msg = recv(ws)
        assert msg["type"] == "error" and msg["error"]["errors"][0]["field"] == "producer"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert version(http, stream) == 0


# --------------------------------------------------------------------------- point 6


def test_idempotency_headers_hold_for_json_bodies(http: httpx.Client) -> None:
    stream = instance_stream(http)
    path = f"/v1/streams/{stream}/instances"
    body = {"X": [[0.5] * D], "y": [1]}
    headers = {"X-Producer": "hdr", "X-Seq": "1"}
    first = http.post(path, json=body, headers=headers)
    again = http.post(path, json=body, headers=headers)
    assert first.status_code == again.status_code == 200
    assert first.json()["producer"] == "hdr" and first.json()["seq"] == 1
    assert again.headers["idempotent-replay"] == "true" and again.content == first.content
    assert version(http, stream) == 1
    assert http.get(f"/v1/streams/{stream}/status").json()["instances_seen"] == 1
    # Header and body may both be given, only alike.
    same = http.post(
        path, json={**body, "producer": "hdr", "seq": 2}, headers=headers | {"X-Seq": "2"}
    )
    assert same.status_code == 200
    for extra, field in (({"seq": 4}, "X-Seq"), ({"producer": "other"}, "X-Producer")):
        r = http.post(path, json={**body, "seq": 3, **extra}, headers=headers | {"X-Seq": "3"})
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == field, r.text
    assert version(http, stream) == 2


# --------------------------------------------------------------------------- point 16


@pytest.mark.parametrize("stream", [".", ".."])
def test_dot_stream_ids_are_refused_at_create(http: httpx.Client, stream: str) -> None:
    r = http.post("/v1/streams", json={"id": stream, "algorithm": "saola", "target": [1.0, 2.0]})
    assert r.status_code == 422, r.text
    assert stream not in [s["id"] for s in http.get("/v1/streams").json()["streams"]]


def test_unnamed_npy_columns_of_two_producers_get_distinct_names(http: httpx.Client) -> None:
    stream = feature_stream(http)
    names = {}
    for producer in ("a", "b"):
        r = http.post(
            f"/v1/streams/{stream}/features",
            content=npy(np.random.default_rng(len(producer)).normal(size=(8, 2))),
            headers={"content-type": "application/x-npy", "X-Producer": producer, "X-Seq": "1"},
        )
        assert r.status_code == 200, r.text
        names[producer] = [d["name"] for d in r.json()["decisions"]]
    assert names == {"a": ["a:1:0", "a:1:1"], "b": ["b:1:0", "b:1:1"]}


def test_empty_batches_make_no_version(server: ServeProcess, http: httpx.Client) -> None:
    fstream = feature_stream(http)
    path = f"/v1/streams/{fstream}/features"
    r = http.post(path, json={"features": []})
    assert r.status_code == 200 and r.json()["version"] == 0 and r.json()["decisions"] == []
    empty_npy = {"content-type": "application/x-npy", "X-Producer": "p", "X-Seq": "1"}
    r = http.post(path, content=npy(np.zeros((8, 0))), headers=empty_npy)
    assert r.status_code == 200 and r.json()["version"] == 0
    # Its seq is used up: sent again it is a replay, the next seq is 2.
    again = http.post(path, content=npy(np.zeros((8, 0))), headers=empty_npy)
    assert again.headers["idempotent-replay"] == "true" and again.content == r.content
    r = http.post(path, json={"producer": "p", "seq": 2, "features": []})
    assert r.status_code == 200 and r.json()["seq"] == 2
    assert version(http, fstream) == 0 and batches(http, fstream) == []

    istream = instance_stream(http)
    headers = {"content-type": "application/x-npy", "X-Label-Column": "last"}
    r = http.post(
        f"/v1/streams/{istream}/instances", content=npy(np.zeros((0, D + 1))), headers=headers
    )
    assert r.status_code == 200 and r.json()["version"] == 0 and r.json()["instances_seen"] == 0
    with connect(ws_url(server, istream, "producer=w")) as ws:
        recv(ws)
        for f in (npy(np.zeros((0, D + 1))), frame(2, 1), npy(np.zeros((0, D + 1)))):
            ws.send(f)
        got = answers(ws, 3)
    assert [(m["type"], m["ack"], m["version"]) for m in got] == [
        ("ack", 1, 0),
        ("ack", 2, 1),
        ("ack", 3, 1),
    ]
    assert version(http, istream) == 1
    assert [e["seq"] for e in batches(http, istream)] == [2]
