"""Reading a stream: the selection (with ETag), the event log and the status.

``GET /selected`` is what polling clients call, many times a second, while the
stream is being written; ``api/middleware.py`` (``SelectionReads``) answers
its plain case ahead of the router with the very response the route gives.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response
from starlette.routing import BaseRoute

from featurestream.api.deps import AUTHENTICATED, EngineDep, StreamIdPath
from featurestream.api.openapi import problem_responses
from featurestream.api.routes.history import past_selection_response
from featurestream.api.schemas import EventsPublic, SelectionPublic, StatusPublic
from featurestream.engine import StoredSelection, wire

router = APIRouter(prefix="/v1/streams", tags=["selection"], dependencies=AUTHENTICATED)

SELECTED_PATH = "/v1/streams/{stream_id}/selected"


def selection_response(s: StoredSelection, if_none_match: str | None) -> Response:
    """The selection JSON with its version as ETag, or 304 when the client has it."""
    etag = f'"{s.version}"'
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if if_none_match is not None and etag in {t.strip() for t in if_none_match.split(",")}:
        return Response(status_code=304, headers=headers)
    return Response(s.document, media_type="application/json", headers=headers)


@router.get(
    "/{stream_id}/selected",
    response_model=SelectionPublic,
    responses={
        304: {"description": "Not modified since the version in If-None-Match."},
        **problem_responses(
            {
                404: "No such stream (`stream-not-found`), or `version` is beyond the "
                "current version (`version-not-found`).",
                410: "The history at `version` is no longer kept (`history-trimmed`).",
            }
        ),
    },
)
async def get_selected(
    stream_id: StreamIdPath,
    engine: EngineDep,
    if_none_match: Annotated[str | None, Header()] = None,
    version: Annotated[int | None, Query(ge=0, le=2**63 - 1)] = None,
) -> Response:
    """The current selection in the selector's own order; ETag is the version.

    With ``version``, the selection as it was after that version, rebuilt from
    the event log (see ``GET /history``): names in alphabetical order, with
    scores only when ``version`` is the current one.
    """
    if version is not None:
        return past_selection_response(await engine.selection_at(stream_id, version))
    return selection_response(await engine.selection(stream_id), if_none_match)


@router.get(
    "/{stream_id}/events",
    response_model=EventsPublic,
    responses=problem_responses(
        {410: "The events after `after` are no longer kept (`history-trimmed`)."}
    ),
)
async def get_events(
    stream_id: StreamIdPath,
    engine: EngineDep,
    # Each part is at most 2**63 - 1 (checked by the engine): the schema allows 18 digits.
    after: Annotated[
        str | None,
        Query(
            max_length=64,
            pattern=r"^\d+-\d+$",
            json_schema_extra={"pattern": r"^\d{1,18}-\d{1,18}$"},
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> EventsPublic:
    """The decision log in order; page with ``after`` = the last event id you saw."""
    return EventsPublic(**wire.event_page(await engine.events(stream_id, after, limit)))


@router.get("/{stream_id}/status", response_model=StatusPublic)
async def get_status(stream_id: StreamIdPath, engine: EngineDep) -> StatusPublic:
    """Counters of the selector (features seen/accepted/rejected, instances, wealth...).

    While the selector warns about something, a ``warnings`` list of ``{code,
    message}`` follows them (e.g. ``untestable-tests``: more than 10% of the
    conditional-independence tests could not be made).
    """
    return StatusPublic(**wire.status(await engine.status(stream_id)))


def selected_route() -> BaseRoute:
    """The ``GET /selected`` route (its path labels the metrics of the reads answered ahead)."""
    for route in router.routes:
        if getattr(route, "path", None) == SELECTED_PATH and "GET" in getattr(route, "methods", ()):
            return route
    raise LookupError(SELECTED_PATH)
