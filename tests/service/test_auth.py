"""API keys and tenancy: every /v1 route and the WebSocket, enumerated from the app."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import fastapi.routing
import pytest
from fastapi.routing import APIRoute, APIWebSocketRoute
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from featurestream.api import create_app
from featurestream.api.auth import hash_key
from featurestream.config import Settings

KEYS = {"acme": "acme-key-1", "beta": "beta-key-1"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


A, B = bearer(KEYS["acme"]), bearer(KEYS["beta"])


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    f = tmp_path / "keys"
    f.write_text("".join(f"{t}:{hash_key(k)}\n" for t, k in KEYS.items()))
    return f


@pytest.fixture
def client(settings: Settings, keys_file: Path) -> Iterator[TestClient]:
    with TestClient(create_app(settings.model_copy(update={"api_keys_file": str(keys_file)}))) as c:
        yield c


def all_routes(client: TestClient) -> list[tuple[object, str]]:
    """(route, full path) of every route, including those of included routers."""
    routes = client.app.routes  # type: ignore[attr-defined]
    walk = getattr(fastapi.routing, "iter_route_contexts", None)
    if walk is None:  # FastAPI versions that flatten included routers into app.routes
        return [(r, r.path) for r in routes]
    return [(ctx.route, getattr(ctx, "path", None) or ctx.route.path) for ctx in walk(routes)]


def v1_http_routes(client: TestClient) -> list[tuple[str, str]]:
    out = []
    for route, path in all_routes(client):
        if isinstance(route, APIRoute) and path.startswith("/v1"):
            out += [(m, path.replace("{stream_id}", "s1")) for m in sorted(route.methods)]
    return out


def v1_ws_routes(client: TestClient) -> list[str]:
    return [
        path.replace("{stream_id}", "s1")
        for route, path in all_routes(client)
        if isinstance(route, APIWebSocketRoute) and path.startswith("/v1")
    ]


def test_routes_are_enumerated(client: TestClient) -> None:
    routes = v1_http_routes(client)
    assert ("POST", "/v1/streams/s1/features") in routes and ("GET", "/v1/algorithms") in routes
    assert len(routes) >= 11 and v1_ws_routes(client) == ["/v1/streams/s1/ws"]


@pytest.mark.parametrize("headers", [{}, bearer("wrong-key"), {"Authorization": "Basic abc"}])
def test_every_v1_route_rejects_missing_or_wrong_keys(
    client: TestClient, headers: dict[str, str]
) -> None:
    assert (
        client.post(
            "/v1/streams",
            headers=A,
            json={"id": "s1", "algorithm": "saola", "target": [1, 2, 3, 4]},
        ).status_code
        == 201
    )
    for method, path in v1_http_routes(client):
        r = client.request(method, path, headers=headers, json={})
        assert r.status_code == 401, (method, path, r.status_code)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["type"].endswith("/unauthorized")
        assert r.headers["www-authenticate"].startswith("Bearer")
    # Nothing was changed by any of them.
    assert client.get("/v1/streams/s1", headers=A).json()["version"] == 0


@pytest.mark.parametrize("query", ["", "?token=wrong"])
def test_websocket_rejects_missing_or_wrong_keys_with_1008(client: TestClient, query: str) -> None:
    for path in v1_ws_routes(client):
        with client.websocket_connect(path + query) as ws:
            message = ws.receive_json()
            assert message["type"] == "error" and message["error"]["status"] == 401
            with pytest.raises(WebSocketDisconnect) as info:
                ws.receive_json()
            assert info.value.code == 1008


def test_websocket_accepts_a_header_or_a_token(client: TestClient) -> None:
    client.post(
        "/v1/streams", headers=A, json={"id": "s1", "algorithm": "saola", "target": [1, 2, 3, 4]}
    )
    with client.websocket_connect("/v1/streams/s1/ws", headers=A) as ws:
        assert ws.receive_json()["type"] == "selection"
    with client.websocket_connect(f"/v1/streams/s1/ws?token={KEYS['acme']}") as ws:
        assert ws.receive_json()["type"] == "selection"
    # Another tenant's stream does not exist for beta.
    with client.websocket_connect(f"/v1/streams/s1/ws?token={KEYS['beta']}") as ws:
        message = ws.receive_json()
        assert message["error"]["status"] == 404
        assert message["error"]["stream_id"] == "s1"


def test_tenants_cannot_see_each_others_streams(client: TestClient) -> None:
    body = {"id": "s1", "algorithm": "saola", "target": [1.0, 2, 3, 4, 5, 6]}
    assert client.post("/v1/streams", headers=A, json=body).status_code == 201
    for method, path in v1_http_routes(client):
        if "/s1" not in path:
            continue
        payload = {"groups": {"groups": []}, "instances": {"X": [[1.0]]}}.get(
            path.rsplit("/", 1)[-1], {"features": []}
        )
        r = client.request(method, path, headers=B, json=payload)
        assert r.status_code == 404, (method, path, r.status_code, r.text)
        assert r.json()["type"].endswith("stream-not-found") and r.json()["stream_id"] == "s1"
        assert "acme" not in r.text
    assert client.get("/v1/streams", headers=B).json()["streams"] == []
    # The same id is free for beta, and stays separate.
    assert client.post("/v1/streams", headers=B, json=body).status_code == 201
    feats = {"features": [{"name": "a", "values": [1.0, 2, 3, 4, 6, 5]}]}
    assert client.post("/v1/streams/s1/features", headers=B, json=feats).status_code == 200
    assert client.get("/v1/streams/s1", headers=A).json()["version"] == 0
    assert client.get("/v1/streams/s1", headers=B).json()["version"] == 1
    assert [s["id"] for s in client.get("/v1/streams", headers=A).json()["streams"]] == ["s1"]
    assert client.delete("/v1/streams/s1", headers=A).status_code == 204
    assert client.get("/v1/streams/s1", headers=B).status_code == 200


def test_operations_endpoints_stay_open(client: TestClient) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        assert client.get(path).status_code == 200


def test_keys_rotate_without_restart(client: TestClient, keys_file: Path) -> None:
    assert client.get("/v1/algorithms", headers=A).status_code == 200
    keys_file.write_text(f"acme:{hash_key('acme-key-2')}\n")
    st = keys_file.stat()
    os.utime(keys_file, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    time.sleep(1.05)  # the file is checked at most once a second
    assert client.get("/v1/algorithms", headers=A).status_code == 401
    assert client.get("/v1/algorithms", headers=bearer("acme-key-2")).status_code == 200
    assert client.get("/v1/algorithms", headers=B).status_code == 401


def test_an_unreadable_keys_file_fails_at_startup(tmp_path: Path) -> None:
    bad = tmp_path / "keys"
    bad.write_text("not a key line\n")
    with pytest.raises(ValueError, match="keys:1"):
        create_app(Settings(api_keys_file=str(bad)))
