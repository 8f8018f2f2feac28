"""The WebSocket operations and the followed reads, written once as flows.

``stream_instances`` (a pipelined :class:`~featurestream_client.ws.InstanceFeed`
resumed after dropped connections), ``subscribe`` (selection changes, over the
WebSocket or by polling) and ``iter_events`` (the decision log, page by page)
are generators of steps (see :mod:`._steps`) that the sync and async clients
run with their own drivers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

from featurestream_client import _core, _instances, ws
from featurestream_client._steps import Close, Connect, Emit, Flow, Poll, Recv, Send, Sleep
from featurestream_client._writes import StreamCore
from featurestream_client.errors import ConnectionFailed, FeatureStreamError
from featurestream_client.models import InstancesResult, Selection
from featurestream_client.retry import RetryPolicy

SubscribeMode = Literal["auto", "websocket", "poll"]

#: What :func:`_listen` gives for a connection that dropped and may be opened again.
_DROPPED = object()


def selection_op(stream_id: str) -> Flow[Selection]:
    """The stream's current selection."""
    selection, _ = yield from _core.selected_op(stream_id)
    assert selection is not None
    return selection


def stream_instances_op(
    core: StreamCore,
    data: Any,
    y: Any,
    *,
    batch_size: int,
    window: int,
    on_error: ws.OnError,
    on_selected: Callable[[Selection], None] | None,
    binary: bool,
    catalogue: _core.Catalogue,
    retry: RetryPolicy,
    recv_timeout: float | None,
) -> Flow[InstancesResult]:
    """``Stream.stream_instances``: number the frames, feed them, account for each one.

    The stream's algorithm decides how frames without labels travel: as .npy
    to an unsupervised stream, as JSON to a supervised one (which refuses them,
    saying labels are missing, where a .npy frame's last column would be taken
    for labels).
    """
    core._check_kind("instances")
    supervised = True
    data = yield from core.aligned_op(data)
    if binary:
        info = yield from core.info_op()
        core._check_kind("instances")
        supervised = yield from catalogue.supervised_op(info.algorithm)
    if core.producer.unknown is not None:
        # The next seq is held by a write of unknown outcome: frames (other content)
        # go after it if it was applied, so learn from the server whether it was.
        core.producer.next_seq = core.producer.unknown = None
    if core.producer.next_seq is None:
        yield from core.resync_op()
    first = core.producer.next_seq
    assert first is not None
    feed = ws.InstanceFeed(
        _instances.iter_frames(data, y, batch_size),
        first,
        window,
        on_error,
        on_selected,
        binary,
        supervised=supervised,
    )
    try:
        yield from _feed_op(core, feed, retry, recv_timeout)
    except FeatureStreamError as exc:
        if feed.pending:
            _frames_unknown(exc, core.producer.name, list(feed.pending))
        raise
    finally:
        # Frames without an answer may or may not have been applied: learn the
        # next seq from the server before the next write.
        core.producer.next_seq = None if feed.pending else feed.next_seq
    if feed.failure is not None:
        feed.failure.partial = feed.result()
        raise feed.failure
    return feed.result()


def _frames_unknown(exc: FeatureStreamError, producer: str, seqs: list[int]) -> None:
    """Say in ``exc`` that frames without an answer may have been applied, and how to tell."""
    shown = f"{seqs[0]}" if len(seqs) == 1 else f"{seqs[0]} to {seqs[-1]}"
    exc.detail = exc.detail.rstrip() + (
        f" The outcome of the frames without an answer (producer {producer!r}, seq {shown}) "
        "is unknown: they may have been applied. The stream's event log says which were "
        "(each frame's batch event carries its seq); the next write of this handle first "
        "asks the server for the producer's next seq, so nothing is applied twice."
    )
    exc.args = (exc.detail,)
    exc.outcome_unknown = True


