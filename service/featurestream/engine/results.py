"""Typed results of the engine: what it hands to the API layer.

The engine returns these values, never ready-made JSON; the wire module
(``engine/wire.py``) renders them into the documents clients receive. Bytes
appear only where the store keeps them (a stored response replayed verbatim,
the committed selection document published to subscribers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from featurestream.selectors import Decision, SelectedFeature


@dataclass(frozen=True, slots=True)
class StreamResource:
    """A stream as ``GET /v1/streams/{id}`` shows it."""

    id: str
    algorithm: str
    kind: str
    params: Mapping[str, Any]
    version: int
    created_at: str
    updated_at: str
    n_instances: int | None = None
    n_features: int | None = None
    tenant: str | None = None
    #: An instance stream's feature space, in order (streams created before it was kept: None).
    feature_names: tuple[str, ...] | None = None
    labels: Mapping[str, str] | None = None
    ttl_seconds: float | None = None
    target_type: str | None = None
    classes: tuple[float | str, ...] | None = None


@dataclass(frozen=True, slots=True)
class StreamStatus:
    """The stream's identity and version, and the selector's own counters."""

    id: str
    algorithm: str
    kind: str
    version: int
    updated_at: str
    counters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One event of the log: its id (``<version>-<index>``), origin and content."""

    id: str
    version: int
    seq: int | None
    producer: str | None
    # The event as stored: ``type``, ``names`` and the fields of its type.
    body: Mapping[str, Any]
    # The commit time (RFC 3339 UTC); None for entries stored before the log kept it.
    at: str | None = None


@dataclass(frozen=True, slots=True)
class EventPage:
    events: Sequence[EventRecord]
    next: str | None


@dataclass(frozen=True, slots=True)
class AlgorithmInfo:
    """One entry of the algorithm catalogue."""

    name: str
    kind: str
    title: str
    summary: str
    params_schema: Mapping[str, Any]
    defaults: Mapping[str, Any]
    supports_groups: bool
    supervised: bool
    # What the scores mean (see ``ScoreKind``): of the selection, with the default
    # parameters; by parameter value when a parameter decides it; of the decisions.
    score_kind: str = ""
    higher_is_better: bool = True
    score_by_magnitude: bool = False
    score_kind_by: Mapping[str, Mapping[str, str]] | None = None
    decision_score_kind: str | None = None
    decision_higher_is_better: bool | None = None


@dataclass(frozen=True, slots=True)
class Selection:
    """The selected features, in the selector's order, as of ``version``."""

    version: int
    features: Sequence[SelectedFeature]
    updated_at: str = ""

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.features]


@dataclass(frozen=True, slots=True)
class StoredSelection:
    """The committed selection document as the store holds it, and its version."""

    version: int
    document: bytes


@dataclass(frozen=True, slots=True)
class FeaturesWritten:
    """The response of a batch of feature columns."""

    version: int
    seq: int | None
    producer: str
    decisions: Sequence[Decision]
    selected: Sequence[str]
    # The status warnings this batch raised (``{code, message}``), e.g. untestable tests.
    warnings: Sequence[Mapping[str, str]] = ()


@dataclass(frozen=True, slots=True)
class InstancesWritten:
    """The response of a batch of instances (an HTTP request or one frame)."""

    version: int
    seq: int | None
    producer: str
    instances_seen: int
    selected: Sequence[str]


@dataclass(frozen=True, slots=True)
class Problem:
    """An RFC 9457 problem document: the answer to a refused request or frame."""

    type: str
    title: str
    status: int
    detail: str
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WriteResult:
    """The answer to one HTTP write.

    ``body`` is the stored response (byte-identical on a replay). ``problem``
    is set when the replayed seq was used up by a refused WebSocket frame: the
    request is then answered with that problem.
    """

    body: bytes
    replayed: bool
    version: int
    problem: Problem | None = None


@dataclass(frozen=True, slots=True)
class FrameAck:
    """A frame committed: the state includes it."""

    seq: int
    version: int
    instances_seen: int


@dataclass(frozen=True, slots=True)
class FrameResult:
    """The answer to one frame: an ack, or the problem that refused it.

    ``fatal`` marks a seq the stream cannot accept (a gap, or older than the
    replay window): the frames after it were not looked at.
    """

    seq: int
    reply: FrameAck | Problem
    replayed: bool = False
    fatal: bool = False


@dataclass(frozen=True, slots=True)
class FramesResult:
    results: Sequence[FrameResult]
    version: int
    # The committed selection when this group changed the selected set.
    selection: Selection | None = None


__all__ = [
    "AlgorithmInfo",
    "EventPage",
    "EventRecord",
    "FeaturesWritten",
    "FrameAck",
    "FrameResult",
    "FramesResult",
    "InstancesWritten",
    "Problem",
    "Selection",
    "StoredSelection",
    "StreamResource",
    "StreamStatus",
    "WriteResult",
]
