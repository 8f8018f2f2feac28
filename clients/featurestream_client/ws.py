"""The WebSocket side: pipelined instance frames and selection messages.

:class:`InstanceFeed` is the bookkeeping of one ``stream_instances`` call,
free of I/O: it numbers frames from the producer's next ``seq``, keeps at most
``window`` frames un-acknowledged, records acks, errors and selection
messages, and knows which frames to send again after a reconnect (the server
acknowledges frames it had already applied without applying them again). The
sync and async clients run it over a ``websockets`` connection.
"""

from __future__ import annotations

import json
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlencode, urlsplit, urlunsplit

import numpy as np
import numpy.typing as npt

from featurestream_client._instances import instances_bytes
from featurestream_client._npy import npy_frame
from featurestream_client.errors import (
    FeatureStreamError,
    NotFound,
    RequestTooExpensive,
    Unauthorized,
    WebSocketClosed,
    error_from_problem,
)
from featurestream_client.models import InstancesResult, Selection

OnError = Literal["raise", "skip"]

#: Close codes after which the client reconnects and resumes (None: the
#: connection dropped without a close frame).
RESUMABLE_CLOSE_CODES = frozenset({None, 1000, 1001, 1006, 1011, 1012, 1013, 1014})


@dataclass(frozen=True)
class SelectionNotice:
    """A selection too large for a WebSocket message (the server's
    ``ws_selection_max_features``): its version and size; read it with ``GET /selected``."""

    version: int
    size: int


def _notice(msg: Mapping[str, Any]) -> SelectionNotice | None:
    if msg.get("type") == "selection" and msg.get("truncated") is True:
        return SelectionNotice(int(msg["version"]), int(msg.get("size") or 0))
    return None


class WebSocketUnavailable(NotFound):
    """The server refused the WebSocket handshake (no such route, or WebSockets disabled)."""


