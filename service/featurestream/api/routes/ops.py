"""Operational endpoints: liveness, readiness, metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from featurestream.api.metrics import render
from featurestream.api.problems import problem
from featurestream.api.schemas import Health

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """The process is up."""
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Health,
    responses={
        503: {
            "description": "Store down (`store-unavailable`), or the compiled kernels are "
            "still loading (`warming-up`)."
        }
    },
)
async def readyz(request: Request) -> Response:
    """The state store answers and the start-up warm-up (if on) has ended."""
    if not await request.app.state.engine.ping():
        return problem(
            503,
            "store-unavailable",
            "State store unavailable",
            "The state store does not answer.",
            {"Retry-After": "1"},
        )
    if request.app.state.metrics.warming:
        return problem(
            503,
            "warming-up",
            "Warming up",
            "The compiled kernels are still loading; the first writes would wait for them.",
            {"Retry-After": "1"},
        )
    return Response(Health(status="ready").model_dump_json(), media_type="application/json")


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus text exposition."""
    return Response(render(request.app.state.metrics), media_type="text/plain; version=0.0.4")
