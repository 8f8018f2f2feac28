"""The app's ASGI middleware, outermost first.

* :class:`RequestContextMiddleware`: the request id (header, log records) and
  the access log line;
* :class:`MetricsMiddleware`: requests by route, method and status, and their
  time (rendered by ``metrics.py``);
* :class:`BodyLimitMiddleware`: 413 for bodies over the limit, 408 for bodies
  that do not arrive in time;
* :class:`SelectionReads`: the polled ``GET /selected``, answered ahead of the
  router.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid

from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from featurestream.api import problems
from featurestream.api.metrics import Metrics
from featurestream.api.routes.selection import selection_response
from featurestream.api.tenancy import STREAM_ID_PATTERN, scoped_id, tenant_of
from featurestream.errors import FeatureStreamError, PayloadTooLarge, RequestTimeout
from featurestream.logs import access_log, request_id_var

_SANE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class RequestContextMiddleware:
    """Assigns the request id and writes one access log line per HTTP request.

    The id is the client's ``X-Request-ID`` when it is a sane token, otherwise a
    fresh one; it is echoed in the response and added to every log record
    emitted meanwhile (see ``logs.py``).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers", ())).get(b"x-request-id", b"").decode("latin-1")
        rid = given if _SANE_ID.fullmatch(given) else uuid.uuid4().hex
        token = request_id_var.set(rid)
        start = time.perf_counter()
        status = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers", ()))
                headers.append((b"x-request-id", rid.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if scope["type"] == "http":
                access_log.info(
                    "%s %s %s",
                    scope["method"],
                    scope["path"],
                    status,
                    extra={
                        "method": scope["method"],
                        "path": scope["path"],
                        "status": status,
                        "duration_ms": round((time.perf_counter() - start) * 1000, 3),
                    },
                )
            request_id_var.reset(token)


class MetricsMiddleware:
    """Counts requests by route template, method and status, and their total time."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            self.metrics.observe(path, scope["method"], status, time.perf_counter() - start)


class BodyLimitMiddleware:
    """413 for bodies over the limit (by Content-Length up front, or while reading), and
    408 when the body does not arrive within the timeout.

    When the limit or the timeout strikes mid-body, the app is told the client left
    (``http.disconnect``) and the middleware answers the problem itself: however a
    route reads its body (FastAPI's own parsing turns read errors into 400s), the
    client gets the precise status.
    """

    def __init__(self, app: ASGIApp, limit: int, timeout: float = 60.0) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", ()):
            if key == b"content-length" and value.isdigit() and int(value) > self.limit:
                response = problems.problem_for(PayloadTooLarge(self.limit))
                await response(scope, receive, send)
                return
        received = 0
        refused: FeatureStreamError | None = None
        started = False

        async def limited() -> Message:
            nonlocal received, refused
            if refused is not None:
                return {"type": "http.disconnect"}
            try:
                # A client that stalls mid-body would otherwise hold its buffers forever.
                message = await asyncio.wait_for(receive(), self.timeout)
            except TimeoutError:
                refused = RequestTimeout(self.timeout)
                return {"type": "http.disconnect"}
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    refused = PayloadTooLarge(self.limit)
                    return {"type": "http.disconnect"}
            return message

        async def guarded(message: Message) -> None:
            nonlocal started
            if refused is not None:
                return  # the middleware answers instead
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, guarded)
        except Exception:
            if refused is None:
                raise
        if refused is not None and not started:
            await problems.problem_for(refused)(scope, receive, send)


_SELECTED = re.compile("^/v1/streams/(" + STREAM_ID_PATTERN[1:-1] + ")/selected$")


class SelectionReads:
    """``GET /selected`` of an existing stream, without the router.

    Polling clients call it many times a second; the plain case (an authorised
    caller, a stream that exists, a store that answers) gets the very response
    the route gives, at a fraction of the cost of routing and dependency
    resolution. Sits inside the other middlewares (the access log, the metrics
    under the route's own label and the request id are those of the route). A
    request it does not answer itself (another route, a method other than GET,
    a query string, a missing or bad key, an unknown stream, a store error)
    goes on unchanged to the app, which renders the problem documents.
    """

    def __init__(self, app: ASGIApp, route: BaseRoute) -> None:
        self.app = app
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = (
            _SELECTED.fullmatch(scope["path"])
            if scope["type"] == "http"
            and scope["method"] == "GET"
            and not scope.get("query_string")
            and not scope.get("root_path")
            else None
        )
        if match is None:
            await self.app(scope, receive, send)
            return
        conn = HTTPConnection(scope)
        try:
            tenant = tenant_of(conn)
            selection = await conn.app.state.engine.selection(scoped_id(tenant, match[1]))
        except FeatureStreamError:
            # 401, 404, 503...: the route answers with its problem document.
            await self.app(scope, receive, send)
            return
        scope["route"] = self.route
        response = selection_response(selection, conn.headers.get("if-none-match"))
        await response(scope, receive, send)


__all__ = [
    "BodyLimitMiddleware",
    "MetricsMiddleware",
    "RequestContextMiddleware",
    "SelectionReads",
]
