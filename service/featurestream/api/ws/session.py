"""One WebSocket connection to one stream, and the sessions of an app.

A session runs three tasks:

* the *reader* takes frames off the socket, numbers them k, k+1, ..., decodes
  them (``messages.py``; a large frame that is costly to read, in a decode
  thread) and queues them. It waits for a free slot before reading a frame,
  so at most ``ws_max_inflight`` frames are read and not yet answered; beyond
  that the socket is not read at all (backpressure, bounded memory);
* the *committer* takes every queued frame (at most ``ws_group_max_frames``),
  has the engine apply them in order, each as its own batch, and commit them
  in one store commit, then sends a ``selection`` message when the selected
  set changed and answers each frame, in order, with an ``ack`` (or an
  ``error``);
* the *notifier* forwards the stream's selection notifications, whoever caused
  them and in whichever process, as ``selection`` messages.

What one connection holds is bounded, however slowly its client reads: a
``selection`` message lists at most ``ws_selection_max_features`` features (a
larger selection is a notice of its version and size); the subscription keeps
only the newest notification, so a slow reader gets the newest selection, never
a backlog; and a send waits while the socket's buffer is full (the server's
WebSocket protocol pauses writers), at most ``ws_send_timeout`` seconds, after
which the connection is closed (1013, ``slow reader``).

Every message is rendered by the wire module (``engine/wire.py``).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

from fastapi import WebSocket
from starlette.status import (
    WS_1000_NORMAL_CLOSURE,
    WS_1001_GOING_AWAY,
    WS_1008_POLICY_VIOLATION,
    WS_1011_INTERNAL_ERROR,
    WS_1013_TRY_AGAIN_LATER,
)
from starlette.websockets import WebSocketDisconnect, WebSocketState

from featurestream.api import arrays
from featurestream.api.auth import Credential
from featurestream.api.problems import problem_of
from featurestream.api.ws.messages import FrameDecoder, not_instances
from featurestream.engine import (
    RESYNC,
    Frame,
    FrameResult,
    Problem,
    Selection,
    StreamEngine,
    Subscription,
    wire,
)
from featurestream.errors import (
    FeatureStreamError,
    NumericallyUnstable,
    StoreUnavailable,
    StreamNotFound,
    Unavailable,
)

log = logging.getLogger("featurestream.api.ws")

SHUTDOWN_DRAIN_SECONDS = 5.0
SLOW_READER = "slow reader"


class Phase(enum.Enum):
    """Where a connection is in its life."""

    CONNECTING = "connecting"  # accepted; the stream and the producer are being looked up
    OPEN = "open"  # reading frames, answering them, forwarding selections
    DRAINING = "draining"  # no more frames are read; the ones read are being answered
    CLOSED = "closed"


class Close(Exception):
    """End the connection with this close code."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def error_text(exc: FeatureStreamError, seq: int | None = None) -> str:
    """The ``error`` message of a refused frame (``seq``) or of the connection (None)."""
    return wire.error_message(problem_of(exc), seq).decode()


@dataclass
class WebSocketStats:
    """Counters of this process's WebSocket sessions."""

    connections: int = 0
    frames: int = 0
    groups: int = 0
    max_inflight: int = 0


