"""The FastAPI application factory."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from featurestream import __version__
from featurestream.api import problems, schemas
from featurestream.api.auth import KeyRing
from featurestream.api.metrics import Metrics, MetricsMiddleware
from featurestream.api.routes import features, instances, ops, selection, streams, ws
from featurestream.config import Settings
from featurestream.errors import FeatureStreamError, PayloadTooLarge, RequestTimeout
from featurestream.logs import RequestContextMiddleware, configure_logging
from featurestream.store.base import StateStore, open_store
from featurestream.streams import StreamEngine

log = logging.getLogger("featurestream")


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


def create_app(settings: Settings | None = None, *, store: StateStore | None = None) -> FastAPI:
    """Build the app; its lifespan opens and closes the store named by the settings."""
    settings = settings or Settings()
    metrics = Metrics()

    # Fail at startup, not on the first request, when the keys file is unusable.
    keys = KeyRing.from_file(settings.api_keys_file) if settings.api_keys_file else KeyRing()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        _reload_keys_on_sighup(keys)
        st = store if store is not None else open_store(settings)
        await st.open()
        app.state.engine = StreamEngine(st, settings)
        app.state.ws_sessions = ws.Sessions()
        metrics.engine = app.state.engine
        metrics.ws = app.state.ws_sessions
        log.info("featurestream %s serving on store %s", __version__, settings.store_kind)
        try:
            yield
        finally:
            # WebSocket sessions first: they answer what they read, then close (1001).
            await app.state.ws_sessions.close_all()
            await st.close()

    app = FastAPI(
        title="featurestream",
        version=__version__,
        summary="Streaming feature selection: online selectors over feature and instance "
        "streams, with state in Redis.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.keys = keys
    problems.install(app)
    for module in (streams, features, instances, selection, ws, ops):
        app.include_router(module.router)
    # Innermost: the polled read, answered ahead of the router (routes/selection.py).
    app.add_middleware(selection.SelectionReads, route=selection.selected_route())
    app.add_middleware(
        BodyLimitMiddleware, limit=settings.max_request_bytes, timeout=settings.body_timeout
    )
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    # Outermost: every log line of a request, and its response, carry the request id.
    app.add_middleware(RequestContextMiddleware)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        spec = get_openapi(
            title=app.title, version=app.version, summary=app.summary, routes=app.routes
        )
        components = spec.setdefault("components", {}).setdefault("schemas", {})
        for model in (schemas.FeatureBatch, schemas.GroupBatch, schemas.InstanceBatch):
            defs = model.model_json_schema(ref_template="#/components/schemas/{model}")
            for name, sub in defs.pop("$defs", {}).items():
                components.setdefault(name, sub)
            components[model.__name__] = defs
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _reload_keys_on_sighup(keys: KeyRing) -> None:
    if not keys.enabled:
        return
    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, keys.reload)
    except (NotImplementedError, RuntimeError, ValueError):
        # Not the main thread (tests), or a platform without SIGHUP: the file
        # watch (checked on requests) still rotates keys.
        log.debug("SIGHUP reload of API keys unavailable here")


def app_from_env() -> FastAPI:
    """Factory for ``uvicorn --factory``: settings from the environment, JSON logs."""
    settings = Settings()
    configure_logging(settings.log_level)
    return create_app(settings)


__all__ = ["BodyLimitMiddleware", "app_from_env", "create_app"]
