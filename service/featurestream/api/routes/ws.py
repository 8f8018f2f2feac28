"""Instance streams over WebSocket, with group commit, and selection subscriptions.

``WS /v1/streams/{id}/ws?producer=<name>&seq=<k>`` (API.md). A connection runs
three tasks:

* the *reader* takes frames off the socket, numbers them k, k+1, ..., decodes
  them and queues them. It waits for a free slot before reading a frame, so at
  most ``ws_max_inflight`` frames are read and not yet answered; beyond that
  the socket is not read at all (backpressure, bounded memory);
* the *committer* takes every queued frame (at most ``ws_group_max_frames``),
  has the engine apply them in order, each as its own batch, and commit them
  in one store commit, then sends a ``selection`` message when the selected
  set changed and answers each frame, in order, with an ``ack`` (or an
  ``error``);
* the *notifier* forwards the stream's selection notifications, whoever caused
  them and in whichever process, as ``selection`` messages.

On connect the server sends the current selection; a client that sends no
frames just receives selection messages (feature streams too). Every message
carries a ``type``: ``ack``, ``selection`` or ``error`` (STYLE.md section 5).
"""

from __future__ import annotations

import asyncio
import enum
import io
import json
import logging
import re
from collections.abc import MutableMapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
from fastapi import APIRouter, WebSocket
from numpy.lib import format as npy_format
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect, WebSocketState

from featurestream.api import bodies, problems
from featurestream.api.schemas import InstanceFrame
from featurestream.api.tenancy import STREAM_ID_PATTERN, scoped_id, tenant_of
from featurestream.errors import (
    FeatureStreamError,
    InvalidInput,
    SequenceConflict,
    StoreUnavailable,
    StreamNotFound,
    Unauthorized,
    WrongStreamKind,
)
from featurestream.selectors import REGISTRY
from featurestream.store.base import RESYNC, Subscription
from featurestream.streams import Frame, FrameResult, StreamEngine

log = logging.getLogger("featurestream.api.ws")

router = APIRouter(prefix="/v1/streams", tags=["websocket"])

CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_SERVER_ERROR = 1011
CLOSE_TRY_AGAIN_LATER = 1013

SHUTDOWN_DRAIN_SECONDS = 5.0

_PRODUCER = re.compile(r"^[^\n]{1,256}$")
_STREAM_ID = re.compile(STREAM_ID_PATTERN)


class Phase(enum.Enum):
    """Where a connection is in its life."""

    CONNECTING = "connecting"  # accepted; the stream and the producer are being looked up
    OPEN = "open"  # reading frames, answering them, forwarding selections
    DRAINING = "draining"  # no more frames are read; the ones read are being answered
    CLOSED = "closed"


class _Problem(FeatureStreamError):
    """A refusal already rendered as a problem document (a text frame that fails validation)."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(str(body.get("detail", "")))
        self.body = body


class _Close(Exception):
    """End the connection with this close code."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _text(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


def problem_body(exc: FeatureStreamError) -> dict[str, Any]:
    """The RFC 9457 document HTTP would answer for ``exc``."""
    if isinstance(exc, _Problem):
        return exc.body
    body: dict[str, Any] = json.loads(bytes(problems.problem_for(exc).body))
    return body


def render_error(exc: FeatureStreamError, seq: int | None) -> bytes:
    """The ``error`` message of a refused frame (``seq``) or of the connection (None)."""
    return _text({"type": "error", "error": problem_body(exc), "seq": seq}).encode()


def answer(result: FrameResult) -> str:
    """The message for a frame's stored response: an ``ack``, or the stored ``error``.

    Stored responses of applied frames are the HTTP response of the request
    (``version``, ``seq``, ``instances_seen``, ...), so a frame applied through
    HTTP is acknowledged like one sent here, and a replay is byte-identical.
    """
    # orjson on the per-frame path: these documents hold only ints, strings and lists.
    doc = orjson.loads(result.body)
    if doc.get("type") == "error":
        return result.body.decode()
    return orjson.dumps(
        {
            "type": "ack",
            "ack": result.seq,
            "version": doc["version"],
            "instances_seen": doc["instances_seen"],
        }
    ).decode()


