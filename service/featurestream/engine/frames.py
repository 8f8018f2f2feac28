"""Frames of instances from a WebSocket connection: applied in order, committed together.

A group of frames of one producer is classified seq by seq (see
``sequencing.py``): frames already applied are answered from their stored
responses, the fresh ones are applied in a worker thread, each as its own
batch, and the group is committed once (state, one ``batch`` event per frame,
the producer's seq, one stored response per frame). A fresh frame's content
digest (``idempotency.py``) is taken in the thread that applies it, right
before it is learnt, so fresh frames go to a worker thread once per group;
frames sent again are hashed together, before, to be compared with their
stored digests. A frame that is refused (it could not be decoded, the
selector refused its data, or it would make the state non-finite:
``NumericallyUnstable``) changes no state but uses up its seq: its
``error`` message is stored as its response.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream.engine import wire
from featurestream.engine.budget import Budget
from featurestream.engine.cache import Live
from featurestream.engine.idempotency import content_digest, replayed, seal
from featurestream.engine.outcome import Attempt, Outcome, StaleCache, finite_state, outcome_of
from featurestream.engine.results import (
    FrameAck,
    FrameResult,
    FramesResult,
    InstancesWritten,
    Problem,
)
from featurestream.engine.sequencing import Fresh, Replay, classify, conflict, too_old
from featurestream.errors import FeatureStreamError, InvalidInput, SeqReused
from featurestream.selectors import InstanceSelector


@dataclass(frozen=True)
class Frame:
    """One frame of instances from a connection, numbered ``seq`` by it.

    ``X`` and ``y`` are as decoded (float32 frames stay float32 until
    ``contiguous`` converts them, where they are hashed: see ``prepared``).
    ``error`` is set for a frame refused before reaching the engine
    (it could not be decoded): it changes no state but uses up its seq.
    """

    seq: int
    X: npt.NDArray[np.floating[Any]] | None = None
    y: npt.NDArray[np.floating[Any]] | None = None
    error: FeatureStreamError | None = None


def contiguous(frame: Frame) -> Frame:
    """The frame with a dense X as one C-contiguous float64 block.

    A binary frame's X is a view of the bytes received that skips the label
    column, and the selector needs it contiguous: the copy is made here, in
    the worker thread that hashes and applies the frame (``prepared``), so the
    hash and the selector read it while it is in cache (a commit that must be
    tried again makes it again).
    float32 becomes float64 (exactly, as the selector would convert it).

    >>> A = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> f = contiguous(Frame(7, A[:, :-1], A[:, -1]))
    >>> f.seq, f.X.tolist(), f.X.dtype.name, f.X.flags.c_contiguous
    (7, [[0.0, 1.0], [3.0, 4.0]], 'float64', True)
    >>> contiguous(f) is f
    True
    """
    X = frame.X
    if not isinstance(X, np.ndarray) or (X.dtype == np.float64 and X.flags.c_contiguous):
        return frame
    return Frame(frame.seq, np.ascontiguousarray(X, dtype=np.float64), frame.y, frame.error)


def prepared(frame: Frame) -> tuple[Frame, bytes]:
    """The frame ``contiguous``, and its content digest (``idempotency.py``).

    The digest is that of the frame's instances and labels, or, for a frame
    refused before reaching the engine, of why it was refused. Costly for a
    large frame (a copy and a hash of every value): in a worker thread then.

    >>> A = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> f, digest = prepared(Frame(7, A[:, :-1], A[:, -1]))
    >>> f.X.flags.c_contiguous, digest == content_digest("instances", A[:, :-1], A[:, -1])
    (True, True)
    >>> prepared(Frame(8, error=InvalidInput("bad")))[1] == content_digest("refused", "bad")
    True
    """
    if frame.error is not None:
        return frame, content_digest("refused", frame.error.message)
    ready = contiguous(frame)
    return ready, content_digest("instances", ready.X, ready.y)


# One applied or refused frame: its reply, and the response stored for its seq
# (sealed with the frame's content digest).
Reply = tuple[int, FrameAck | Problem, bytes]
Apply = Callable[[Live, Sequence[Frame], int], Awaitable[tuple[Outcome | None, list[Reply]]]]


def public_ids(stream_id: str, live: Live) -> Callable[[str], str]:
    """Problems show the stream's public id, not its tenant-scoped stored id."""
    shown = str(live.info["id"])
    return lambda sid: shown if sid == stream_id else sid


