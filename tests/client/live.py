"""Servers for the client and CLI tests: in-process (uvicorn in a thread) and spawned.

Not a test module: imported by the conftests of tests/client and tests/cli.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable

import httpx
import uvicorn
from starlette.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect

from featurestream.api import create_app
from featurestream.config import Settings
from tests.support import free_port


class LiveServer:
    """``create_app(settings)`` served by uvicorn on a free port, in a thread of this process."""

    def __init__(self, settings: Settings, *, websockets: bool = True) -> None:
        self.settings = settings
        self.port = free_port()
        self.app = create_app(settings)
        asgi: ASGIApp = self.app if websockets else _refuse_websockets(self.app)
        config = uvicorn.Config(
            asgi,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            # The WebSocket protocol `featurestream serve` runs.
            ws="websockets-sansio",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the in-process server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)


def _refuse_websockets(app: ASGIApp) -> ASGIApp:
    """The app behind a front that refuses every WebSocket handshake (HTTP 403)."""

    async def front(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await app(scope, receive, send)

    return front


class LoseResponses(httpx.BaseTransport):
    """An HTTP transport that loses answers: the server applies the request, the client
    sees a timeout. ``lose(request)`` decides, per request, whether to lose its answer.
    """

    def __init__(self, lose: Callable[[httpx.Request], bool]) -> None:
        self.inner = httpx.HTTPTransport()
        self.lose = lose
        self.sent: list[httpx.Request] = []
        self.lost: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        response = self.inner.handle_request(request)
        if self.lose(request):
            response.read()  # the server has answered: the request was applied
            response.close()
            self.lost.append(request)
            raise httpx.ReadTimeout("answer lost", request=request)
        return response

    def close(self) -> None:
        self.inner.close()


class TcpProxy:
    """A TCP proxy in front of a server whose live connections can be cut on demand."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._conns += [client, upstream]
                self.accepted += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Drop every open connection (both directions), as a network failure would."""
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        self.cut()


def has_websocket_route() -> bool:
    """Whether this server build answers ``WS /v1/streams/{stream_id}/ws``."""
    with TestClient(create_app(Settings(store_url="memory://"))) as http:
        try:
            with http.websocket_connect("/v1/streams/probe/ws") as ws:
                ws.receive_text()  # the route exists: it says the stream does not
        except WebSocketDisconnect:
            return False
    return True


WS_MISSING = (
    "the server has no WebSocket route /v1/streams/{stream_id}/ws "
    "(service/featurestream/api/ws/) yet"
)
