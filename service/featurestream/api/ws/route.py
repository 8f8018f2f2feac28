"""``WS /v1/streams/{id}/ws``: instance streams over WebSocket, and selection subscriptions.

The endpoint checks the stream id, the query (``producer``, ``seq``) and the
caller's key, then hands the connection to a :class:`Session`. On connect the
server sends the current selection; a client that sends no frames just
receives selection messages (feature streams too). Every message carries a
``type``: ``ack``, ``selection`` or ``error`` (see docs/api.md).

The API key comes in the ``Authorization`` header, or as ``?token=`` for
clients that cannot set headers; or, with ``?auth=message``, as the first
message, ``{"type": "auth", "key": "..."}``, sent within
``AUTH_MESSAGE_SECONDS``: that is how the web page keeps the key out of URLs
(and out of access logs and browser history).
"""

from __future__ import annotations

import asyncio

import orjson
from fastapi import APIRouter, WebSocket
from starlette.status import (
    WS_1000_NORMAL_CLOSURE,
    WS_1001_GOING_AWAY,
    WS_1008_POLICY_VIOLATION,
    WS_1011_INTERNAL_ERROR,
    WS_1013_TRY_AGAIN_LATER,
)

from featurestream.api.producers import connection_producer, producer_name
from featurestream.api.tenancy import (
    STREAM_ID_PATTERN,
    credential_of,
    scoped_id,
    valid_stream_id,
)
from featurestream.api.ws.session import Session, Sessions, error_text
from featurestream.errors import InvalidInput, Unauthorized

router = APIRouter(prefix="/v1/streams", tags=["websocket"])

# How long a connection with ``?auth=message`` may take to send its key.
AUTH_MESSAGE_SECONDS = 10.0
# The most characters of an auth message (a key is far shorter): larger ones are not parsed.
AUTH_MESSAGE_CHARS = 4096
AUTH_MODES = ("message",)

# The close codes a session ends with (docs/api.md lists them with their meaning).
CLOSE_CODES = (
    WS_1000_NORMAL_CLOSURE,
    WS_1001_GOING_AWAY,
    WS_1008_POLICY_VIOLATION,
    WS_1011_INTERNAL_ERROR,
    WS_1013_TRY_AGAIN_LATER,
)


def parse_query(websocket: WebSocket) -> tuple[str, int | None]:
    """The producer and starting seq of the query string; InvalidInput when malformed.

    A connection that names no producer gets one of its own (``ws-<uuid>``): the
    server tells it in its first message, so that it can resume.
    """
    given = websocket.query_params.get("producer")
    producer = connection_producer() if given is None else producer_name(given, "producer")
    raw = websocket.query_params.get("seq")
    if raw is None:
        return producer, None
    try:
        seq = int(raw)
    except ValueError:
        raise InvalidInput(f"seq must be an integer; got {raw[:40]!r}.", field="seq") from None
    if seq < 1:
        raise InvalidInput(f"seq must be >= 1; got {seq}.", field="seq")
    return producer, seq


def auth_mode(websocket: WebSocket) -> str | None:
    """``message`` when the key comes as the first message; None for header or token."""
    mode = websocket.query_params.get("auth")
    if mode is not None and mode not in AUTH_MODES:
        raise InvalidInput(
            f"auth must be one of {list(AUTH_MODES)}; got {mode[:40]!r}.", field="auth"
        )
    return mode


def parse_auth_message(message: str | bytes | None) -> str:
    """The key of an ``{"type": "auth", "key": "..."}`` message; Unauthorized otherwise."""
    expected = 'the first message must be {"type": "auth", "key": "<API key>"}'
    if not isinstance(message, str):
        raise Unauthorized(f"Missing API key: {expected}.")
    if len(message) > AUTH_MESSAGE_CHARS:
        # Refused unread: an unauthenticated client gets no parsing of a large message.
        raise Unauthorized(
            f"Missing API key: {expected} (at most {AUTH_MESSAGE_CHARS} characters)."
        )
    try:
        doc = orjson.loads(message)
    except orjson.JSONDecodeError:
        raise Unauthorized(f"Missing API key: {expected}.") from None
    key = doc.get("key") if isinstance(doc, dict) and doc.get("type") == "auth" else None
    if not isinstance(key, str) or not key:
        raise Unauthorized(f"Missing API key: {expected}.")
    return key


