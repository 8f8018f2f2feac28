"""``GET /evaluation``: how good a stream's current selection is.

What is computed, for which streams, and its bounds: ``engine/evaluation.py``.
The scikit-learn fits run in a worker thread (``offload.compute``), never on
the event loop.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from featurestream import offload
from featurestream.api.deps import AUTHENTICATED, EngineDep, StreamIdPath, TenantDep
from featurestream.api.openapi import problem_responses
from featurestream.engine.evaluation import MAX_FOLDS, MAX_REPEATS, MODELS

router = APIRouter(prefix="/v1/streams", tags=["history"], dependencies=AUTHENTICATED)


class EvaluationPublic(BaseModel):
    """`kind` `cross_validation` (feature streams) fills `model` to `best_single`;
    `prequential` (supervised instance streams) fills `instances`, `accuracy`, `recent`."""

    model_config = ConfigDict(extra="allow")

    version: int
    kind: str
    score_kind: str
    model: str | None = None
    folds: int | None = None
    repeats: int | None = None
    seed: int | None = None
    features: int | None = None
    score: float | None = None
    fold_scores: list[float] | None = None
    best_single: dict[str, Any] | None = None
    instances: int | None = None
    accuracy: float | None = None
    recent: dict[str, Any] | None = None


@router.get(
    "/{stream_id}/evaluation",
    response_model=EvaluationPublic,
    responses=problem_responses(
        {
            413: "Too expensive to compute (`limit-exceeded`: its model fits; "
            "`request-too-expensive`: the time budget once running): fewer folds or repeats.",
            429: "Too many evaluations of the tenant, or in all, under way (`quota-exceeded`).",
            422: "Bad parameters (`invalid-input`), or a stream that cannot be evaluated "
            "(`evaluation-unavailable`; `invalid-input` naming `y`: too few instances of a "
            "class for the folds).",
        }
    ),
)
async def get_evaluation(
    stream_id: StreamIdPath,
    engine: EngineDep,
    tenant: TenantDep,
    model: Annotated[str, Query(max_length=32, json_schema_extra={"enum": list(MODELS)})] = "knn",
    folds: Annotated[int, Query(ge=2, le=MAX_FOLDS)] = 5,
    repeats: Annotated[int, Query(ge=1, le=MAX_REPEATS)] = 1,
) -> JSONResponse:
    """How good the current selection is: a cross-validated score, or prequential accuracy.

    Feature streams: the cross-validated score of ``model`` (``knn``, ``logistic``,
    ``naive_bayes``, ``linear``) on the current selection, per fold, beside the best
    single selected feature. Supervised instance streams: the prequential
    (test-then-train) accuracy, overall and over the last 1,000 instances.
    """
    doc: dict[str, Any] = await engine.evaluation(
        stream_id, model, folds, repeats, offload.compute, tenant=tenant
    )
    return JSONResponse(doc)
