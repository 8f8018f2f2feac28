"""HTTP and WebSocket layer: schemas, routes, problem mapping."""

from __future__ import annotations

from featurestream.api.app import create_app

__all__ = ["create_app"]
