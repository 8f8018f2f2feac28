"""The WebSocket's key as its first message (``?auth=message``): how the web page
authenticates without putting the key in a URL.

Against a live ``featurestream serve`` process on Redis: the right key opens
the session, a wrong or missing one (or a first message that is not an auth
message, such as a frame of instances) is refused with an error and close code
1008 and changes nothing. The timeout and the keys-off case run in-process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from featurestream.api import create_app
from featurestream.api.auth import hash_key
from featurestream.api.ws import route
from featurestream.config import Settings
from tests.support import ServeProcess, check_first_message

KEY, OTHER = "acme-key-for-ws", "beta-key-for-ws"


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    f = tmp_path / "keys"
    f.write_text(f"acme:{hash_key(KEY)}\nbeta:{hash_key(OTHER)}\n")
    return f


@pytest.fixture
def server(redis_url: str, key_prefix: str, keys_file: Path) -> Iterator[ServeProcess]:
    s = ServeProcess(redis_url, key_prefix, env={"FEATURESTREAM_API_KEYS_FILE": str(keys_file)})
    s.start()
    try:
        yield s
    finally:
        s.stop()


def create_instance_stream(url: str) -> None:
    body = {
        "id": "s",
        "algorithm": "ofs",
        "params": {"num_features": 2},
        "feature_names": ["a", "b", "c"],
    }
    r = httpx.post(
        url + "/v1/streams", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=30
    )
    assert r.status_code == 201, r.text


def n_instances(url: str) -> int:
    r = httpx.get(
        url + "/v1/streams/s/status", headers={"Authorization": f"Bearer {KEY}"}, timeout=30
    )
    value: int = r.json()["instances_seen"]
    return value


def refused(ws: ClientConnection) -> tuple[dict[str, Any], int | None]:
    """The error message and the close code of a refused connection."""
    message = json.loads(ws.recv(timeout=10))
    with pytest.raises(ConnectionClosed) as info:
        ws.recv(timeout=10)
    assert info.value.rcvd is not None
    return message, info.value.rcvd.code


@pytest.mark.redis
@pytest.mark.slow
def test_the_first_message_carries_the_key(server: ServeProcess) -> None:
    create_instance_stream(server.url)
    ws_url = server.url.replace("http", "ws") + "/v1/streams/s/ws?auth=message"
    with connect(ws_url) as ws:
        ws.send(json.dumps({"type": "auth", "key": KEY}))
        check_first_message(json.loads(ws.recv(timeout=10)))
        ws.send(json.dumps({"X": [[1.0, 2.0, 3.0], [0.5, 1.0, 2.0]], "y": [1, 0]}))
        # The first frame of a fresh server process may wait for the selector's JIT compile.
        ack = json.loads(ws.recv(timeout=60))
        while ack["type"] != "ack":
            ack = json.loads(ws.recv(timeout=60))
        assert ack["ack"] == 1 and ack["instances_seen"] == 2
    assert n_instances(server.url) == 2


@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.parametrize(
    "first",
    [
        json.dumps({"type": "auth", "key": "wrong"}),
        json.dumps({"type": "auth", "key": OTHER}),  # beta has no stream s: 404
        json.dumps({"type": "auth"}),
        json.dumps({"X": [[1.0, 2.0, 3.0]], "y": [1]}),  # a frame, not an auth message
        "not json",
        b"\x93NUMPY",
        # A valid key padded past the size an auth message may have: refused unparsed.
        json.dumps({"type": "auth", "key": KEY, "pad": "x" * 5000}),
    ],
)
def test_anything_else_first_is_refused_and_changes_nothing(
    server: ServeProcess, first: str | bytes
) -> None:
    create_instance_stream(server.url)
    ws_url = server.url.replace("http", "ws") + "/v1/streams/s/ws?auth=message"
    with connect(ws_url) as ws:
        ws.send(first)
        message, code = refused(ws)
    assert message["type"] == "error"
    assert message["error"]["status"] == (404 if OTHER in str(first) else 401)
    assert code == 1008
    assert n_instances(server.url) == 0


@pytest.mark.redis
@pytest.mark.slow
def test_an_unknown_auth_mode_is_an_invalid_query(server: ServeProcess) -> None:
    ws_url = server.url.replace("http", "ws") + "/v1/streams/s/ws?auth=cookie"
    with connect(ws_url, additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
        message, code = refused(ws)
    assert message["error"]["status"] == 422
    assert message["error"]["errors"][0]["field"] == "auth"
    assert code == 1008


def test_no_auth_message_in_time_is_refused(
    keys_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(route, "AUTH_MESSAGE_SECONDS", 0.3)
    app = create_app(Settings(store_url="memory://", api_keys_file=str(keys_file)))
    with TestClient(app) as client, client.websocket_connect("/v1/streams/s/ws?auth=message") as ws:
        message = ws.receive_json()
        assert message["error"]["status"] == 401
        assert "0.3 s" in message["error"]["detail"]
        with pytest.raises(WebSocketDisconnect) as info:
            ws.receive_json()
        assert info.value.code == 1008


def test_without_keys_the_auth_message_is_taken_and_ignored() -> None:
    with TestClient(create_app(Settings(store_url="memory://"))) as client:
        body = {
            "id": "s",
            "algorithm": "ofs",
            "params": {"num_features": 2},
            "feature_names": ["a", "b", "c"],
        }
        assert client.post("/v1/streams", json=body).status_code == 201
        with client.websocket_connect("/v1/streams/s/ws?auth=message") as ws:
            ws.send_text(json.dumps({"type": "auth", "key": "anything"}))
            check_first_message(ws.receive_json())
