"""Stream CRUD and the algorithm catalogue."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse

from featurestream.api.deps import AUTHENTICATED, EngineDep, StreamIdPath, TenantDep
from featurestream.api.openapi import problem_responses
from featurestream.api.schemas import (
    LABELS_MAX,
    AlgorithmPublic,
    AlgorithmsPublic,
    StreamCreate,
    StreamPublic,
    StreamsPublic,
)
from featurestream.api.tenancy import scoped_id
from featurestream.engine import new_stream_id, wire
from featurestream.errors import InvalidInput, StreamNotFound

router = APIRouter(prefix="/v1", tags=["streams"], dependencies=AUTHENTICATED)

LABEL_FILTER_PATTERN = "^[^:]+:"


@router.get("/algorithms", response_model=AlgorithmsPublic)
async def list_algorithms(engine: EngineDep) -> AlgorithmsPublic:
    return AlgorithmsPublic(
        algorithms=[AlgorithmPublic(**wire.algorithm(a)) for a in engine.algorithms()]
    )


@router.post(
    "/streams",
    status_code=201,
    response_model=StreamPublic,
    responses=problem_responses(
        {
            409: "A stream with this id exists (`stream-exists`).",
            422: "Invalid input (`invalid-input`), or parameters the algorithm does not "
            "take (`invalid-parameter`).",
            429: "The tenant holds the most streams it may (`quota-exceeded`).",
        }
    ),
)
async def create_stream(body: StreamCreate, engine: EngineDep, tenant: TenantDep) -> JSONResponse:
    public = body.id or new_stream_id()
    created = await engine.create(
        stream_id=scoped_id(tenant, public),
        public_id=public,
        tenant=tenant,
        algorithm=body.algorithm,
        params=body.params,
        target=body.target,
        target_type=body.target_type,
        feature_names=body.feature_names,
        labels=body.labels,
        ttl_seconds=body.ttl_seconds,
    )
    return JSONResponse(
        StreamPublic(**wire.stream(created)).document(),
        status_code=201,
        headers={"Location": f"/v1/streams/{created.id}"},
    )


@router.get("/streams", response_model=StreamsPublic)
async def list_streams(
    engine: EngineDep,
    tenant: TenantDep,
    label: Annotated[
        list[str] | None,
        Query(
            description="Only the streams with this label, as key:value (repeat: all of them).",
            max_length=LABELS_MAX,
            # Checked below (422 naming `label`): a key, a colon, then the value.
            json_schema_extra={"items": {"type": "string", "pattern": LABEL_FILTER_PATTERN}},
        ),
    ] = None,
) -> JSONResponse:
    wanted: dict[str, str] = {}
    for pair in label or ():
        key, sep, value = pair.partition(":")
        if not sep or not key:
            raise InvalidInput(f"label must be key:value; got {pair!r}.", field="label")
        wanted[key] = value
    streams = [
        StreamPublic(**wire.stream(s, names=False)).document()
        for s in await engine.list(tenant)
        if all((s.labels or {}).get(k) == v for k, v in wanted.items())
    ]
    return JSONResponse({"streams": streams})


@router.get("/streams/{stream_id}", response_model=StreamPublic)
async def get_stream(stream_id: StreamIdPath, engine: EngineDep) -> JSONResponse:
    # The model checks and documents the resource; the extras it lacks are left out.
    return JSONResponse(StreamPublic(**wire.stream(await engine.get(stream_id))).document())


@router.delete("/streams/{stream_id}", status_code=204, response_class=Response)
async def delete_stream(stream_id: StreamIdPath, engine: EngineDep) -> Response:
    if not await engine.delete(stream_id):
        raise StreamNotFound(stream_id)
    return Response(status_code=204)
