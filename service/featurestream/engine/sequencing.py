"""The one rule for a producer's ``seq``: fresh, replay, gap, or too old.

Every write that carries a seq (an HTTP request or a WebSocket frame) is
classified against the last seq the stream applied for its producer. A seq
at or below it is a replay, answered from the stored response; the next one
is applied; anything beyond it leaves a gap and is refused. A replay whose
stored response has left the replay window is refused as too old.

A log's partition (a consumer's producer, see ``featurestream.ingest``)
numbers its messages by their positions in the log, which increase but may
skip (a deleted entry, a compacted offset): for such a producer any seq
beyond the last is fresh, none leaves a gap.
"""

from __future__ import annotations

from dataclasses import dataclass

from featurestream.errors import SequenceConflict


@dataclass(frozen=True, slots=True)
class Fresh:
    """The producer's next seq: apply it."""

    seq: int


@dataclass(frozen=True, slots=True)
class Replay:
    """Already applied: answer with the response stored for it."""

    seq: int
    expected: int


@dataclass(frozen=True, slots=True)
class Gap:
    """Beyond the next seq: refused, nothing between was applied."""

    seq: int
    expected: int


@dataclass(frozen=True, slots=True)
class TooOld:
    """A replay whose stored response is no longer kept: refused."""

    seq: int
    expected: int


Verdict = Fresh | Replay | Gap | TooOld


def classify(seq: int, last: int, *, log: bool = False) -> Fresh | Replay | Gap:
    """Where ``seq`` stands when the producer's last applied seq is ``last``.

    ``log``: the producer is a log's partition, whose positions may skip.

    A :class:`Replay` becomes :class:`TooOld` when the store no longer holds
    its response (see :func:`too_old`).

    >>> classify(3, 2), classify(2, 2), classify(5, 2)
    (Fresh(seq=3), Replay(seq=2, expected=3), Gap(seq=5, expected=3))
    >>> classify(5, 2, log=True), classify(2, 2, log=True)
    (Fresh(seq=5), Replay(seq=2, expected=3))
    """
    if seq <= last:
        return Replay(seq, last + 1)
    if seq == last + 1 or log:
        return Fresh(seq)
    return Gap(seq, last + 1)


def too_old(replay: Replay) -> TooOld:
    return TooOld(replay.seq, replay.expected)


def conflict(verdict: Gap | TooOld, producer: str) -> SequenceConflict:
    """The error that refuses ``verdict`` (the same wording for HTTP and frames)."""
    problem = "leaves a gap" if isinstance(verdict, Gap) else "is older than the replay window"
    unknown = ""
    if verdict.expected == 1:
        unknown = (
            " The stream holds no record of this producer: it is new, or its record was "
            "dropped (idle past the producer retention, or past the cap of producers per "
            "stream), and its sequence starts afresh."
        )
    return SequenceConflict(
        f"seq {verdict.seq} of producer {producer!r} {problem}; the next expected seq "
        f"is {verdict.expected}.{unknown}",
        producer=producer,
        expected_seq=verdict.expected,
    )


__all__ = ["Fresh", "Gap", "Replay", "TooOld", "Verdict", "classify", "conflict", "too_old"]