def _feed_op(
    core: StreamCore, feed: ws.InstanceFeed, retry: RetryPolicy, recv_timeout: float | None
) -> Flow[None]:
    from websockets.exceptions import ConnectionClosed

    path = _core.stream_path(core.id, "/ws")
    conn = None
    failures = 0
    while not feed.done:
        if conn is None:
            query = {"producer": core.producer.name, "seq": feed.resume_seq()}
            try:
                conn = yield Connect(path, query)
            except ConnectionFailed as exc:
                failures += 1
                if not retry.should_retry(exc, failures):
                    raise
                yield Sleep(retry.delay(failures))
                continue
            for frame in feed.unanswered():
                yield Send(conn, frame.data)
        try:
            for frame in feed.take():
                yield Send(conn, frame.data)
            if feed.pending:
                feed.receive((yield Recv(conn, recv_timeout)))
                failures = 0
            if feed.notice is not None:  # a selection too large for a message: read it
                feed.announced((yield from selection_op(core.id)))
        except (ConnectionClosed, TimeoutError) as exc:
            closed = exc.rcvd if isinstance(exc, ConnectionClosed) else None
            code = closed.code if closed else None
            reason = closed.reason if closed else ""
            # What the server said before closing (acks, or why it closed) first.
            for message in (yield from _drain(conn)):
                feed.receive(message)
            yield Close(conn)
            conn = None
            failures += 1
            if code not in ws.RESUMABLE_CLOSE_CODES:
                raise ws.close_error(code, reason) from exc
            if failures >= retry.attempts:
                raise ConnectionFailed(
                    f"The WebSocket of stream {core.id!r} dropped {failures} times "
                    f"(last close code {code})."
                ) from exc
            yield Sleep(retry.delay(failures, 1.0 if code == 1013 else None))
    if conn is not None:
        yield Close(conn)
    feed.selection = yield from selection_op(core.id)


def subscribe_op(
    stream_id: str,
    mode: SubscribeMode,
    poll_interval: float,
    timeout: float | None,
    retry: RetryPolicy,
) -> Flow[None]:
    """``Stream.subscribe``: emit the current selection, then each change of its names.

    A connection still open when the flow ends is closed by the driver.
    """
    path = _core.stream_path(stream_id, "/ws")
    conn = None
    if mode != "poll":
        try:
            conn = yield Connect(path, {})
        except ws.WebSocketUnavailable:
            if mode == "websocket":
                raise
    current, etag = yield from _core.selected_op(stream_id)
    assert current is not None
    yield Emit(current)
    last = current
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return
        new: Selection | object | None
        if conn is None:
            yield Sleep(poll_interval if remaining is None else min(poll_interval, remaining))
            new, etag = yield from _core.selected_op(stream_id, etag)
        else:
            new = yield from _listen(conn, remaining)
            if new is _DROPPED:
                yield Close(conn)
                conn = yield from _reconnect(path, retry)
                new, etag = yield from _core.selected_op(stream_id)
            elif isinstance(new, ws.SelectionNotice) and new.version > last.version:
                # Too large a selection for a message: read it.
                new, etag = yield from _core.selected_op(stream_id)
        if isinstance(new, Selection) and new.version > last.version:
            if new.names != last.names:
                yield Emit(new)
                deadline = None if timeout is None else time.monotonic() + timeout
            last = new


def _reconnect(path: str, retry: RetryPolicy) -> Flow[Any]:
    """Open the listener's WebSocket again, with the client's retry policy."""
    failures = 0
    while True:
        try:
            return (yield Connect(path, {}))
        except ConnectionFailed as exc:
            failures += 1
            if not retry.should_retry(exc, failures):
                raise
            yield Sleep(retry.delay(failures))


def _listen(
    conn: Any, timeout: float | None
) -> Flow[Selection | ws.SelectionNotice | object | None]:
    from websockets.exceptions import ConnectionClosed

    try:
        message = yield Recv(conn, timeout)
    except TimeoutError:
        return None
    except ConnectionClosed as exc:
        for pending in (yield from _drain(conn)):
            ws.selection_message(pending)  # raises the server's reason for closing, if any
        code = exc.rcvd.code if exc.rcvd else None
        if code not in ws.RESUMABLE_CLOSE_CODES:
            raise ws.close_error(code, exc.rcvd.reason if exc.rcvd else "") from exc
        return _DROPPED
    return ws.selection_message(message)


def _drain(conn: Any) -> Flow[list[str | bytes]]:
    """Messages received before the connection closed and not yet read."""
    out: list[str | bytes] = []
    while True:
        try:
            out.append((yield Poll(conn)))
        except Exception:  # closed and empty (ConnectionClosed), or nothing more (TimeoutError)
            return out


def iter_events_op(
    stream_id: str, after: str | None, page_size: int, follow: bool, poll_interval: float
) -> Flow[None]:
    """``Stream.iter_events``: emit every event after ``after``; with ``follow``, wait for more."""
    while True:
        page = yield from _core.events_op(stream_id, after, page_size)
        for event in page.events:
            yield Emit(event)
        # The last page may have no ``next``: go on after its last event, never from the start.
        after = page.next or (page.events[-1].id if page.events else after)
        if len(page.events) < page_size:
            if not follow:
                return
            yield Sleep(poll_interval)


__all__ = [
    "SubscribeMode",
    "iter_events_op",
    "selection_op",
    "stream_instances_op",
    "subscribe_op",
]