def ws_url(base_url: str, path: str, query: Mapping[str, Any] | None = None) -> str:
    """``ws(s)://`` URL of ``path`` on the server at ``base_url``."""
    parts = urlsplit(base_url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    full = parts.path.rstrip("/") + path
    q = urlencode({k: v for k, v in (query or {}).items() if v is not None})
    return urlunsplit((scheme, parts.netloc, full, q, ""))


def close_error(code: int | None, reason: str) -> FeatureStreamError:
    """The error for a close the client does not resume after.

    1008 (policy) covers refused keys, unknown streams and out-of-order frames;
    the server says which in an ``error`` message before closing, which the
    client raises instead when it got one.
    """
    return WebSocketClosed(
        f"The server closed the WebSocket with code {code}: {reason or 'no reason given'}.",
        code=code,
    )


def handshake_error(status: int | None, detail: str) -> FeatureStreamError:
    if status in (401,):
        return Unauthorized(f"WebSocket handshake refused: {detail}", status=status)
    if status is not None and status < 500:
        return WebSocketUnavailable(
            f"The server has no WebSocket endpoint here (HTTP {status}): {detail}", status=status
        )
    return FeatureStreamError(f"WebSocket handshake failed: {detail}", status=status)


Rows = tuple[Any, npt.NDArray[np.float64] | None]


@dataclass(frozen=True)
class Frame:
    """One numbered frame: JSON text, or an .npy array (labels in its last column).

    ``rows`` are its instances and labels as given, kept to send them again in
    smaller frames when the server finds the frame over its time budget.
    """

    seq: int
    data: str | bytes | bytearray
    rows: Rows | None = None


class InstanceFeed:
    """Frames of one ``stream_instances`` call, and what the server said about them.

    Parameters
    ----------
    batches : iterator of (rows, labels or None)
        The instances, already cut into frames.
    first_seq : int
        The producer's next seq: the number of the first frame.
    window : int
        Frames sent and not yet acknowledged, at most.
    on_error : {"raise", "skip"}
        ``raise``: after a refused frame, send nothing new, wait for the frames
        in flight, then raise the frame's error. ``skip``: record it and go on.
    on_selected : callable, optional
        Called with each :class:`Selection` the server announces.
    binary : bool
        Send batches as binary .npy frames (labels in the last column), much
        cheaper to encode and decode than JSON.
    supervised : bool
        Whether the stream's algorithm learns from labels. A supervised
        selector takes a binary frame's last column for labels, so batches
        without labels travel to it as JSON (which it refuses: labels are
        missing); to an unsupervised one they travel as .npy too, and labels
        given for it are left out of its frames (it ignores them).
    """

    def __init__(
        self,
        batches: Iterator[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | None]],
        first_seq: int,
        window: int = 16,
        on_error: OnError = "raise",
        on_selected: Callable[[Selection], None] | None = None,
        binary: bool = True,
        *,
        supervised: bool = True,
    ) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1; got {window}.")
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip'; got {on_error!r}.")
        self._batches = batches
        self.binary = binary
        self.supervised = supervised
        self.next_seq = first_seq
        self.window = window
        self.on_error = on_error
        self.on_selected = on_selected
        self.pending: OrderedDict[int, Frame] = OrderedDict()
        # Rows of frames refused as over the server's time budget, cut smaller: sent next.
        self.resend: deque[Rows] = deque()
        self.splits = 0
        self.exhausted = False
        self.failure: FeatureStreamError | None = None
        self.errors: list[FeatureStreamError] = []
        self.store_outages = 0  # store-unavailable notices (each followed by a 1013 close)
        self.acked: list[int] = []
        self.version: int | None = None
        self.instances_seen: int | None = None
        self.selection: Selection | None = None
        # A selection announced by a notice, not yet read (with on_selected only).
        self.notice: SelectionNotice | None = None

    @property
    def done(self) -> bool:
        return (
            (self.exhausted and not self.resend) or self.failure is not None
        ) and not self.pending

    def take(self) -> list[Frame]:
        """New frames that may be sent now (the window permitting)."""
        out: list[Frame] = []
        while self.failure is None and len(self.pending) < self.window:
            if self.resend:
                X, labels = self.resend.popleft()
            elif self.exhausted:
                break
            else:
                try:
                    X, labels = next(self._batches)
                except StopIteration:
                    self.exhausted = True
                    break
            payload = self._encode(X, labels)
            frame = Frame(self.next_seq, payload, (X, labels))
            self.pending[frame.seq] = frame
            self.next_seq += 1
            out.append(frame)
        return out

    def _encode(self, X: npt.NDArray[np.float64], labels: Any) -> str | bytes | bytearray:
        if not self.supervised:
            # An unsupervised selector ignores labels, and it reads a binary frame's
            # every column as a feature: labels must not travel in one.
            labels = None
        if isinstance(labels, np.ndarray) and labels.dtype.kind in "USO":
            labels = [str(v) for v in labels.tolist()]
        strings = isinstance(labels, list)  # class names: only a JSON frame carries them
        if strings and hasattr(X, "toarray"):
            X = X.toarray()
        if hasattr(X, "nnz"):  # sparse rows always travel as an .npz frame
            return instances_bytes(X, labels)[0]
        if labels is not None and self.binary and not strings:
            return npy_frame(X, labels)
        if labels is None and self.binary and not self.supervised:
            return npy_frame(X)
        body: dict[str, Any] = {"seq": self.next_seq, "X": X.tolist()}
        if labels is not None:
            body["y"] = labels if strings else labels.tolist()
        return json.dumps(body, separators=(",", ":"), allow_nan=False)

    def resume_seq(self) -> int:
        """The ``seq`` to reconnect with: the first frame without an answer."""
        return next(iter(self.pending)) if self.pending else self.next_seq

    def unanswered(self) -> list[Frame]:
        return list(self.pending.values())

    def receive(self, message: str | bytes) -> None:
        """Take in one server message."""
        try:
            msg = json.loads(message)
        except ValueError:
            raise FeatureStreamError(f"Unreadable WebSocket message: {message[:80]!r}") from None
        if not isinstance(msg, dict):
            raise FeatureStreamError(f"Unexpected WebSocket message: {msg!r}"[:200])
        if "error" in msg:
            problem = msg["error"] if isinstance(msg["error"], dict) else {"detail": msg["error"]}
            error = error_from_problem(int(problem.get("status") or 400), problem)
            seq = msg.get("seq")
            error.seq = seq  # type: ignore[attr-defined]
            if seq is None and error.status == 503:
                # The store is down: the server closes with 1013 next, and the feed
                # resumes after it like after any dropped connection.
                self.store_outages += 1
                return
            if seq is None or int(seq) not in self.pending:
                raise error  # about the connection, not one frame
            # A refused frame uses up its seq and changes nothing.
            frame = self.pending.pop(int(seq))
            if isinstance(error, RequestTooExpensive) and self._split(frame, error.completed):
                return
            self.errors.append(error)
            if self.on_error == "raise" and self.failure is None:
                self.failure = error
            return
        if "ack" in msg:
            seq = int(msg["ack"])
            self.pending.pop(seq, None)  # an ack repeated after a resume is harmless
            self.acked.append(seq)
            if "version" in msg:
                self.version = int(msg["version"])
            if msg.get("instances_seen") is not None:
                self.instances_seen = int(msg["instances_seen"])
            return
        if "selected" in msg and "version" in msg:
            self.selection = Selection.from_message(msg)
            if self.on_selected is not None:
                self.on_selected(self.selection)
            return
        notice = _notice(msg)
        if notice is not None and self.on_selected is not None:
            self.notice = notice

    def announced(self, selection: Selection) -> None:
        """The selection of a notice, as read: handed to ``on_selected``."""
        self.notice = None
        self.selection = selection
        if self.on_selected is not None:
            self.on_selected(selection)

    def _split(self, frame: Frame, completed: int) -> bool:
        """Queue the rows of a frame refused as over the server's time budget, cut smaller.

        The pieces (``completed`` rows each, at most half the frame, at least one)
        go out next, with new seqs, after the frames already sent behind it. False
        when the frame holds one row: it cannot be cut.
        """
        if frame.rows is None:
            return False
        X, labels = frame.rows
        m = X.shape[0]
        if m <= 1:
            return False
        piece = max(1, min(completed, (m + 1) // 2))
        pieces = [
            (X[lo : lo + piece], None if labels is None else labels[lo : lo + piece])
            for lo in range(0, m, piece)
        ]
        self.resend.extendleft(reversed(pieces))
        self.splits += 1
        return True

    def result(self) -> InstancesResult:
        return InstancesResult(
            version=self.version if self.version is not None else -1,
            instances_seen=self.instances_seen or 0,
            selected=tuple(self.selection.names) if self.selection is not None else (),
            seqs=tuple(sorted(set(self.acked))),
            errors=tuple(self.errors),
        )


def selection_message(message: str | bytes) -> Selection | SelectionNotice | None:
    """The selection in a listener's message, if it carries one, or the notice of one
    too large for a message.

    An ``error`` message about the connection itself (no ``seq``) is raised.
    """
    try:
        msg = json.loads(message)
    except ValueError:
        return None
    if not isinstance(msg, dict):
        return None
    if "error" in msg and msg.get("seq") is None:
        problem = msg["error"] if isinstance(msg["error"], dict) else {"detail": msg["error"]}
        raise error_from_problem(int(problem.get("status") or 400), problem)
    if "selected" in msg and "version" in msg:
        return Selection.from_message(msg)
    return _notice(msg)


__all__ = [
    "RESUMABLE_CLOSE_CODES",
    "Frame",
    "InstanceFeed",
    "SelectionNotice",
    "WebSocketUnavailable",
    "close_error",
    "handshake_error",
    "selection_message",
    "ws_url",
]