async def receive_key(websocket: WebSocket) -> str | None:
    """The key of the first message (None when the client left first); Unauthorized
    when it is not an auth message or does not come within ``AUTH_MESSAGE_SECONDS``."""
    try:
        message = await asyncio.wait_for(websocket.receive(), AUTH_MESSAGE_SECONDS)
    except TimeoutError:
        raise Unauthorized(
            f"Missing API key: no auth message within {AUTH_MESSAGE_SECONDS:g} s."
        ) from None
    if message["type"] == "websocket.disconnect":
        return None
    return parse_auth_message(message.get("text", message.get("bytes")))


def origin_allowed(websocket: WebSocket, allowed: str) -> bool:
    """Whether the page that opens this socket may: no Origin (not a browser), the
    server's own origin, or one of ``allowed`` (comma-separated; ``*``: any)."""
    origin = websocket.headers.get("origin")
    if origin is None:
        return True
    origin = origin.strip().lower().rstrip("/")
    host = websocket.headers.get("host", "").strip().lower()
    listed = {o.strip().lower().rstrip("/") for o in allowed.split(",") if o.strip()}
    return "*" in listed or origin in listed or origin in (f"http://{host}", f"https://{host}")


@router.websocket("/{stream_id}/ws")
async def stream_socket(websocket: WebSocket, stream_id: str) -> None:
    """Frames of instances in, ``ack``/``error``/``selection`` messages out."""
    sessions: Sessions = websocket.app.state.ws_sessions
    settings = websocket.app.state.settings
    if not origin_allowed(websocket, settings.ws_allowed_origins):
        # Refused before the handshake completes: the browser sees a 403.
        await websocket.close(WS_1008_POLICY_VIOLATION, "origin not allowed")
        return
    await websocket.accept()
    if sessions.closing:
        await websocket.close(WS_1013_TRY_AGAIN_LATER, "server shutting down")
        return
    try:
        if not valid_stream_id(stream_id):
            raise InvalidInput(
                f"Stream ids match {STREAM_ID_PATTERN}; got {stream_id[:40]!r}.", field="id"
            )
        producer, seq = parse_query(websocket)
        # The key comes in the Authorization header, as ?token=, or as the first message.
        token = websocket.query_params.get("token")
        if auth_mode(websocket) == "message":
            token = await receive_key(websocket)
            if token is None:
                return
        credential = credential_of(websocket, token)
    except Unauthorized as exc:
        await websocket.send_text(error_text(exc))
        await websocket.close(WS_1008_POLICY_VIOLATION, "unauthorized")
        return
    except InvalidInput as exc:
        await websocket.send_text(error_text(exc))
        await websocket.close(WS_1008_POLICY_VIOLATION, "invalid query")
        return
    session = Session(
        websocket,
        websocket.app.state.engine,
        scoped_id(None if credential is None else credential.tenant, stream_id),
        producer=producer,
        max_inflight=settings.ws_max_inflight,
        group_max_frames=settings.ws_group_max_frames,
        stats=sessions.stats,
        max_selection_features=settings.ws_selection_max_features,
        send_timeout=settings.ws_send_timeout,
    )
    if sessions.closing:  # the server began shutting down while the key was awaited
        await websocket.close(WS_1013_TRY_AGAIN_LATER, "server shutting down")
        return
    # Remembered with the session: when the key is revoked, the session is closed (1008).
    sessions.add(session, credential)
    try:
        await session.run(seq)
    finally:
        sessions.discard(session)


__all__ = [
    "AUTH_MESSAGE_SECONDS",
    "CLOSE_CODES",
    "auth_mode",
    "origin_allowed",
    "parse_auth_message",
    "parse_query",
    "router",
    "stream_socket",
]
