"""GET /selected answered ahead of the router (api/middleware.SelectionReads).

The fast path must be invisible: every response equals the route's own, and
every case it does not handle reaches the route. A query string sends a read
through the route (the route ignores unknown query parameters), which gives
the reference to compare with.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from featurestream.api import create_app
from featurestream.api.auth import KeyRing, hash_key
from featurestream.api.middleware import SelectionReads
from featurestream.api.routes.selection import selected_route
from featurestream.config import Settings
from featurestream.engine import StreamEngine
from featurestream.store.memory import InMemoryStore

TARGET = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
COLUMN = {"features": [{"name": "a", "values": [1.0, 2, 3, 4, 6, 5]}]}
# Headers that differ between any two responses.
VOLATILE = {"date", "x-request-id"}


def comparable(r: httpx.Response) -> tuple[int, dict[str, str], bytes]:
    headers = {k: v for k, v in r.headers.items() if k not in VOLATILE}
    return r.status_code, headers, r.content


def assert_same_as_route(
    client: TestClient, path: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    fast = client.get(path, headers=headers)
    routed = client.get(path, params={"via": "route"}, headers=headers)
    assert comparable(fast) == comparable(routed)
    return fast


def test_reads_equal_the_routes_own(client: TestClient) -> None:
    # A measurement, not 6 classes (docs/algorithms.md, "Targets": auto would read 6
    # distinct integers as classes).
    body = {"id": "s", "algorithm": "saola", "target": TARGET, "target_type": "continuous"}
    assert client.post("/v1/streams", json=body)
    assert client.post("/v1/streams/s/features", json=COLUMN).status_code == 200
    ok = assert_same_as_route(client, "/v1/streams/s/selected")
    assert ok.status_code == 200 and ok.headers["etag"] == '"1"'
    assert ok.headers["content-type"] == "application/json"
    assert ok.json()["version"] == 1 and [f["name"] for f in ok.json()["features"]] == ["a"]
    for tag, status in (('"1"', 304), ('"0", "1"', 304), ('"0"', 200)):
        r = assert_same_as_route(client, "/v1/streams/s/selected", {"If-None-Match": tag})
        assert r.status_code == status
    missing = assert_same_as_route(client, "/v1/streams/nope/selected")
    assert missing.status_code == 404 and missing.json()["stream_id"] == "nope"
    bad = assert_same_as_route(client, "/v1/streams/" + "x" * 129 + "/selected")
    assert bad.status_code == 422


def test_reads_are_counted_under_the_routes_label(client: TestClient) -> None:
    client.post("/v1/streams", json={"id": "s", "algorithm": "saola", "target": TARGET})
    for _ in range(3):
        assert client.get("/v1/streams/s/selected").status_code == 200
    metrics = client.get("/metrics").text
    line = (
        'featurestream_http_requests_total{route="/v1/streams/{stream_id}/selected",'
        'method="GET",status="200"} 3'
    )
    assert line in metrics.splitlines()


@pytest.fixture
def keyed(settings: Settings, tmp_path: Path) -> Iterator[TestClient]:
    keys = tmp_path / "keys"
    keys.write_text(f"acme:{hash_key('acme-key')}\nbeta:{hash_key('beta-key')}\n")
    with TestClient(create_app(settings.model_copy(update={"api_keys_file": str(keys)}))) as c:
        yield c


def test_reads_with_keys_equal_the_routes_own(keyed: TestClient) -> None:
    acme = {"Authorization": "Bearer acme-key"}
    body = {"id": "s", "algorithm": "saola", "target": TARGET}
    assert keyed.post("/v1/streams", json=body, headers=acme).status_code == 201
    assert assert_same_as_route(keyed, "/v1/streams/s/selected", acme).status_code == 200
    beta = assert_same_as_route(
        keyed, "/v1/streams/s/selected", {"Authorization": "Bearer beta-key"}
    )
    assert beta.status_code == 404 and "acme" not in beta.text
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
        assert assert_same_as_route(keyed, "/v1/streams/s/selected", headers).status_code == 401


@pytest.mark.anyio
async def test_only_the_plain_read_is_answered_ahead_of_the_router() -> None:
    """Behind SelectionReads, a stand-in router that records what reaches it."""
    store = InMemoryStore()
    await store.open()
    engine = StreamEngine(store, Settings(store_url="memory://"))
    await engine.create(
        stream_id="s", algorithm="saola", params=None, target=TARGET, feature_names=None
    )
    reached: list[str] = []

    async def router(request: Request) -> Response:
        reached.append(f"{request.method} {request.url.path}?{request.url.query}")
        return PlainTextResponse("router", status_code=299)

    app = Starlette(
        routes=[Route("/{path:path}", router, methods=["GET", "HEAD", "POST"])],
        middleware=[Middleware(SelectionReads, route=selected_route())],
    )
    app.state.engine = engine
    app.state.keys = KeyRing()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        r = await c.get("/v1/streams/s/selected")
        assert r.status_code == 200 and r.json()["version"] == 0 and reached == []
        assert (
            await c.get("/v1/streams/s/selected", headers={"If-None-Match": '"0"'})
        ).status_code == 304
        assert reached == []
        for method, path in [
            ("GET", "/v1/streams/other/selected"),  # unknown stream: the route's 404
            ("GET", "/v1/streams/s/selected?x=1"),
            ("HEAD", "/v1/streams/s/selected"),
            ("POST", "/v1/streams/s/selected"),
            ("GET", "/v1/streams/s/status"),
            ("GET", "/v1/streams/s/selected/"),
        ]:
            assert (await c.request(method, path)).status_code == 299, (method, path)
        assert len(reached) == 6
    await store.close()
