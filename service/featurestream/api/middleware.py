"""The app's ASGI middleware, outermost first.

* :class:`RequestContextMiddleware`: the request id (header, log records) and
  the access log line;
* :class:`MetricsMiddleware`: requests by route, method and status, and their
  time (rendered by ``metrics.py``);
* :class:`AuthBeforeBody`: 401 for a request with a body and without a valid
  API key, before a byte of the body is read;
* :class:`BodyLimitMiddleware`: 413 for bodies over the limit, 408 for bodies
  that do not arrive in time (one deadline for the whole body);
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
from featurestream.api.bodies import NPY_MEDIA_TYPE, NPZ_MEDIA_TYPE
from featurestream.api.metrics import Metrics
from featurestream.api.routes.selection import selection_response
from featurestream.api.tenancy import STREAM_ID_PATTERN, scoped_id, tenant_of
from featurestream.errors import (
    FeatureStreamError,
    PayloadTooLarge,
    RequestTimeout,
    StoreUnavailable,
    UnsupportedMediaType,
)
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


class AuthBeforeBody:
    """401 for a ``/v1`` request that carries a body but no valid API key, unread.

    The routes check the key in a dependency, which FastAPI resolves only after
    it has read and parsed the body: without this gate, anyone could hold a
    connection and a buffer by trickling a body to ``POST /v1/streams``. The
    routes' own check stays, for requests without a body. Without API keys
    configured, it lets everything through.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/") and _has_body(scope):
            try:
                tenant_of(HTTPConnection(scope))
            except FeatureStreamError as exc:
                await problems.problem_for(exc)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class ContentTypeGate:
    """415 for a ``/v1`` request with a body but no ``Content-Type``.

    A web page may send a body without a preflight only as ``text/plain``,
    form data, or with no type at all (``fetch(..., {mode: "no-cors"})``): a
    body must say it is JSON, npy or npz for any route to read it, so another
    site's page cannot write to a server it can reach (docs/operations.md).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"].startswith("/v1/")
            and _has_body(scope)
            and not any(key == b"content-type" for key, _ in scope.get("headers", ()))
        ):
            refused = UnsupportedMediaType("", ("application/json", NPY_MEDIA_TYPE, NPZ_MEDIA_TYPE))
            await problems.problem_for(refused)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _has_body(scope: Scope) -> bool:
    for key, value in scope.get("headers", ()):
        if key == b"transfer-encoding" or (key == b"content-length" and value.strip() != b"0"):
            return True
    return False


class BodyLimitMiddleware:
    """413 for bodies over the limit (by Content-Length up front, or while reading), and
    408 when the whole body has not arrived within the timeout.

    The timeout bounds the body as a whole, from the first read: a client that
    trickles a byte now and then gets its 408 as surely as one that stops.

    When the limit or the timeout strikes mid-body, the app is told the client left
    (``http.disconnect``) and the middleware answers the problem itself: however a
    route reads its body (FastAPI's own parsing turns read errors into 400s), the
    client gets the precise status. It leaves that problem in the scope
    (``problems.BODY_REFUSED``): the client did not leave.
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
        complete = False
        deadline: float | None = None

        async def limited() -> Message:
            nonlocal received, refused, complete, deadline
            if refused is not None:
                return {"type": "http.disconnect"}
            if complete:
                # The whole body is in: later reads only wait for the client to leave.
                return await receive()
            loop = asyncio.get_running_loop()
            if deadline is None:
                deadline = loop.time() + self.timeout
            try:
                # One deadline for the whole body: a client that stalls or trickles
                # mid-body would otherwise hold its connection and buffers forever.
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                refused = scope[problems.BODY_REFUSED] = RequestTimeout(self.timeout)
                return {"type": "http.disconnect"}
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    refused = scope[problems.BODY_REFUSED] = PayloadTooLarge(self.limit)
                    return {"type": "http.disconnect"}
                complete = not message.get("more_body", False)
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
    a query string, a missing or bad key, an unknown stream) goes on unchanged
    to the app, which renders the problem documents. A store that is
    unavailable is answered here (503): asking it again through the route would
    wait ``store_timeout`` twice.
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
        except StoreUnavailable as exc:
            scope["route"] = self.route
            await problems.problem_for(exc)(scope, receive, send)
            return
        except FeatureStreamError:
            # 401, 404, 503...: the route answers with its problem document.
            await self.app(scope, receive, send)
            return
        scope["route"] = self.route
        response = selection_response(selection, conn.headers.get("if-none-match"))
        await response(scope, receive, send)


__all__ = [
    "AuthBeforeBody",
    "BodyLimitMiddleware",
    "MetricsMiddleware",
    "RequestContextMiddleware",
    "SelectionReads",
]