def _selection_text(doc: dict[str, Any]) -> str:
    features = doc["features"]
    message = {
        "type": "selection",
        "selected": [f["name"] for f in features],
        "version": doc["version"],
        "features": features,
    }
    # The stored selection was written by orjson (non-finite scores already null).
    return orjson.dumps(message).decode()


@dataclass
class WebSocketStats:
    """Counters of this process's WebSocket sessions."""

    connections: int = 0
    frames: int = 0
    groups: int = 0
    max_inflight: int = 0


class Sessions:
    """The open sessions of an app, closed cleanly when the server shuts down."""

    def __init__(self) -> None:
        self._open: set[Session] = set()
        self.stats = WebSocketStats()
        self.closing = False

    def __len__(self) -> int:
        return len(self._open)

    def add(self, session: Session) -> None:
        self._open.add(session)
        self.stats.connections += 1

    def discard(self, session: Session) -> None:
        self._open.discard(session)

    async def close_all(
        self, code: int = CLOSE_GOING_AWAY, reason: str = "server shutdown"
    ) -> None:
        """Stop reading, answer what was read (a few seconds at most), close every socket."""
        self.closing = True
        await asyncio.gather(
            *(s.shutdown(code, reason) for s in list(self._open)), return_exceptions=True
        )


class Session:
    """One WebSocket connection to one stream (see the module docstring)."""

    def __init__(
        self,
        websocket: WebSocket,
        engine: StreamEngine,
        stream_id: str,
        *,
        producer: str,
        max_inflight: int,
        group_max_frames: int,
        stats: WebSocketStats,
    ) -> None:
        self.ws = websocket
        self.engine = engine
        self.stream_id = stream_id
        self.producer = producer
        self.phase = Phase.CONNECTING
        self.kind = "instances"
        self.supervised = True
        self.next_seq = 1
        self.inflight = 0
        self.max_inflight = max_inflight
        self._group_max = group_max_frames
        self._stats = stats
        self._slots = asyncio.Semaphore(max_inflight)
        self._queue: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._send_lock = asyncio.Lock()
        self._last_selection = -1
        self._client_gone = False
        self._reader: asyncio.Task[None] | None = None
        self._committer: asyncio.Task[None] | None = None
        self._finished = asyncio.Event()
        self._shutdown: _Close | None = None

    # ------------------------------------------------------------------ life

    async def run(self, seq: int | None) -> None:
        """Serve the connection until the client leaves, a fatal error, or shutdown."""
        try:
            await self._serve(seq)
        except _Close as exc:
            await self._close(exc.code, exc.reason)
        except StreamNotFound as exc:
            await self._send(render_error(exc, None).decode())
            await self._close(CLOSE_POLICY, "unknown stream")
        except StoreUnavailable as exc:
            await self._send(render_error(exc, None).decode())
            await self._close(CLOSE_TRY_AGAIN_LATER, "store unavailable")
        except Exception:
            log.exception("WebSocket session on stream %r failed", self.stream_id)
            await self._close(CLOSE_SERVER_ERROR, "server error")
        else:
            if self._shutdown is not None:
                await self._close(self._shutdown.code, self._shutdown.reason)
            else:
                await self._close(CLOSE_NORMAL, "")
        finally:
            self.phase = Phase.CLOSED
            self._finished.set()

    async def _serve(self, seq: int | None) -> None:
        info = await self.engine.get(self.stream_id)
        self.kind = str(info["kind"])
        cls = REGISTRY.get(str(info["algorithm"]))
        self.supervised = bool(getattr(cls, "supervised", True))
        async with self.engine.subscribe(self.stream_id) as sub:
            if self.kind == "instances":
                self.next_seq = seq or await self.engine.next_seq(self.stream_id, self.producer)
            else:
                self.next_seq = seq or 1
            # Subscribed first, then read: no change falls between the two.
            await self._forward_selection((await self.engine.summary(self.stream_id)).selection)
            self.phase = Phase.OPEN
            loop = asyncio.get_running_loop()
            self._reader = loop.create_task(self._read())
            self._committer = loop.create_task(self._commit_loop())
            notifier = loop.create_task(self._notify(sub))
            tasks: set[asyncio.Task[None]] = {self._reader, self._committer, notifier}
            try:
                pending = set(tasks)
                while pending:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    for t in done:
                        if not t.cancelled() and t.exception() is not None:
                            raise t.exception()  # type: ignore[misc]
                    if self._committer in done or notifier in done:
                        break
                    # Only the reader ended (the client stopped sending): answer the rest.
                    self.phase = Phase.DRAINING
            finally:
                for t in tasks:
                    t.cancel()
                # asyncio.wait, not gather: a cancellation of this task (the server's) must
                # surface as itself, not as one of the children's.
                await asyncio.wait(tasks)

    async def shutdown(self, code: int, reason: str) -> None:
        """Stop reading, let the committer answer what was read, then close."""
        self._shutdown = _Close(code, reason)
        if self.phase is Phase.OPEN:
            self.phase = Phase.DRAINING
        if self._reader is not None:
            self._reader.cancel()
        try:
            async with asyncio.timeout(SHUTDOWN_DRAIN_SECONDS):
                await self._finished.wait()
        except TimeoutError:
            # Stuck (a store that does not answer): stop waiting for it. The client
            # resumes from its last ack; nothing unacknowledged was promised.
            if self._committer is not None:
                self._committer.cancel()
            with suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._finished.wait()

    # ------------------------------------------------------------------ tasks

    async def _read(self) -> None:
        try:
            while True:
                # A free slot first: with max_inflight frames unanswered, the socket waits.
                await self._slots.acquire()
                message = await self.ws.receive()
                if message["type"] == "websocket.disconnect":
                    self._client_gone = True
                    return
                if message["type"] != "websocket.receive":
                    self._slots.release()
                    continue
                seq = self.next_seq
                self.next_seq += 1
                self.inflight += 1
                self._stats.max_inflight = max(self._stats.max_inflight, self.inflight)
                self._queue.put_nowait(self._decode(message, seq))
        except WebSocketDisconnect:
            self._client_gone = True
        finally:
            self._queue.put_nowait(None)

    async def _commit_loop(self) -> None:
        while True:
            first = await self._queue.get()
            if first is None:
                return
            frames = [first]
            end = False
            while len(frames) < self._group_max:
                try:
                    more = self._queue.get_nowait()
                except asyncio.QueueEmpty:
                    break
                if more is None:
                    end = True
                    break
                frames.append(more)
            fatal = await self._apply(frames)
            self.inflight -= len(frames)
            for _ in frames:
                self._slots.release()
            if fatal is not None:
                raise fatal
            if end:
                return

    async def _apply(self, frames: list[Frame]) -> _Close | None:
        # The send lock is held from before the commit until its messages are out, so
        # a notification of this very commit cannot overtake its acks.
        async with self._send_lock:
            selection: bytes | None = None
            if self.kind == "instances":
                out = await self.engine.add_instance_frames(
                    self.stream_id, frames, producer=self.producer, render_error=render_error
                )
                results, selection = out.results, out.selection
            else:
                results = [
                    FrameResult(f.seq, render_error(f.error or _feature_stream(self), f.seq))
                    for f in frames
                ]
            self._stats.groups += 1
            self._stats.frames += len(frames)
            # The selection first: once a client has ack k, it has every selection
            # message up to the commit that includes frame k.
            if selection is not None:
                await self._forward_selection_locked(selection)
            fatal: _Close | None = None
            for r in results:
                await self._send_locked(answer(r))
                if r.fatal:
                    fatal = _Close(CLOSE_POLICY, "sequence conflict")
                    break
            return fatal

    async def _notify(self, sub: Subscription) -> None:
        while True:
            raw = await sub.get()
            if raw == RESYNC:
                # Notifications may have been lost: the current selection covers them.
                raw = (await self.engine.summary(self.stream_id)).selection
            await self._forward_selection(raw)

    # ------------------------------------------------------------------ frames

    def _decode(self, message: MutableMapping[str, Any], seq: int) -> Frame:
        """A numbered frame, or a refused one carrying its error."""
        try:
            if self.kind != "instances":
                raise _feature_stream(self)
            data = message.get("bytes")
            if data is not None:
                if data[:2] == b"PK":  # a zip: a sparse frame (scipy.sparse.save_npz)
                    A = bodies.load_sparse_instances(data, self.engine.settings.max_request_bytes)
                    X, y = bodies.split_labels(A, self.supervised, "A binary frame")
                    return Frame(seq, X, y)
                return self._decode_npy(data, seq)
            return self._decode_json(message.get("text") or "", seq)
        except FeatureStreamError as exc:
            return Frame(seq, error=exc)

    def _decode_npy(self, data: bytes, seq: int) -> Frame:
        A = npy_view(data)
        if A is None:
            A = bodies.load_npy(data)  # the general reader, with its error messages
        if A.ndim == 1:
            A = A[None, :]
        X, y = bodies.split_labels(A, self.supervised, "A binary frame")
        return Frame(seq, X, y)

    def _decode_json(self, text: str, seq: int) -> Frame:
        try:
            frame = InstanceFrame.model_validate_json(text)
        except ValidationError as exc:
            body = json.loads(bytes(problems.validation_problem(list(exc.errors())).body))
            raise _Problem(body) from None
        if frame.seq is not None and frame.seq != seq:
            raise SequenceConflict(
                f"The frame says seq {frame.seq}, but it is frame {seq} of this connection "
                f"(frames are numbered consecutively from the connection's seq).",
                producer=self.producer,
                expected_seq=seq,
            )
        if frame.X is not None:
            if len({len(row) for row in frame.X}) != 1:
                raise InvalidInput("Every row of X must have the same length.", field="X")
            X = np.asarray(frame.X, dtype=np.float64)
            y = None if frame.y is None else np.asarray(frame.y, dtype=np.float64)
        else:
            X = np.asarray([frame.x], dtype=np.float64)
            y = None if frame.y is None else np.asarray([frame.y], dtype=np.float64)
        return Frame(seq, X, y)

    # ------------------------------------------------------------------ sending

    async def _forward_selection(self, raw: bytes) -> None:
        async with self._send_lock:
            await self._forward_selection_locked(raw)

    async def _forward_selection_locked(self, raw: bytes) -> None:
        doc = orjson.loads(raw)
        version = int(doc["version"])
        # Notifications can arrive late or twice (our own commits, a resync): only newer ones.
        if version <= self._last_selection:
            return
        self._last_selection = version
        await self._send_locked(_selection_text(doc))

    async def _send(self, text: str) -> None:
        async with self._send_lock:
            await self._send_locked(text)

    async def _send_locked(self, text: str) -> None:
        if self._client_gone:
            return
        try:
            await self.ws.send_text(text)
        except (WebSocketDisconnect, RuntimeError, OSError):
            # The client left; what it sent is still committed and answered on resume.
            self._client_gone = True

    async def _close(self, code: int, reason: str) -> None:
        if self._client_gone or self.ws.application_state != WebSocketState.CONNECTED:
            return
        with suppress(WebSocketDisconnect, RuntimeError, OSError):
            await self.ws.close(code, reason)


