"""Feature-stream writes: columns (JSON dense/sparse or .npy) and whole groups."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from featurestream.api import arrays, bodies
from featurestream.api.deps import AUTHENTICATED, EngineDep, StreamIdPath
from featurestream.api.problems import PROBLEM_MEDIA_TYPE
from featurestream.api.schemas import FeatureBatch, FeaturesAppended, GroupBatch
from featurestream.engine import WriteResult, wire
from featurestream.errors import InvalidInput, UnsupportedMediaType

router = APIRouter(prefix="/v1/streams", tags=["feature streams"], dependencies=AUTHENTICATED)


def _body_doc(model: str, npy: bool, npz: bool = False) -> dict[str, Any]:
    content: dict[str, Any] = {
        "application/json": {"schema": {"$ref": f"#/components/schemas/{model}"}}
    }
    if npy:
        content[bodies.NPY_MEDIA_TYPE] = {"schema": {"type": "string", "format": "binary"}}
    if npz:
        content[bodies.NPZ_MEDIA_TYPE] = {"schema": {"type": "string", "format": "binary"}}
    return {"requestBody": {"required": True, "content": content}}


def written(result: WriteResult) -> Response:
    headers = {"Idempotent-Replay": "true"} if result.replayed else {}
    if result.problem is not None:
        # The seq was used up by a refused WebSocket frame: answer with its problem.
        return Response(
            wire.replayed_problem(result.problem),
            status_code=result.problem.status,
            media_type=PROBLEM_MEDIA_TYPE,
            headers=headers,
        )
    return Response(result.body, media_type="application/json", headers=headers)


@router.post(
    "/{stream_id}/features",
    response_model=FeaturesAppended,
    openapi_extra=_body_doc("FeatureBatch", npy=True, npz=True)
    | {
        "parameters": [
            {
                "name": "X-Feature-Names",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
                "description": "npy body: comma-separated names",
            },
            {
                "name": "X-Seq",
                "in": "header",
                "required": False,
                "schema": {"type": "integer", "minimum": 1},
            },
            {"name": "X-Producer", "in": "header", "required": False, "schema": {"type": "string"}},
        ]
    },
)
async def add_features(stream_id: StreamIdPath, request: Request, engine: EngineDep) -> Response:
    """Append feature columns in order; each gets a decision."""
    body = await request.body()
    kind = bodies.media_type(request)
    if kind in (bodies.NPY_MEDIA_TYPE, bodies.NPZ_MEDIA_TYPE):
        if kind == bodies.NPZ_MEDIA_TYPE:
            # Rows are instances, columns features (like .npy): CSC in, CSR rows out.
            X = arrays.load_npz(body, engine.settings.max_request_bytes).T.tocsr()
        else:
            arr = arrays.load_npy(body)
            X = arr[:, None].T if arr.ndim == 1 else arr.T
        names = bodies.header_list(request, "X-Feature-Names")
        if names is not None and len(names) != X.shape[0]:
            raise InvalidInput(
                f"X-Feature-Names has {len(names)} names for {X.shape[0]} columns.",
                field="X-Feature-Names",
            )
        result = await engine.add_features(
            stream_id,
            names,
            X,
            producer=request.headers.get("X-Producer", "default"),
            seq=bodies.header_int(request, "X-Seq"),
        )
        return written(result)
    if kind != "application/json":
        raise UnsupportedMediaType(
            kind, ("application/json", bodies.NPY_MEDIA_TYPE, bodies.NPZ_MEDIA_TYPE)
        )
    batch = FeatureBatch.model_validate_json(body)
    n = await engine.n_instances(stream_id)
    X = bodies.columns_to_matrix(batch.features, n)
    groups = [f.group for f in batch.features]
    result = await engine.add_features(
        stream_id,
        [f.name for f in batch.features],
        X,
        groups=groups if any(g is not None for g in groups) else None,
        producer=batch.producer,
        seq=batch.seq,
    )
    return written(result)


@router.post(
    "/{stream_id}/groups",
    response_model=FeaturesAppended,
    openapi_extra=_body_doc("GroupBatch", npy=False),
)
async def add_groups(stream_id: StreamIdPath, request: Request, engine: EngineDep) -> Response:
    """Append whole groups of features (group-SAOLA); groups and features keep their order."""
    if bodies.media_type(request) != "application/json":
        raise UnsupportedMediaType(bodies.media_type(request), ("application/json",))
    batch = GroupBatch.model_validate_json(await request.body())
    features, groups = [], []
    for g in batch.groups:
        for f in g.features:
            if f.group is not None and f.group != g.name:
                raise InvalidInput(
                    f"Feature {f.name!r} names group {f.group!r} inside group {g.name!r}.",
                    field="groups",
                )
            features.append(f)
            groups.append(g.name)
    n = await engine.n_instances(stream_id)
    X = bodies.columns_to_matrix(features, n)
    result = await engine.add_features(
        stream_id,
        [f.name for f in features],
        X,
        groups=groups,
        producer=batch.producer,
        seq=batch.seq,
    )
    return written(result)
