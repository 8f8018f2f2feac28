"""Instance-stream writes over HTTP (JSON, .npy or sparse .npz batches)."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter, Request, Response

from featurestream import offload
from featurestream.api import arrays, bodies, jsonbodies, npz
from featurestream.api.deps import AUTHENTICATED, EngineDep, StreamIdPath
from featurestream.api.routes.features import WRITE_HEADERS, WRITE_RESPONSES, _body_doc, written
from featurestream.api.schemas import InstancesAppended
from featurestream.errors import InvalidInput, UnsupportedMediaType

router = APIRouter(prefix="/v1/streams", tags=["instance streams"], dependencies=AUTHENTICATED)


@router.post(
    "/{stream_id}/instances",
    response_model=InstancesAppended,
    responses=WRITE_RESPONSES,
    openapi_extra=_body_doc("InstanceBatch", npy=True, npz=True) | {"parameters": WRITE_HEADERS},
)
async def add_instances(stream_id: StreamIdPath, request: Request, engine: EngineDep) -> Response:
    """Apply a batch of instances as one batch (the batch boundary is recorded)."""
    body = await request.body()
    kind = bodies.media_type(request)
    if kind in (bodies.NPY_MEDIA_TYPE, bodies.NPZ_MEDIA_TYPE):
        label = request.headers.get("X-Label-Column")
        if label not in (None, "last", "none"):
            raise InvalidInput("X-Label-Column must be 'last' or absent.", field="X-Label-Column")
        bounds = arrays.Bounds.instances(engine.settings)

        def load() -> tuple[Any, Any]:
            if kind == bodies.NPY_MEDIA_TYPE:
                A = arrays.load_npy(body, bounds)
            else:
                A = npz.load_sparse_instances(body, bounds)
            # Splitting off the labels copies the matrix: beside the loop, too.
            X, y = arrays.split_labels(A, label == "last", "With X-Label-Column: last, the body")
            return (np.ascontiguousarray(X) if isinstance(X, np.ndarray) else X), y

        X, y = await offload.run(arrays.decoded_size(body), load)
        producer, seq = bodies.write_ids(request)
        result = await engine.add_instances(stream_id, X, y, producer=producer, seq=seq)
        return written(result)
    if kind != "application/json":
        raise UnsupportedMediaType(
            kind, ("application/json", bodies.NPY_MEDIA_TYPE, bodies.NPZ_MEDIA_TYPE)
        )
    batch = await offload.run(len(body), lambda: jsonbodies.instance_batch(body))
    producer, seq = bodies.write_ids(request, batch.producer, batch.seq)
    result = await engine.add_instances(
        stream_id, batch.rows(), batch.y, producer=producer, seq=seq
    )
    return written(result)