async def attempt_frames(
    stream_id: str,
    live: Live,
    frames: Sequence[Frame],
    producer: str,
    digests_of: Callable[[Sequence[Frame]], Awaitable[list[bytes]]],
    stored_response: Callable[[int], Awaitable[bytes | None]],
    apply: Apply,
    *,
    log: bool = False,
) -> Attempt[FramesResult]:
    """Classify the frames, apply the fresh ones, and say what to commit.

    A frame sent again is compared by its content digest (``idempotency.py``)
    with the one its seq was applied with: a frame whose seq was applied with
    other content is refused (not fatally: the connection goes on with its
    next frame) and uses up nothing. ``digests_of`` hashes the frames sent
    again whose responses are stored, in one call (a resumed connection
    resends up to its window); fresh frames are hashed where they are applied
    (``apply_frames``). ``log``: the producer is a log's partition, whose seqs
    may skip (``sequencing.py``).
    """
    shown = public_ids(stream_id, live)
    last = live.producers.get(producer, 0)
    fresh: list[Frame] = []
    sent_again: list[tuple[Frame, Replay, bytes]] = []  # with their stored responses
    fatal: list[FrameResult] = []
    for f in frames:
        verdict = classify(f.seq, fresh[-1].seq if fresh else last, log=log)
        if isinstance(verdict, Fresh):
            fresh.append(f)
            continue
        if isinstance(verdict, Replay):
            stored = await stored_response(f.seq)
            if stored is not None:
                sent_again.append((f, verdict, stored))
                continue
        if live.from_cache:
            # A refusal from a cached copy: the engine checks the copy is current first.
            raise StaleCache
        if isinstance(verdict, Replay):
            refusal = conflict(too_old(verdict), producer)
        else:
            refusal = conflict(verdict, producer)
        fatal.append(FrameResult(f.seq, wire.problem_of(refusal, shown), fatal=True))
        break
    results: list[FrameResult] = []
    digests = await digests_of([f for f, _, _ in sent_again]) if sent_again else []
    for (f, verdict, stored), digest in zip(sent_again, digests, strict=True):
        try:
            body = replayed(stored, digest, producer, f.seq, verdict.expected)
        except SeqReused as exc:
            results.append(FrameResult(f.seq, wire.problem_of(exc, shown)))
            continue
        results.append(FrameResult(f.seq, wire.stored_reply(body, f.seq), replayed=True))
    if not fresh:
        return Attempt(FramesResult(results + fatal, live.version))
    version = live.version + 1
    outcome, replies = await apply(live, fresh, version)
    # Results in frame order: replays first (they precede), then the fresh frames.
    ordered = results + [FrameResult(seq, reply) for seq, reply, _ in replies] + fatal
    responses = [(seq, sealed) for seq, _, sealed in replies]
    if outcome is None:
        return Attempt(FramesResult(ordered, live.version), responses=responses)
    selection = outcome.selection if outcome.selection_changed else None
    return Attempt(
        FramesResult(ordered, version, selection),
        outcome,
        seq=fresh[-1].seq,
        responses=responses,
    )


def apply_frames(
    stream_id: str,
    live: Live,
    frames: Sequence[Frame],
    producer: str,
    version: int,
    now: str,
    budget: float = 0.0,
) -> tuple[Outcome | None, list[Reply]]:
    """Apply fresh frames in order (in a worker thread); refused frames keep the state.

    Each frame is made ``contiguous`` and hashed (``prepared``) right before it
    is learnt; its reply comes with its response sealed with that digest, as
    its seq stores it. Each frame's work has its own time ``budget`` (seconds,
    0: none): a frame over it is refused (``RequestTooExpensive``) like a frame
    of bad data. ``now`` is the commit time the log entry carries.
    """
    shown = public_ids(stream_id, live)
    sel = live.selector
    assert isinstance(sel, InstanceSelector)
    before = sel.selected()
    events: list[dict[str, Any]] = []
    replies: list[Reply] = []

    def refuse(seq: int, error: FeatureStreamError, digest: bytes) -> None:
        problem = wire.problem_of(error, shown)
        replies.append((seq, problem, seal(digest, wire.error_message(problem, seq))))

    for given in frames:
        f, digest = prepared(given)
        if f.error is not None or f.X is None:
            error = f.error or InvalidInput("The frame holds no instances.", field="X")
            refuse(f.seq, error, digest)
            continue
        if f.X.shape[0] == 0:
            # No rows: acknowledged at the version that holds what came before it,
            # with no event (its seq is used up like any other frame's).
            at = version if events else live.version
            seen = sel.instances_seen
            written = InstancesWritten(at, f.seq, producer, seen, sel.selected())
            body = wire.instances_written(written)
            replies.append((f.seq, FrameAck(f.seq, at, seen), seal(digest, body)))
            continue
        snapshot = sel.snapshot()
        checkpoint = Budget(budget, "instances", f.X.shape[0])
        try:
            checkpoint.start()
            update = sel.learn_instances(f.X, f.y, checkpoint=checkpoint)
            checkpoint(f.X.shape[0])
            # A frame that makes the state non-finite is refused like bad data.
            finite_state(sel, stream_id)
        except FeatureStreamError as exc:
            # The frame is refused as a whole: put the selector back as it was.
            live.selector = sel = type(sel).resume(sel.params, snapshot)
            refuse(f.seq, exc, digest)
            continue
        events.append(
            wire.instance_batch_event(
                update.instances, update.instances_seen, update.mistakes, seq=f.seq
            )
        )
        events += wire.drift_events(update.drifts, sel.params.drift, version)
        written = InstancesWritten(version, f.seq, producer, update.instances_seen, sel.selected())
        ack = FrameAck(f.seq, version, update.instances_seen)
        replies.append((f.seq, ack, seal(digest, wire.instances_written(written))))
    if not events:
        return None, replies
    # The log entry is the last fresh frame's, as the commit is (attempt_frames); it
    # carries the time ``now``.
    last, shown_id = frames[-1].seq, str(live.info["id"])
    outcome = outcome_of(sel, shown_id, version, now, events, (), before, last, producer)
    return outcome, replies


__all__ = ["Frame", "apply_frames", "attempt_frames", "contiguous", "prepared"]
