"""The FastAPI application factory."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from featurestream import __version__
from featurestream.api import openapi as api_document
from featurestream.api import problems, schemas, ui, ws
from featurestream.api.auth import KeyRing
from featurestream.api.metrics import Metrics
from featurestream.api.middleware import (
    AuthBeforeBody,
    BodyLimitMiddleware,
    ContentTypeGate,
    MetricsMiddleware,
    RequestContextMiddleware,
    SelectionReads,
)
from featurestream.api.routes import (
    evaluation,
    features,
    history,
    instances,
    ops,
    selection,
    streams,
)
from featurestream.config import Settings
from featurestream.engine import StreamEngine
from featurestream.engine.compute import open_compute
from featurestream.logs import configure_logging
from featurestream.store import StateStore, open_store

log = logging.getLogger("featurestream")


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
        compute = open_compute(
            settings.compute_workers,
            settings.cache_streams,
            settings.cache_bytes,
            log_level=settings.log_level,
        )
        await compute.start()
        app.state.engine = StreamEngine(st, settings, compute=compute)
        app.state.ws_sessions = ws.Sessions()
        metrics.engine = app.state.engine
        metrics.ws = app.state.ws_sessions
        watcher = asyncio.get_running_loop().create_task(
            _watch_keys(keys, app.state.ws_sessions), name="featurestream-keys"
        )
        if settings.warm_kernels:
            metrics.kernels_warm = False
            metrics.warming = True

            def warmed(ok: bool) -> None:
                metrics.kernels_warm = ok
                metrics.warming = False

            compute.warm(warmed)
        log.info("featurestream %s serving on store %s", __version__, settings.store_kind)
        try:
            yield
        finally:
            watcher.cancel()
            with suppress(asyncio.CancelledError):
                await watcher
            # WebSocket sessions first: they answer what they read, then close (1001).
            await app.state.ws_sessions.close_all()
            compute.close()
            await st.close()

    app = FastAPI(
        title="featurestream",
        version=__version__,
        summary="Streaming feature selection: online selectors over feature and instance "
        "streams, with state in Redis.",
        lifespan=lifespan,
        # /docs is served by api/ui with local assets (no CDN); there is no /redoc.
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.keys = keys
    problems.install(app)
    for module in (streams, features, instances, selection, history, evaluation, ws, ops):
        app.include_router(module.router)
    ui.install(app)
    # Innermost: the polled read, answered ahead of the router (see api/middleware.py).
    app.add_middleware(SelectionReads, route=selection.selected_route())
    app.add_middleware(
        BodyLimitMiddleware, limit=settings.max_request_bytes, timeout=settings.body_timeout
    )
    # Outside the body limit: a request without a valid key is refused before its body
    # is read at all.
    app.add_middleware(AuthBeforeBody)
    app.add_middleware(ContentTypeGate)
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
        # The algorithms a stream can be created with: any other name is refused.
        names = sorted(a.name for a in StreamEngine.algorithms())
        components["StreamCreate"]["properties"]["algorithm"]["enum"] = names
        app.openapi_schema = api_document.complete(spec)
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
    return app


KEYS_WATCH_SECONDS = 1.0


async def _watch_keys(keys: KeyRing, sessions: ws.Sessions) -> None:
    """Re-read the keys file when it changes, requests or not; close revoked WebSockets.

    Every process runs its own watcher, so a revocation reaches the WebSockets
    of every worker within about ``KEYS_WATCH_SECONDS``.
    """
    if not keys.enabled:
        return
    seen = keys.generation
    while True:
        await asyncio.sleep(KEYS_WATCH_SECONDS)
        try:
            keys.maybe_reload()
            if keys.generation != seen:
                seen = keys.generation
                await sessions.revoke(keys.valid)
        except Exception:  # the watcher must outlive any surprise; the next tick retries
            log.exception("API keys watch failed")


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
    """Factory for ``uvicorn --factory``: settings from the environment, JSON logs.

    The objects that exist once the app is built (modules, the app, its routes)
    live as long as the process: ``gc.freeze`` moves them out of the cyclic
    collector's sight, once, at start-up.
    """
    settings = Settings()
    configure_logging(settings.log_level)
    app = create_app(settings)
    gc.freeze()
    return app


__all__ = ["app_from_env", "create_app"]