def npy_view(data: bytes) -> npt.NDArray[np.floating[Any]] | None:
    """A little-endian float64 or float32 C-order .npy of 1 or 2 dimensions.

    The common frames, read straight from ``data`` without a copy; None for
    anything else (the general reader then converts or refuses it). A float32
    view stays float32 here: the selector converts it to float64 in the worker
    thread that applies the frame, not on the event loop that serves reads.
    """
    # A producer sends frames of one shape: their headers repeat byte for byte, so
    # the parsed header is kept (numpy parses it with ast.literal_eval each time).
    # Version 1.0: 6 magic bytes, 2 version bytes, a 2-byte header length.
    if len(data) < 10 or data[6:8] != b"\x01\x00":
        return _npy_view_parsed(data)
    end = 10 + int.from_bytes(data[8:10], "little")
    key = data[:end]
    parsed = _HEADERS.get(key)
    if parsed is None:
        view = _npy_view_parsed(data)
        if view is not None and len(_HEADERS) < 256:
            _HEADERS[key] = (view.shape, end, view.dtype)
        return view
    shape, offset, dtype = parsed
    count = int(np.prod(shape))
    if len(data) < offset + dtype.itemsize * count:
        return None
    return np.frombuffer(data, dtype=dtype, count=count, offset=offset).reshape(shape)


