"""A write's work on a stream's selector, as a value that can travel to a compute worker.

The engine decides what a write does (its sequence, its names, what to
commit); the selector's part, the heavy one, is described by a
:data:`Work` value and done by :func:`perform`: in a worker thread of the
serving process, or in a compute worker process (``engine/compute.py``).
Everything a work value holds pickles (arrays, names, a budget, the time
its events carry), and so do the results (the response, the sealed response
stored for the write's seq, the :class:`~featurestream.engine.outcome.Outcome`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream import codec
from featurestream.engine import wire
from featurestream.engine.budget import Budget
from featurestream.engine.cache import Live, footprint
from featurestream.engine.frames import Frame, Reply, apply_frames
from featurestream.engine.idempotency import seal
from featurestream.engine.outcome import Outcome, outcome_of
from featurestream.engine.results import FeaturesWritten, InstancesWritten
from featurestream.errors import NumericallyUnstable
from featurestream.selectors import (
    REGISTRY,
    FeatureSelector,
    InstanceSelector,
    InstanceUpdate,
    Selector,
)


@dataclass(frozen=True)
class _Request:
    """One HTTP write: its seq and producer, its time budget, the time its events carry,
    and the digest its response is sealed with (for a write with a seq)."""

    seq: int | None
    producer: str
    budget: Budget
    now: str
    digest: bytes


@dataclass(frozen=True)
class FeaturesWork(_Request):
    """Learn feature columns ``X`` (``(b, n)``) under ``names``."""

    names: list[str]
    X: npt.NDArray[np.float64]
    groups: Sequence[str | None] | None


@dataclass(frozen=True)
class InstancesWork(_Request):
    """Learn instances ``X`` (``(m, d)``) with labels ``y`` as one batch."""

    X: npt.NDArray[np.float64]
    y: npt.NDArray[np.float64] | None


@dataclass(frozen=True)
class FramesWork:
    """Learn fresh frames of one producer in order, each as its own batch."""

    stream_id: str
    frames: Sequence[Frame]
    producer: str
    budget: float
    now: str


Work = FeaturesWork | InstancesWork | FramesWork
# What a request's work answers: its response and the response sealed for its seq
# (b"" without a seq), or a group of frames' replies.
Answer = tuple[bytes, bytes] | list[Reply]


def perform(live: Live, work: Work, version: int) -> tuple[Answer, Outcome | None]:
    """Do ``work`` on ``live``'s selector as version ``version``; the answer and the
    outcome (None: the state did not change). On any error the selector is put back
    as it was before, and the error is raised."""
    sel = live.selector
    assert sel is not None
    previous = sel.snapshot()
    try:
        if isinstance(work, FramesWork):
            outcome, replies = apply_frames(
                work.stream_id,
                live,
                work.frames,
                work.producer,
                version,
                work.now,
                work.budget,
            )
            return replies, outcome
        if isinstance(work, FeaturesWork):
            body, outcome = _features(live, work, version)
        else:
            body, outcome = _instances(live, work, version)
        # Sealed here, beside the selector's work: a large response is compressed.
        return (body, seal(work.digest, body) if work.seq is not None else b""), outcome
    except BaseException:
        live.selector = type(sel).resume(sel.params, previous)
        raise


def resume_stored(stream_id: str, blob: bytes) -> tuple[Selector[Any, Any], int]:
    """The selector of a stored state, and the memory its decoded state takes.

    A state written before states were checked may not be finite: computing on it
    could stall the process inside a numeric kernel, so it is refused."""
    decoded = codec.decode(blob)
    field = codec.nonfinite(decoded.state)
    if field is not None:
        raise NumericallyUnstable(
            f"The stored state of stream {stream_id!r} is not finite ({field!r} holds "
            "NaN or infinite values); no request can be applied to it. Its selection "
            "and status can still be read; delete and re-create the stream to go on.",
            stream_id=stream_id,
        )
    cls = REGISTRY[decoded.selector]
    # Stored by any earlier version: parameters added since take the value
    # the stream ran with (Params.legacy), not today's default.
    params = cls.params_type.from_stored(decoded.params)
    return cls.resume(params, decoded.state), footprint(decoded.state)


def _features(live: Live, work: FeaturesWork, version: int) -> tuple[bytes, Outcome | None]:
    sel = live.selector
    assert isinstance(sel, FeatureSelector)
    before = sel.selected()
    chosen, seq, producer = work.names, work.seq, work.producer
    if not chosen:
        # No columns: nothing to decide, no event, no new version.
        empty = FeaturesWritten(live.version, seq, producer, [], before)
        return wire.features_written(empty), None
    warned = {w["code"] for w in sel.warnings()}
    budget = work.budget
    budget.start()
    decisions = sel.learn_features(chosen, work.X, work.groups, checkpoint=budget)
    # A selector that cannot stop inside its batch is held to the budget here.
    budget(len(chosen))
    docs, decided = wire.render_decisions(decisions)
    events = [wire.feature_batch_event(chosen, work.groups), *decided]
    selected = sel.selected()
    raised = [w for w in sel.warnings() if w["code"] not in warned]
    written = FeaturesWritten(version, seq, producer, decisions, selected, raised)
    shown = str(live.info["id"])
    outcome = outcome_of(sel, shown, version, work.now, events, chosen, before, seq, producer)
    return wire.features_written(written, docs), outcome


def _instances(live: Live, work: InstancesWork, version: int) -> tuple[bytes, Outcome | None]:
    sel = live.selector
    assert isinstance(sel, InstanceSelector)
    before = sel.selected()
    seq, producer = work.seq, work.producer
    if work.X.shape[0] == 0:
        # No instances: nothing learnt, no event, no new version.
        seen = sel.instances_seen
        empty = InstancesWritten(live.version, seq, producer, seen, before)
        return wire.instances_written(empty), None
    work.budget.start()
    update: InstanceUpdate = sel.learn_instances(work.X, work.y, checkpoint=work.budget)
    work.budget(work.X.shape[0])
    events = [
        wire.instance_batch_event(update.instances, update.instances_seen, update.mistakes),
        *wire.drift_events(update.drifts, sel.params.drift, version),
    ]
    written = InstancesWritten(version, seq, producer, update.instances_seen, sel.selected())
    shown = str(live.info["id"])
    outcome = outcome_of(sel, shown, version, work.now, events, (), before, seq, producer)
    return wire.instances_written(written), outcome


__all__ = [
    "Answer",
    "FeaturesWork",
    "FramesWork",
    "InstancesWork",
    "Work",
    "perform",
    "resume_stored",
]
