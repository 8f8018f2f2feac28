"""Plain, typed views of the server's JSON answers.

Each class keeps the whole answer in ``raw`` so fields added by newer servers
stay reachable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class StreamInfo:
    """A stream resource (``GET /v1/streams/{id}``)."""

    id: str
    algorithm: str
    kind: str
    params: dict[str, Any]
    version: int
    n_instances: int | None = None
    n_features: int | None = None
    created_at: str | None = None
    updated_at: str | None = None
    target_type: str | None = None
    classes: tuple[Any, ...] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> StreamInfo:
        return cls(
            id=str(d["id"]),
            algorithm=str(d["algorithm"]),
            kind=str(d["kind"]),
            params=dict(d.get("params") or {}),
            version=int(d["version"]),
            n_instances=_opt_int(d.get("n_instances")),
            n_features=_opt_int(d.get("n_features")),
            created_at=_opt_str(d.get("created_at")),
            updated_at=_opt_str(d.get("updated_at")),
            target_type=_opt_str(d.get("target_type")),
            classes=None if d.get("classes") is None else tuple(d["classes"]),
            raw=dict(d),
        )


@dataclass(frozen=True)
class Algorithm:
    """One entry of ``GET /v1/algorithms``."""

    name: str
    kind: str
    title: str
    summary: str
    params_schema: dict[str, Any]
    defaults: dict[str, Any]
    supports_groups: bool = False
    #: Whether its streams learn from labels (a server that does not say: True).
    supervised: bool = True

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Algorithm:
        return cls(
            name=str(d["name"]),
            kind=str(d["kind"]),
            title=str(d.get("title", d["name"])),
            summary=str(d.get("summary", "")),
            params_schema=dict(d.get("params_schema") or {}),
            defaults=dict(d.get("defaults") or {}),
            supports_groups=bool(d.get("supports_groups", False)),
            supervised=bool(d.get("supervised", True)),
        )


@dataclass(frozen=True)
class Decision:
    """What the selector decided about one arriving feature."""

    name: str
    accepted: bool
    evicted: tuple[str, ...] = ()
    reason: str | None = None
    score: float | None = None
    by: str | None = None
    group: str | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Decision:
        return cls(
            name=str(d["name"]),
            accepted=bool(d["accepted"]),
            evicted=tuple(str(e) for e in d.get("evicted") or ()),
            reason=_opt_str(d.get("reason")),
            score=_opt_float(d.get("score")),
            by=_opt_str(d.get("by")),
            group=_opt_str(d.get("group")),
        )


@dataclass(frozen=True)
class FeaturesResult:
    """The outcome of :meth:`Stream.add_features` / :meth:`Stream.add_groups`.

    Attributes
    ----------
    version : int
        The stream's version after the last request.
    decisions : tuple of Decision
        One per feature, in the order sent (across every chunk).
    selected : tuple of str
        The selection after the last request.
    seqs : tuple of int
        The sequence numbers used, one per request (chunk).
    replayed : bool
        True when the server answered at least one chunk from its stored
        responses (the request had already been applied).
    """

    version: int
    decisions: tuple[Decision, ...]
    selected: tuple[str, ...]
    seqs: tuple[int, ...] = ()
    replayed: bool = False

    @property
    def accepted(self) -> list[str]:
        """Names of the features accepted on arrival (some may be evicted later)."""
        return [d.name for d in self.decisions if d.accepted]

    @property
    def rejected(self) -> list[str]:
        return [d.name for d in self.decisions if not d.accepted]

    @staticmethod
    def combine(parts: Sequence[FeaturesResult], version: int = 0) -> FeaturesResult:
        if not parts:
            return FeaturesResult(version, (), ())
        return FeaturesResult(
            version=parts[-1].version,
            decisions=tuple(d for p in parts for d in p.decisions),
            selected=parts[-1].selected,
            seqs=tuple(s for p in parts for s in p.seqs),
            replayed=any(p.replayed for p in parts),
        )

    @classmethod
    def from_json(cls, d: Mapping[str, Any], replayed: bool = False) -> FeaturesResult:
        seq = d.get("seq")
        return cls(
            version=int(d["version"]),
            decisions=tuple(Decision.from_json(x) for x in d.get("decisions") or ()),
            selected=tuple(str(s) for s in d.get("selected") or ()),
            seqs=() if seq is None else (int(seq),),
            replayed=replayed,
        )


@dataclass(frozen=True)
class InstancesResult:
    """The outcome of :meth:`Stream.add_instances` or :meth:`Stream.stream_instances`.

    ``errors`` lists, for WebSocket streaming with ``on_error="skip"``, the
    frames the server refused (each used up its seq and changed nothing).
    """

    version: int
    instances_seen: int
    selected: tuple[str, ...]
    seqs: tuple[int, ...] = ()
    replayed: bool = False
    errors: tuple[Any, ...] = ()

    @staticmethod
    def combine(parts: Sequence[InstancesResult], version: int = 0) -> InstancesResult:
        if not parts:
            return InstancesResult(version, 0, ())
        return InstancesResult(
            version=parts[-1].version,
            instances_seen=parts[-1].instances_seen,
            selected=parts[-1].selected,
            seqs=tuple(s for p in parts for s in p.seqs),
            replayed=any(p.replayed for p in parts),
        )

    @classmethod
    def from_json(cls, d: Mapping[str, Any], replayed: bool = False) -> InstancesResult:
        seq = d.get("seq")
        return cls(
            version=int(d["version"]),
            instances_seen=int(d["instances_seen"]),
            selected=tuple(str(s) for s in d.get("selected") or ()),
            seqs=() if seq is None else (int(seq),),
            replayed=replayed,
        )


@dataclass(frozen=True)
class SelectedFeature:
    name: str
    score: float | None = None
    group: str | None = None


@dataclass(frozen=True)
class Selection:
    """The current selection, in the selector's own order."""

    version: int
    features: tuple[SelectedFeature, ...]
    updated_at: str | None = None

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.features]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Selection:
        return cls(
            version=int(d["version"]),
            features=tuple(
                SelectedFeature(
                    str(f["name"]), _opt_float(f.get("score")), _opt_str(f.get("group"))
                )
                for f in d.get("features") or ()
            ),
            updated_at=_opt_str(d.get("updated_at")),
        )

    @classmethod
    def from_message(cls, d: Mapping[str, Any]) -> Selection:
        """From a WebSocket selection message (``selected`` names, and ``features`` if sent)."""
        if isinstance(d.get("features"), list):
            return cls.from_json(d)
        features = tuple(SelectedFeature(str(name)) for name in d.get("selected") or ())
        return cls(int(d["version"]), features, _opt_str(d.get("updated_at")))


@dataclass(frozen=True)
class Event:
    """One entry of the decision log."""

    id: str
    version: int
    type: str
    seq: int | None = None
    producer: str | None = None
    names: tuple[str, ...] = ()
    reason: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Event:
        return cls(
            id=str(d["id"]),
            version=int(d["version"]),
            type=str(d["type"]),
            seq=_opt_int(d.get("seq")),
            producer=_opt_str(d.get("producer")),
            names=tuple(str(n) for n in d.get("names") or ()),
            reason=_opt_str(d.get("reason")),
            raw=dict(d),
        )


@dataclass(frozen=True)
class EventPage:
    """A page of the decision log; pass ``next`` as ``after`` to read on."""

    events: tuple[Event, ...]
    next: str | None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> EventPage:
        return cls(
            events=tuple(Event.from_json(e) for e in d.get("events") or ()),
            next=_opt_str(d.get("next")),
        )


__all__ = [
    "Algorithm",
    "Decision",
    "Event",
    "EventPage",
    "FeaturesResult",
    "InstancesResult",
    "SelectedFeature",
    "Selection",
    "StreamInfo",
]
