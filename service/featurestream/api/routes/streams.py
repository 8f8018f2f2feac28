"""Stream CRUD and the algorithm catalogue."""

from __future__ import annotations

from fastapi import APIRouter, Response

from featurestream.api.deps import AUTHENTICATED, EngineDep, StreamIdPath, TenantDep
from featurestream.api.schemas import (
    AlgorithmPublic,
    AlgorithmsPublic,
    StreamCreate,
    StreamPublic,
    StreamsPublic,
)
from featurestream.api.tenancy import scoped_id
from featurestream.engine import new_stream_id, wire
from featurestream.errors import StreamNotFound

router = APIRouter(prefix="/v1", tags=["streams"], dependencies=AUTHENTICATED)


@router.get("/algorithms", response_model=AlgorithmsPublic)
async def list_algorithms(engine: EngineDep) -> AlgorithmsPublic:
    return AlgorithmsPublic(
        algorithms=[AlgorithmPublic(**wire.algorithm(a)) for a in engine.algorithms()]
    )


@router.post("/streams", status_code=201, response_model=StreamPublic)
async def create_stream(
    body: StreamCreate, engine: EngineDep, tenant: TenantDep, response: Response
) -> StreamPublic:
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
    )
    response.headers["Location"] = f"/v1/streams/{created.id}"
    return StreamPublic(**wire.stream(created))


@router.get("/streams", response_model=StreamsPublic)
async def list_streams(engine: EngineDep, tenant: TenantDep) -> StreamsPublic:
    return StreamsPublic(
        streams=[StreamPublic(**wire.stream(s)) for s in await engine.list(tenant)]
    )


@router.get("/streams/{stream_id}", response_model=StreamPublic)
async def get_stream(stream_id: StreamIdPath, engine: EngineDep) -> StreamPublic:
    return StreamPublic(**wire.stream(await engine.get(stream_id)))


@router.delete("/streams/{stream_id}", status_code=204, response_class=Response)
async def delete_stream(stream_id: StreamIdPath, engine: EngineDep) -> Response:
    if not await engine.delete(stream_id):
        raise StreamNotFound(stream_id)
    return Response(status_code=204)
