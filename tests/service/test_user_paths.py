"""The paths users take, against real ``featurestream serve`` processes.

A plain WebSocket client with default options offers permessage-deflate: the
server declines it unless ``ws_compression`` is on. Large JSON bodies are
decoded off the event loop: reads keep answering while they arrive.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
import websockets
from websockets.extensions.permessage_deflate import PerMessageDeflate

from tests.service.test_processes import Server

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for s in started:
        s.kill()


def _negotiated(server: Server) -> tuple[list[str], str | None]:
    """The extensions a default ``websockets`` client gets, and the response's header."""
    r = httpx.post(
        server.url + "/v1/streams",
        json={
            "id": "c",
            "algorithm": "ofs",
            "params": {"num_features": 1},
            "feature_names": ["a", "b"],
        },
    )
    assert r.status_code in (201, 409)

    async def connect() -> tuple[list[str], str | None]:
        url = f"ws://127.0.0.1:{server.port}/v1/streams/c/ws"
        async with websockets.connect(url) as ws:  # default options: deflate is offered
            assert ws.request is not None and ws.response is not None
            assert "permessage-deflate" in ws.request.headers["Sec-WebSocket-Extensions"]
            names = [type(e).__name__ for e in ws.protocol.extensions]
            header = ws.response.headers.get("Sec-WebSocket-Extensions")
            await ws.recv()  # the selection sent on connect
        return names, header

    return asyncio.run(connect())


def test_websocket_compression_is_declined_by_default(
    servers: list[Server], redis_url: str, key_prefix: str
) -> None:
    server = Server(redis_url, key_prefix).start()
    servers.append(server)
    assert _negotiated(server) == ([], None)


def test_websocket_compression_is_negotiated_when_enabled(
    servers: list[Server], redis_url: str, key_prefix: str
) -> None:
    server = Server(redis_url, key_prefix, env={"FEATURESTREAM_WS_COMPRESSION": "true"}).start()
    servers.append(server)
    names, header = _negotiated(server)
    assert names == [PerMessageDeflate.__name__]
    assert header is not None and header.startswith("permessage-deflate")


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], {}, False),
        (["--ws-compression"], {}, True),
        ([], {"FEATURESTREAM_WS_COMPRESSION": "1"}, True),
        (["--no-ws-compression"], {"FEATURESTREAM_WS_COMPRESSION": "1"}, False),
    ],
)
def test_serve_hands_the_compression_setting_to_uvicorn(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], env: dict[str, str], expected: bool
) -> None:
    import uvicorn

    from featurestream import cli

    # serve hands its options down in the environment: restore it afterwards.
    monkeypatch.delenv("FEATURESTREAM_WS_COMPRESSION", raising=False)
    monkeypatch.setenv("FEATURESTREAM_STORE_URL", "memory://")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    seen: dict[str, object] = {}
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: seen.update(kw))
    assert cli.main(["serve", "--store", "memory://", *argv]) == 0
    assert seen["ws_per_message_deflate"] is expected
