"""A stream's past: the changes of its selection, and their stability.

``GET /selected?version=V`` (in ``selection.py``, beside the current
selection) renders its answer with :func:`past_selection_response`. What can
be rebuilt and what answers ``410`` is explained in ``engine/history.py``.
"""

from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import APIRouter, Query, Response
from pydantic import BaseModel

from featurestream.api.deps import AUTHENTICATED, EngineDep, StreamIdPath
from featurestream.api.openapi import problem_responses
from featurestream.engine import Selection
from featurestream.engine.history import MAX_LAST

router = APIRouter(prefix="/v1/streams", tags=["history"], dependencies=AUTHENTICATED)


class MovedPublic(BaseModel):
    name: str
    before: float
    after: float


class DriftPublic(BaseModel):
    detector: str
    instances_seen: int
    statistic: float
    moved: list[MovedPublic]
    reset: bool


class ChangePublic(BaseModel):
    version: int
    at: str | None
    added: list[str]
    removed: list[str]
    size: int
    # The drifts detected in this version (a version with a drift is listed even
    # when the set did not move: then nothing is added or removed).
    drifts: list[DriftPublic] = []


class HistoryPublic(BaseModel):
    changes: list[ChangePublic]
    next: int | None
    version: int


class StabilityPublic(BaseModel):
    versions: list[int]
    sizes: list[int]
    jaccard: list[float]
    nogueira: float | None
    features: int


def past_selection_response(s: Selection) -> Response:
    """The selection document of a past version (``updated_at``: that version's commit time)."""
    doc = {
        "version": s.version,
        "features": [
            {"name": f.name, "score": f.score, **({"group": f.group} if f.group else {})}
            for f in s.features
        ],
        "updated_at": s.updated_at or None,
    }
    # A past selection never changes; the current one may be read again later.
    return Response(orjson.dumps(doc), media_type="application/json")


@router.get(
    "/{stream_id}/history",
    response_model=HistoryPublic,
    responses=problem_responses(
        {410: "The history after `after_version` is no longer kept (`history-trimmed`)."}
    ),
)
async def get_history(
    stream_id: StreamIdPath,
    engine: EngineDep,
    after_version: Annotated[int | None, Query(ge=0, le=2**63 - 1)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> HistoryPublic:
    """The changes of the selected set in order: names added and removed, new size.

    One entry per version that changed the set of selected names, or in which
    the stream's drift watch detected a drift (``drifts``). Page with
    ``after_version`` = ``next``; ``next`` is null once the page reaches the
    stream's current ``version`` (poll again later with ``after_version`` =
    ``version``).
    """
    page = await engine.history(stream_id, after_version, limit)
    return HistoryPublic(
        changes=[
            ChangePublic(
                version=c.version,
                at=c.at,
                added=list(c.added),
                removed=list(c.removed),
                size=c.size,
                drifts=[DriftPublic(**d) for d in c.drifts],
            )
            for c in page.changes
        ],
        next=page.next,
        version=page.version,
    )


@router.get("/{stream_id}/stability", response_model=StabilityPublic)
async def get_stability(
    stream_id: StreamIdPath,
    engine: EngineDep,
    last: Annotated[int, Query(ge=2, le=MAX_LAST)] = 20,
) -> StabilityPublic:
    """Jaccard and Nogueira's stability of the selections after the last changes.

    The selections after the last ``last`` changes, oldest first: the Jaccard
    similarity of each with the next, and Nogueira's estimator over the
    ``features`` the stream had seen (null with fewer than two selections).
    """
    s = await engine.stability(stream_id, last)
    return StabilityPublic(
        versions=list(s.versions),
        sizes=list(s.sizes),
        jaccard=list(s.jaccard),
        nogueira=s.nogueira,
        features=s.features,
    )