_HEADERS: dict[bytes, tuple[tuple[int, ...], int, np.dtype[Any]]] = {}
# Little-endian floats are read straight from the frame.
_FAST_DTYPES = (np.dtype("<f8"), np.dtype("<f4"))


def _npy_view_parsed(data: bytes) -> npt.NDArray[np.floating[Any]] | None:
    try:
        buf = io.BytesIO(data)
        version = npy_format.read_magic(buf)
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(buf)
        elif version == (2, 0):
            shape, fortran, dtype = npy_format.read_array_header_2_0(buf)
        else:
            return None
        if fortran or dtype not in _FAST_DTYPES or len(shape) not in (1, 2):
            return None
        count = int(np.prod(shape))
        if len(data) < buf.tell() + dtype.itemsize * count:
            return None
        return np.frombuffer(data, dtype=dtype, count=count, offset=buf.tell()).reshape(shape)
    except ValueError:
        return None


def _feature_stream(session: Session) -> WrongStreamKind:
    return WrongStreamKind(
        f"Stream {session.stream_id!r} is a {session.kind} stream: its WebSocket only sends "
        "selection messages; frames of instances are for instance streams.",
        stream_id=session.stream_id,
        kind=session.kind,
    )


def _query(websocket: WebSocket) -> tuple[str, int | None]:
    """The producer and starting seq of the query string; InvalidInput when malformed."""
    producer = websocket.query_params.get("producer", "default")
    if not _PRODUCER.match(producer):
        raise InvalidInput(
            "producer must be 1 to 256 characters without a newline.", field="producer"
        )
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


