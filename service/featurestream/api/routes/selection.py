"""Reading a stream: the selection (with ETag), the event log and the status."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response

from featurestream.api.deps import AUTHENTICATED, EngineDep, StreamIdPath
from featurestream.api.schemas import EventsPublic, SelectionPublic, StatusPublic

router = APIRouter(prefix="/v1/streams", tags=["selection"], dependencies=AUTHENTICATED)


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
    s = await engine.summary(stream_id)
    etag = f'"{s.version}"'
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if if_none_match is not None and etag in {t.strip() for t in if_none_match.split(",")}:
        return Response(status_code=304, headers=headers)
    return Response(s.selection, media_type="application/json", headers=headers)


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
