"""Dependencies shared by the routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from featurestream.api.tenancy import STREAM_ID_PATTERN, StreamRef, TenantDep, current_tenant
from featurestream.engine import StreamEngine


async def get_engine(request: Request) -> StreamEngine:
    engine: StreamEngine = request.app.state.engine
    return engine


EngineDep = Annotated[StreamEngine, Depends(get_engine)]
# The stream named in the path, scoped to the caller's tenant (see api/tenancy.py).
StreamIdPath = StreamRef
# Every /v1 router requires a tenant when API keys are configured.
AUTHENTICATED = [Depends(current_tenant)]

__all__ = [
    "AUTHENTICATED",
    "STREAM_ID_PATTERN",
    "EngineDep",
    "StreamIdPath",
    "TenantDep",
    "get_engine",
]
