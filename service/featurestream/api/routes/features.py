"""Feature-stream writes: columns (JSON dense/sparse or .npy) and whole groups."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from featurestream import offload
from featurestream.api import arrays, bodies, jsonbodies
from featurestream.api.deps import AUTHENTICATED, EngineDep, StreamIdPath
from featurestream.api.npz import load_npz_columns
from featurestream.api.openapi import problem_responses
from featurestream.api.problems import PROBLEM_MEDIA_TYPE
from featurestream.api.producers import PRODUCER_PATTERN
from featurestream.api.schemas import FeaturesAppended
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


# The idempotency headers of every write (docs/api.md, "Producers and seq").
WRITE_HEADERS: list[dict[str, Any]] = [
    {
        "name": "X-Seq",
        "in": "header",
        "required": False,
        "schema": {"type": "integer", "minimum": 1},
        "description": "the write's seq (any body type; a JSON body's seq must agree)",
    },
    {
        "name": "X-Producer",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "pattern": PRODUCER_PATTERN},
        "description": "the producer (any body type; a JSON body's must agree)",
    },
]

WRITE_RESPONSES = problem_responses(
    {
        409: "Not a stream of this kind (`wrong-stream-kind`), a seq used with other "
        "content (`seq-reused`) or out of order (`sequence-conflict`), or a write that "
        "lost a race (`concurrent-update`).",
        413: "The body is over the size limit (`payload-too-large`), holds more than a "
        "request may (`limit-exceeded`), or overran the write's time budget "
        "(`request-too-expensive`).",
        422: "Invalid input (`invalid-input`): a body that does not fit the stream (its "
        "instances or features), a header and the body that disagree, or an array that "
        "cannot be read; or values the selector cannot use (`numerically-unstable`).",
    }
)


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
    responses=WRITE_RESPONSES,
    openapi_extra=_body_doc("FeatureBatch", npy=True, npz=True)
    | {
        "parameters": [
            {
                "name": "X-Feature-Names",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
                "description": "npy or npz body: comma-separated names (npz: or names.npy "
                "inside); unnamed columns are named <producer>:<seq>:<i>",
            },
            *WRITE_HEADERS,
        ]
    },
)
async def add_features(stream_id: StreamIdPath, request: Request, engine: EngineDep) -> Response:
    """Append feature columns in order; each gets a decision."""
    body = await request.body()
    kind = bodies.media_type(request)
    if kind in (bodies.NPY_MEDIA_TYPE, bodies.NPZ_MEDIA_TYPE):
        bounds = arrays.Bounds.features(engine.settings)
        header_names = bodies.header_list(request, "X-Feature-Names")

        def load() -> tuple[Any, list[str] | None]:
            if kind == bodies.NPZ_MEDIA_TYPE:
                # Names may come inside the archive (names.npy) instead of the header.
                return load_npz_columns(body, bounds, header_names)
            return arrays.load_npy(body, bounds, vector="column").T, header_names

        X, names = await offload.run(arrays.decoded_size(body), load)
        if names is not None and len(names) != X.shape[0]:
            raise InvalidInput(
                f"X-Feature-Names has {len(names)} names for {X.shape[0]} columns.",
                field="X-Feature-Names",
            )
        producer, seq = bodies.write_ids(request)
        result = await engine.add_features(stream_id, names, X, producer=producer, seq=seq)
        return written(result)
    if kind != "application/json":
        raise UnsupportedMediaType(
            kind, ("application/json", bodies.NPY_MEDIA_TYPE, bodies.NPZ_MEDIA_TYPE)
        )
    batch = await offload.run(len(body), lambda: jsonbodies.feature_batch(body))
    producer, seq = bodies.write_ids(request, batch.producer, batch.seq)
    n = await engine.n_instances(stream_id)
    X = await offload.run(len(body), lambda: batch.columns.matrix(n))
    groups = batch.columns.groups
    result = await engine.add_features(
        stream_id,
        batch.columns.names,
        X,
        groups=groups if any(g is not None for g in groups) else None,
        producer=producer,
        seq=seq,
    )
    return written(result)


@router.post(
    "/{stream_id}/groups",
    response_model=FeaturesAppended,
    responses=WRITE_RESPONSES,
    openapi_extra=_body_doc("GroupBatch", npy=False) | {"parameters": WRITE_HEADERS},
)
async def add_groups(stream_id: StreamIdPath, request: Request, engine: EngineDep) -> Response:
    """Append whole groups of features (group-SAOLA); groups and features keep their order."""
    if bodies.media_type(request) != "application/json":
        raise UnsupportedMediaType(bodies.media_type(request), ("application/json",))
    body = await request.body()
    batch = await offload.run(len(body), lambda: jsonbodies.group_batch(body))
    producer, seq = bodies.write_ids(request, batch.producer, batch.seq)
    columns, groups = batch.columns, batch.group_names or []
    for name, own, group in zip(columns.names, columns.groups, groups, strict=True):
        if own is not None and own != group:
            raise InvalidInput(
                f"Feature {name!r} names group {own!r} inside group {group!r}.", field="groups"
            )
    n = await engine.n_instances(stream_id)
    X = await offload.run(len(body), lambda: columns.matrix(n))
    result = await engine.add_features(
        stream_id,
        columns.names,
        X,
        groups=groups,
        producer=producer,
        seq=seq,
    )
    return written(result)
