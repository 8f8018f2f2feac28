"""Dependencies shared by the routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from featurestream.streams import StreamEngine

STREAM_ID_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"


def get_engine(request: Request) -> StreamEngine:
    engine: StreamEngine = request.app.state.engine
    return engine


EngineDep = Annotated[StreamEngine, Depends(get_engine)]
StreamIdPath = Annotated[str, Path(pattern=STREAM_ID_PATTERN, description="Stream id.")]

__all__ = ["STREAM_ID_PATTERN", "EngineDep", "StreamIdPath", "get_engine"]
