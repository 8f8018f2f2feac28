"""The WebSocket API: the endpoint (``route.py``), its sessions (``session.py``) and
the decoding of frames (``messages.py``)."""

from __future__ import annotations

from featurestream.api.ws.route import router
from featurestream.api.ws.session import Phase, Session, Sessions, WebSocketStats

__all__ = ["Phase", "Session", "Sessions", "WebSocketStats", "router"]
