"""Another site's page cannot write to a server it can reach, with API keys off.

Against a real server process. Before: a WebSocket opened with ``Origin:
http://evil.example`` was accepted and its frames applied, and a ``POST
.../instances`` without a Content-Type (what ``fetch(url, {mode: "no-cors",
body: blob})`` sends, with no preflight) was parsed as JSON and applied.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests import support
from tests.support import ServeProcess

D = 3
GOOD = "http://dashboard.example:8080"


@pytest.fixture
def allowing(key_prefix: str) -> Iterator[ServeProcess]:
    env = {"FEATURESTREAM_WS_ALLOWED_ORIGINS": f" {GOOD}/ , http://other.example"}
    server = ServeProcess("memory://", key_prefix, env=env).start()
    yield server
    server.kill()


def _stream(http: httpx.Client) -> str:
    sid = f"origin-{uuid.uuid4().hex[:10]}"
    body = {"id": sid, "algorithm": "ofs", "params": {"num_features": 1}}
    body["feature_names"] = support.names(D)
    assert http.post("/v1/streams", json=body).status_code == 201
    return sid


def _frame() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.array([[1.0, 0.0, 2.0, 1.0]]))
    return buf.getvalue()


def _seen(http: httpx.Client, sid: str) -> int:
    return int(http.get(f"/v1/streams/{sid}/status").json()["instances_seen"])


def _write_over_socket(server: ServeProcess, sid: str, origin: str | None) -> None:
    headers = {} if origin is None else {"Origin": origin}
    url = f"ws://127.0.0.1:{server.port}/v1/streams/{sid}/ws"
    with connect(url, additional_headers=headers, open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "selection"
        ws.send(_frame())
        while json.loads(ws.recv(timeout=10))["type"] != "ack":
            pass


def _refused(server: ServeProcess, sid: str, origin: str) -> None:
    with pytest.raises(InvalidStatus) as refused:
        _write_over_socket(server, sid, origin)
    assert refused.value.response.status_code == 403


def test_a_socket_from_another_sites_page_is_refused(server: ServeProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        sid = _stream(http)
        for origin in ("http://evil.example", "null", f"http://localhost:{server.port}.evil"):
            _refused(server, sid, origin)
        assert _seen(http, sid) == 0
        # The server's own page, and clients that are not browsers (no Origin), write.
        _write_over_socket(server, sid, f"http://127.0.0.1:{server.port}")
        _write_over_socket(server, sid, None)
        assert _seen(http, sid) == 2


def test_the_allowed_origins_may_open_sockets(allowing: ServeProcess) -> None:
    with httpx.Client(base_url=allowing.url, timeout=30) as http:
        sid = _stream(http)
        _write_over_socket(allowing, sid, GOOD)
        _write_over_socket(allowing, sid, "HTTP://OTHER.EXAMPLE")
        _refused(allowing, sid, "http://evil.example")
        _refused(allowing, sid, "http://dashboard.example")  # another port: another origin
        assert _seen(http, sid) == 2


def test_a_body_without_a_content_type_is_refused_and_changes_nothing(
    server: ServeProcess,
) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        sid = _stream(http)
        body = json.dumps({"X": [[1.0, 0.0, 2.0]], "y": [1]}).encode()
        for path in (f"/v1/streams/{sid}/instances", "/v1/streams"):
            r = http.post(path, content=body)
            assert r.status_code == 415, r.text
            problem = r.json()
            assert problem["type"].endswith("/unsupported-media-type")
            assert problem["detail"].startswith("No Content-Type; send one of application/json")
        r = http.post(f"/v1/streams/{sid}/instances", content=body, headers={"Content-Type": ""})
        assert r.status_code == 415, r.text
        r = http.post(
            f"/v1/streams/{sid}/instances", content=body, headers={"Content-Type": "text/plain"}
        )
        assert r.status_code == 415, r.text
        assert _seen(http, sid) == 0
        streams = http.get("/v1/streams").json()
        assert [s["id"] for s in streams["streams"]] == [sid]
        # Declared JSON is read as ever.
        r = http.post(
            f"/v1/streams/{sid}/instances",
            content=body,
            headers={"Content-Type": "application/json; charset=utf-8"},
        )
        assert r.status_code == 200, r.text
        assert _seen(http, sid) == 1
