"""Reading a stream: the selection (with ETag), the event log and the status.

``GET /selected`` is what polling clients call, many times a second, while the
stream is being written. :class:`SelectionReads` answers it ahead of the router:
the plain case (an authorised caller, a stream that exists, a store that
answers) with the very response the route gives, at a fraction of the cost of
routing and dependency resolution. Everything else goes on to the route, which
renders the problem documents.
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Header, Query, Response
from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from featurestream.api.deps import AUTHENTICATED, EngineDep, StreamIdPath
from featurestream.api.schemas import EventsPublic, SelectionPublic, StatusPublic
from featurestream.api.tenancy import STREAM_ID_PATTERN, scoped_id, tenant_of
from featurestream.errors import FeatureStreamError
from featurestream.store.base import StreamSummary

router = APIRouter(prefix="/v1/streams", tags=["selection"], dependencies=AUTHENTICATED)

SELECTED_PATH = "/v1/streams/{stream_id}/selected"


def selection_response(s: StreamSummary, if_none_match: str | None) -> Response:
    """The selection JSON with its version as ETag, or 304 when the client has it."""
    etag = f'"{s.version}"'
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if if_none_match is not None and etag in {t.strip() for t in if_none_match.split(",")}:
        return Response(status_code=304, headers=headers)
    return Response(s.selection, media_type="application/json", headers=headers)


@router.get(
    "/{stream_id}/selected",
    response_model=SelectionPublic,
    responses={304: {"description": "Not modified since the version in If-None-Match."}},
)
async def get_selected(
    stream_id: StreamIdPath,
    engine: EngineDep,
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    """The current selection in the selector's own order; ETag is the version."""
    return selection_response(await engine.summary(stream_id), if_none_match)


@router.get("/{stream_id}/events", response_model=EventsPublic)
async def get_events(
    stream_id: StreamIdPath,
    engine: EngineDep,
    after: Annotated[str | None, Query(max_length=64, pattern=r"^\d+-\d+$")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> EventsPublic:
    """The decision log in order; page with ``after`` = the last event id you saw."""
    return EventsPublic(**await engine.events(stream_id, after, limit))


@router.get("/{stream_id}/status", response_model=StatusPublic)
async def get_status(stream_id: StreamIdPath, engine: EngineDep) -> StatusPublic:
    """Counters of the selector (features seen/accepted/rejected, instances, wealth...)."""
    return StatusPublic(**await engine.status(stream_id))


_SELECTED = re.compile("^/v1/streams/(" + STREAM_ID_PATTERN[1:-1] + ")/selected$")


class SelectionReads:
    """ASGI middleware: ``GET /selected`` of an existing stream, without the router.

    Sits inside the request-id, metrics and body-limit middlewares (the access
    log, the metrics under the route's own label and the request id are those
    of the route). A request it does not answer itself (another route, a method
    other than GET, a query string, a missing or bad key, an unknown stream, a
    store error) goes on unchanged to the app.
    """

    def __init__(self, app: ASGIApp, route: BaseRoute) -> None:
        self.app = app
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = (
            _SELECTED.match(scope["path"])
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
            summary = await conn.app.state.engine.summary(scoped_id(tenant, match[1]))
        except FeatureStreamError:
            # 401, 404, 503...: the route answers with its problem document.
            await self.app(scope, receive, send)
            return
        scope["route"] = self.route
        response = selection_response(summary, conn.headers.get("if-none-match"))
        await response(scope, receive, send)


def selected_route() -> BaseRoute:
    """The ``GET /selected`` route (its path labels the metrics of the reads answered here)."""
    for route in router.routes:
        if getattr(route, "path", None) == SELECTED_PATH and "GET" in getattr(route, "methods", ()):
            return route
    raise LookupError(SELECTED_PATH)
