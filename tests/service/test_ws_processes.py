"""WebSocket streams against real ``featurestream serve`` processes on one Redis."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest
import redis
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from featurestream import codec
from featurestream.selectors import OFS, OFSParams
from featurestream.store.keys import stream_keys
from tests import support
from tests.conftest import RedisServer
from tests.service.test_processes import Server

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def ws_url(server: Server, sid: str, **query: Any) -> str:
    qs = "&".join(f"{k}={v}" for k, v in query.items())
    return f"ws://127.0.0.1:{server.port}/v1/streams/{sid}/ws" + (f"?{qs}" if qs else "")


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def recv(ws: ClientConnection, timeout: float = 20) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(ws.recv(timeout=timeout))
    return message


def test_a_subscriber_sees_every_selection_change_made_by_another_process(
    servers: list[Server], redis_url: str, key_prefix: str
) -> None:
    X, y = support.wdbc()
    a, b = Server(redis_url, key_prefix).start(), Server(redis_url, key_prefix).start()
    servers += [a, b]
    r = httpx.post(
        a.url + "/v1/streams", json={"id": "f", "algorithm": "saola", "target": y.tolist()}
    )
    assert r.status_code == 201
    with connect(ws_url(b, "f")) as ws:
        support.check_first_message(recv(ws))
        expected = []
        previous: list[str] = []
        with httpx.Client(base_url=a.url, timeout=30) as c:
            for i in range(30):
                feats = [{"name": f"f{i}", "values": X[i].tolist()}]
                body = c.post("/v1/streams/f/features", json={"features": feats}).json()
                if body["selected"] != previous:
                    expected.append((body["version"], body["selected"]))
                    previous = body["selected"]
        assert len(expected) >= 3
        got = []
        while len(got) < len(expected):
            msg = recv(ws)
            assert msg["type"] == "selection"
            got.append((msg["version"], msg["selected"]))
        assert got == expected
        # A frame sent to a feature stream's socket is refused; the socket stays open.
        ws.send(json.dumps({"x": [1.0], "y": 1}))
        msg = recv(ws)
        assert msg["type"] == "error" and msg["error"]["type"] == "/problems/wrong-stream-kind"


D = 60
FRAMES = 1500
ROWS = 8
PARAMS = {"num_features": 10}


def _frames() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    X = rng.normal(size=(FRAMES * ROWS, D))
    y = np.where(X[:, 1] - X[:, 5] + 0.2 * rng.normal(size=len(X)) > 0, 1.0, 0.0)
    A = np.column_stack([X, y])
    return [A[i * ROWS : (i + 1) * ROWS] for i in range(FRAMES)]


def _stream(
    url: str,
    frames: list[np.ndarray],
    first: int,
    stop_after: int | None,
    on_ack: Callable[[], None],
) -> list[dict[str, Any]]:
    """Send frames[first-1:] pipelined from a thread; collect answers until done or closed."""
    answers: list[dict[str, Any]] = []
    with connect(url, max_size=None) as ws:
        assert recv(ws)["type"] == "selection"

        def send() -> None:
            try:
                for k, frame in enumerate(frames[first - 1 :]):
                    ws.send(npy(frame))
                    if k % 20 == 19:
                        time.sleep(0.002)  # a steady producer rather than one burst
            except ConnectionClosed:
                pass

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        try:
            while len(answers) < len(frames) - first + 1:
                msg = recv(ws)
                if msg["type"] == "selection":
                    continue
                answers.append(msg)
                if stop_after is not None and len(answers) == stop_after:
                    on_ack()
        except (ConnectionClosed, TimeoutError):
            pass
        sender.join(30)
    return answers


def test_sigkill_mid_stream_then_resume_loses_no_acknowledged_frame(
    servers: list[Server], redis_server_factory: Callable[..., RedisServer], key_prefix: str
) -> None:
    store = redis_server_factory()  # AOF with appendfsync always
    server = Server(store.url, key_prefix).start()
    servers.append(server)
    frames = _frames()
    body = {"id": "k", "algorithm": "ofs", "params": PARAMS, "feature_names": support.names(D)}
    assert httpx.post(server.url + "/v1/streams", json=body).status_code == 201

    url = ws_url(server, "k", producer="p")
    before = _stream(url, frames, 1, stop_after=300, on_ack=server.kill)
    acked = [m["ack"] for m in before if m["type"] == "ack"]
    assert acked == list(range(1, len(acked) + 1))
    last = acked[-1]
    assert 300 <= last < FRAMES, "the server was killed mid-stream"

    server.start()
    status = httpx.get(server.url + "/v1/streams/k/status").json()
    # Every acknowledged frame survived the kill (more may have been committed, unacked).
    assert status["instances_seen"] >= last * ROWS
    after = _stream(
        ws_url(server, "k", producer="p", seq=last + 1), frames, last + 1, None, lambda: None
    )
    assert [m["type"] for m in after] == ["ack"] * (FRAMES - last)
    assert [m["ack"] for m in after] == list(range(last + 1, FRAMES + 1))
    assert after[-1]["instances_seen"] == FRAMES * ROWS

    # The state equals an uninterrupted run, frame by frame.
    sel = OFS.start(OFSParams.from_mapping(PARAMS), support.names(D))
    for frame in frames:
        sel.learn_instances(frame[:, :-1], frame[:, -1])
    raw = redis.Redis.from_url(store.url).get(stream_keys(key_prefix, "k").state)
    assert raw == codec.encode("ofs", sel.params.to_dict(), sel.snapshot())
    # Each frame was applied exactly once, as its own batch.
    events = httpx.get(server.url + "/v1/streams/k/events", params={"limit": 10_000}).json()
    batches = [e for e in events["events"] if e["type"] == "batch"]
    assert [e["seq"] for e in batches] == list(range(1, FRAMES + 1))
    assert {e["instances"] for e in batches} == {ROWS}
