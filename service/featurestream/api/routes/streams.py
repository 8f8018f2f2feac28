"""Stream CRUD and the algorithm catalogue."""

from __future__ import annotations

import dataclasses
import inspect

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
from featurestream.errors import StreamNotFound
from featurestream.selectors import REGISTRY
from featurestream.streams import new_stream_id

router = APIRouter(prefix="/v1", tags=["streams"], dependencies=AUTHENTICATED)


@router.get("/algorithms", response_model=AlgorithmsPublic)
async def list_algorithms() -> AlgorithmsPublic:
    out = []
    for name, cls in sorted(REGISTRY.items()):
        ptype = cls.params_type
        doc = inspect.getdoc(cls) or ""
        defaults = {
            f.name: f.default
            for f in dataclasses.fields(ptype)
            if f.default is not dataclasses.MISSING
        }
        out.append(
            AlgorithmPublic(
                name=name,
                kind=cls.kind,
                title=ptype.algorithm,
                summary=doc.split("\n\n", 1)[0].replace("\n", " "),
                params_schema=ptype.json_schema(),
                defaults=defaults,
                supports_groups=bool(getattr(cls, "uses_groups", False)),
            )
        )
    return AlgorithmsPublic(algorithms=out)


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
        feature_names=body.feature_names,
    )
    response.headers["Location"] = f"/v1/streams/{created['id']}"
    return StreamPublic(**created)


@router.get("/streams", response_model=StreamsPublic)
async def list_streams(engine: EngineDep, tenant: TenantDep) -> StreamsPublic:
    return StreamsPublic(streams=[StreamPublic(**s) for s in await engine.list(tenant)])


@router.get("/streams/{stream_id}", response_model=StreamPublic)
async def get_stream(stream_id: StreamIdPath, engine: EngineDep) -> StreamPublic:
    return StreamPublic(**await engine.get(stream_id))


@router.delete("/streams/{stream_id}", status_code=204, response_class=Response)
async def delete_stream(stream_id: StreamIdPath, engine: EngineDep) -> Response:
    if not await engine.delete(stream_id):
        raise StreamNotFound(stream_id)
    return Response(status_code=204)