class Sessions:
    """The open sessions of an app, closed cleanly when the server shuts down.

    Each session is kept with the credential it authenticated with (None when
    keys are off), so :meth:`revoke` can close those whose key was revoked.
    """

    def __init__(self) -> None:
        self._open: dict[Session, Credential | None] = {}
        self.stats = WebSocketStats()
        self.closing = False

    def __len__(self) -> int:
        return len(self._open)

    def add(self, session: Session, credential: Credential | None = None) -> None:
        self._open[session] = credential
        self.stats.connections += 1

    def discard(self, session: Session) -> None:
        self._open.pop(session, None)

    async def revoke(self, valid: Callable[[Credential], bool]) -> int:
        """Close (1008) the sessions whose credential is no longer ``valid``; how many."""
        revoked = [s for s, c in list(self._open.items()) if c is not None and not valid(c)]
        for s in revoked:
            log.warning("closing a WebSocket on stream %r: its API key was revoked", s.stream_id)
        await asyncio.gather(
            *(s.shutdown(WS_1008_POLICY_VIOLATION, "API key revoked") for s in revoked),
            return_exceptions=True,
        )
        return len(revoked)

    async def close_all(
        self, code: int = WS_1001_GOING_AWAY, reason: str = "server shutdown"
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
        max_selection_features: int,
        send_timeout: float,
    ) -> None:
        self.ws = websocket
        self.engine = engine
        self.stream_id = stream_id
        self.producer = producer
        self.phase = Phase.CONNECTING
        self.kind = "instances"
        self.next_seq = 1
        self.inflight = 0
        self.max_inflight = max_inflight
        self._decoder: FrameDecoder | None = None
        self._group_max = group_max_frames
        self._max_features = max_selection_features
        self._send_timeout = send_timeout
        self._stats = stats
        self._slots = asyncio.Semaphore(max_inflight)
        self._queue: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._send_lock = asyncio.Lock()
        self._last_selection = -1
        self._client_gone = False
        self._reader: asyncio.Task[None] | None = None
        self._committer: asyncio.Task[None] | None = None
        self._finished = asyncio.Event()
        self._shutdown: Close | None = None

    # ------------------------------------------------------------------ life

    async def run(self, seq: int | None) -> None:
        """Serve the connection until the client leaves, a fatal error, or shutdown."""
        try:
            await self._serve(seq)
        except Close as exc:
            await self._close(exc.code, exc.reason)
        except StreamNotFound as exc:
            await self._say(error_text(exc))
            await self._close(WS_1008_POLICY_VIOLATION, "unknown stream")
        except NumericallyUnstable as exc:
            # A stored state that is not finite (see the engine's load).
            await self._say(error_text(exc))
            await self._close(WS_1008_POLICY_VIOLATION, "numerically unstable state")
        except Unavailable as exc:
            await self._say(error_text(exc))
            what = "store" if isinstance(exc, StoreUnavailable) else "compute"
            await self._close(WS_1013_TRY_AGAIN_LATER, f"{what} unavailable")
        except Exception:
            log.exception("WebSocket session on stream %r failed", self.stream_id)
            await self._close(WS_1011_INTERNAL_ERROR, "server error")
        else:
            if self._shutdown is not None:
                await self._close(self._shutdown.code, self._shutdown.reason)
            else:
                await self._close(WS_1000_NORMAL_CLOSURE, "")
        finally:
            self.phase = Phase.CLOSED
            self._finished.set()

    async def _serve(self, seq: int | None) -> None:
        stream = await self.engine.get(self.stream_id)
        self.kind = stream.kind
        self._decoder = FrameDecoder(
            self.stream_id,
            stream.kind,
            supervised=self.engine.supervised(stream.algorithm),
            producer=self.producer,
            bounds=arrays.Bounds.instances(self.engine.settings),
        )
        async with self.engine.subscribe(self.stream_id) as sub:
            if self.kind == "instances":
                self.next_seq = seq or await self.engine.next_seq(self.stream_id, self.producer)
            else:
                self.next_seq = seq or 1
            # Subscribed first, then read: no change falls between the two.
            current = wire.parse_selection((await self.engine.selection(self.stream_id)).document)
            # The first message also names the connection's producer and first seq: a
            # connection that named no producer got one of its own, to resume with.
            self._last_selection = current.version
            first = wire.selection_message(
                current, max_features=self._max_features, producer=self.producer, seq=self.next_seq
            )
            await self._send(first)
            if self._shutdown is not None:
                return  # shut down (or revoked) while connecting: read nothing
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
        self._shutdown = Close(code, reason)
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
        assert self._decoder is not None
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
                # Cancelled while a frame is decoded (shutdown): the frame is dropped
                # unanswered, as one still unread would be; the client resends it.
                self._queue.put_nowait(await self._decoder.read(message, seq))
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

    async def _apply(self, frames: list[Frame]) -> Close | None:
        # The send lock is held from before the commit until its messages are out, so
        # a notification of this very commit cannot overtake its acks.
        async with self._send_lock:
            selection: Selection | None = None
            results: list[FrameResult]
            if self.kind == "instances":
                out = await self.engine.add_instance_frames(
                    self.stream_id, frames, producer=self.producer
                )
                results, selection = list(out.results), out.selection
            else:
                refusal = not_instances(self.stream_id, self.kind)
                results = [FrameResult(f.seq, problem_of(f.error or refusal)) for f in frames]
            self._stats.groups += 1
            self._stats.frames += len(frames)
            # The selection first: once a client has ack k, it has every selection
            # message up to the commit that includes frame k.
            if selection is not None:
                await self._forward_selection_locked(selection)
            fatal: Close | None = None
            for r in results:
                await self._send_locked(_answer(r))
                if r.fatal:
                    fatal = Close(WS_1008_POLICY_VIOLATION, "sequence conflict")
                    break
            return fatal

    async def _notify(self, sub: Subscription) -> None:
        while True:
            raw = await sub.get()
            if raw == RESYNC:
                # Notifications may have been lost: the current selection covers them.
                raw = (await self.engine.selection(self.stream_id)).document
            version, text = wire.published_selection_message(raw, self._max_features)
            async with self._send_lock:
                if version > self._last_selection:
                    self._last_selection = version
                    await self._send_locked(text)

    # ------------------------------------------------------------------ sending

    async def _forward_selection_locked(self, selection: Selection) -> None:
        # Notifications can arrive late or twice (our own commits, a resync): only newer ones.
        if selection.version <= self._last_selection:
            return
        self._last_selection = selection.version
        await self._send_locked(wire.selection_message(selection, max_features=self._max_features))

    async def _send(self, text: str) -> None:
        async with self._send_lock:
            await self._send_locked(text)

    async def _say(self, text: str) -> None:
        """:meth:`_send` on the way out: a client too slow to take it is closed anyway."""
        with suppress(Close):
            await self._send(text)

    async def _send_locked(self, text: str) -> None:
        if self._client_gone:
            return
        try:
            # The send waits while the socket's buffer is full: not beyond the timeout.
            async with asyncio.timeout(self._send_timeout):
                await self.ws.send_text(text)
        except TimeoutError:  # first: a TimeoutError is an OSError too
            log.warning(
                "closing a WebSocket on stream %r: its client read nothing for %g s",
                self.stream_id,
                self._send_timeout,
            )
            raise Close(WS_1013_TRY_AGAIN_LATER, SLOW_READER) from None
        except (WebSocketDisconnect, RuntimeError, OSError):
            # The client left; what it sent is still committed and answered on resume.
            self._client_gone = True

    async def _close(self, code: int, reason: str) -> None:
        if self._client_gone or self.ws.application_state != WebSocketState.CONNECTED:
            return
        # The close frame too waits for room in the socket's buffer; a client that
        # still reads nothing gets none, and the session ends without it.
        with suppress(WebSocketDisconnect, RuntimeError, OSError, TimeoutError):
            async with asyncio.timeout(self._send_timeout):
                await self.ws.close(code, reason)


def _answer(result: FrameResult) -> str:
    """A frame's ``ack``, or its ``error`` (a replay answers alike, from the stored response)."""
    if isinstance(result.reply, Problem):
        return wire.error_message(result.reply, result.seq).decode()
    return wire.ack_message(result.reply)


__all__ = ["Close", "Phase", "Session", "Sessions", "WebSocketStats", "error_text"]
