"""Instance-stream writes over HTTP (JSON, .npy or sparse .npz batches)."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter, Request, Response

from featurestream.api import arrays, bodies
from featurestream.api.deps import AUTHENTICATED, EngineDep, StreamIdPath
from featurestream.api.routes.features import _body_doc, written
from featurestream.api.schemas import InstanceBatch, InstancesAppended
from featurestream.errors import InvalidInput, UnsupportedMediaType

router = APIRouter(prefix="/v1/streams", tags=["instance streams"], dependencies=AUTHENTICATED)


@router.post(
    "/{stream_id}/instances",
    response_model=InstancesAppended,
    openapi_extra=_body_doc("InstanceBatch", npy=True, npz=True),
)
async def add_instances(stream_id: StreamIdPath, request: Request, engine: EngineDep) -> Response:
    """Apply a batch of instances as one batch (the batch boundary is recorded)."""
    body = await request.body()
    kind = bodies.media_type(request)
    if kind in (bodies.NPY_MEDIA_TYPE, bodies.NPZ_MEDIA_TYPE):
        label = request.headers.get("X-Label-Column")
        if label not in (None, "last", "none"):
            raise InvalidInput("X-Label-Column must be 'last' or absent.", field="X-Label-Column")
        A: Any
        if kind == bodies.NPY_MEDIA_TYPE:
            arr = arrays.load_npy(body)
            A = arr[None, :] if arr.ndim == 1 else arr
        else:
            A = arrays.load_sparse_instances(body, engine.settings.max_request_bytes)
        X, y = arrays.split_labels(A, label == "last", "With X-Label-Column: last, the body")
        result = await engine.add_instances(
            stream_id,
            np.ascontiguousarray(X) if isinstance(X, np.ndarray) else X,
            y,
            producer=request.headers.get("X-Producer", "default"),
            seq=bodies.header_int(request, "X-Seq"),
        )
        return written(result)
    if kind != "application/json":
        raise UnsupportedMediaType(
            kind, ("application/json", bodies.NPY_MEDIA_TYPE, bodies.NPZ_MEDIA_TYPE)
        )
    batch = InstanceBatch.model_validate_json(body)
    widths = {len(row) for row in batch.X}
    if len(widths) != 1:
        raise InvalidInput("Every row of X must have the same length.", field="X")
    X = np.asarray(batch.X, dtype=np.float64)
    y = None if batch.y is None else np.asarray(batch.y, dtype=np.float64)
    result = await engine.add_instances(stream_id, X, y, producer=batch.producer, seq=batch.seq)
    return written(result)