@router.websocket("/{stream_id}/ws")
async def stream_socket(websocket: WebSocket, stream_id: str) -> None:
    """Frames of instances in, ``ack``/``error``/``selection`` messages out (API.md)."""
    sessions: Sessions = websocket.app.state.ws_sessions
    settings = websocket.app.state.settings
    await websocket.accept()
    if sessions.closing:
        await websocket.close(CLOSE_TRY_AGAIN_LATER, "server shutting down")
        return
    try:
        if not _STREAM_ID.match(stream_id):
            raise InvalidInput(
                f"Stream ids match {STREAM_ID_PATTERN}; got {stream_id[:40]!r}.", field="id"
            )
        producer, seq = _query(websocket)
        # The key comes in the Authorization header, or as ?token= for clients
        # (browsers) that cannot set headers on a WebSocket.
        tenant = tenant_of(websocket, websocket.query_params.get("token"))
    except Unauthorized as exc:
        await websocket.send_text(render_error(exc, None).decode())
        await websocket.close(CLOSE_POLICY, "unauthorized")
        return
    except InvalidInput as exc:
        await websocket.send_text(render_error(exc, None).decode())
        await websocket.close(CLOSE_POLICY, "invalid query")
        return
    session = Session(
        websocket,
        websocket.app.state.engine,
        scoped_id(tenant, stream_id),
        producer=producer,
        max_inflight=settings.ws_max_inflight,
        group_max_frames=settings.ws_group_max_frames,
        stats=sessions.stats,
    )
    sessions.add(session)
    try:
        await session.run(seq)
    finally:
        sessions.discard(session)


__all__ = [
    "Phase",
    "Session",
    "Sessions",
    "WebSocketStats",
    "answer",
    "render_error",
    "router",
]
