"""Plain, typed views of the server's JSON answers.

Each class keeps the whole answer in ``raw`` so fields added by newer servers
stay reachable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from featurestream_client._decisions import UNREAD_DECISIONS as UNREAD_DECISIONS
from featurestream_client._decisions import Decision, segments_of
from featurestream_client._decisions import Decisions as Decisions
from featurestream_client._fields import opt_float, opt_int, opt_str

#: How many names a summary (``repr``) shows before it counts the rest.
SHOWN_NAMES = 8


def _names(names: Sequence[str]) -> str:
    """A short view of a list of names: the first few, then how many more."""
    shown = ", ".join(repr(n if len(n) <= 40 else n[:37] + "...") for n in names[:SHOWN_NAMES])
    more = len(names) - SHOWN_NAMES
    return f"[{shown}{f', ... {more} more' if more > 0 else ''}] ({len(names)})"


def _seqs(seqs: Sequence[int]) -> str:
    if len(seqs) <= 3:
        return repr(tuple(seqs))
    return f"({seqs[0]}..{seqs[-1]}, {len(seqs)} requests)"


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
    #: An instance stream's features, in order (None when the server does not say).
    feature_names: tuple[str, ...] | None = field(default=None, repr=False)
    #: The stream's bookkeeping labels, and its time to live (None: none).
    labels: dict[str, str] = field(default_factory=dict)
    ttl_seconds: float | None = None
    target_type: str | None = None
    classes: tuple[Any, ...] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> StreamInfo:
        names = d.get("feature_names")
        return cls(
            id=str(d["id"]),
            algorithm=str(d["algorithm"]),
            kind=str(d["kind"]),
            params=dict(d.get("params") or {}),
            version=int(d["version"]),
            n_instances=opt_int(d.get("n_instances")),
            n_features=opt_int(d.get("n_features")),
            created_at=opt_str(d.get("created_at")),
            updated_at=opt_str(d.get("updated_at")),
            feature_names=None if names is None else tuple(str(n) for n in names),
            labels={str(k): str(v) for k, v in (d.get("labels") or {}).items()},
            ttl_seconds=opt_float(d.get("ttl_seconds")),
            target_type=opt_str(d.get("target_type")),
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
    #: What the selection's scores mean with the default parameters (None: the server
    #: does not say), whether higher ranks first, and whether the absolute value
    #: ranks (a signed weight).
    score_kind: str | None = None
    higher_is_better: bool = True
    score_by_magnitude: bool = False
    #: The score kind by the value of the parameter that decides it: {param: {value: kind}}.
    score_kind_by: dict[str, dict[str, str]] = field(default_factory=dict)
    #: What a decision's score means (feature streams; None for instance streams).
    decision_score_kind: str | None = None
    decision_higher_is_better: bool | None = None

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
            score_kind=opt_str(d.get("score_kind")),
            higher_is_better=bool(d.get("higher_is_better", True)),
            score_by_magnitude=bool(d.get("score_by_magnitude", False)),
            score_kind_by={
                str(k): {str(v): str(kind) for v, kind in dict(by).items()}
                for k, by in dict(d.get("score_kind_by") or {}).items()
            },
            decision_score_kind=opt_str(d.get("decision_score_kind")),
            decision_higher_is_better=d.get("decision_higher_is_better"),
        )

    def score_kind_for(self, params: Mapping[str, Any] | None = None) -> str | None:
        """What the selection's scores mean for a stream created with ``params``."""
        for name, kinds in self.score_kind_by.items():
            value = (params or {}).get(name, self.defaults.get(name))
            if str(value) in kinds:
                return kinds[str(value)]
        return self.score_kind

    def rank(self, features: Sequence[SelectedFeature]) -> list[SelectedFeature]:
        """``features`` best first by score (``higher_is_better``, ``score_by_magnitude``);
        features without a score last, ties in the order given."""

        def key(f: SelectedFeature) -> tuple[bool, float]:
            if f.score is None or f.score != f.score:  # None or NaN
                return (True, 0.0)
            v = abs(f.score) if self.score_by_magnitude else f.score
            return (False, -v if self.higher_is_better else v)

        return sorted(features, key=key)


@dataclass(frozen=True)
class FeaturesResult:
    """The outcome of :meth:`Stream.add_features` / :meth:`Stream.add_groups`.

    Attributes
    ----------
    version : int
        The stream's version after the last request.
    decisions : Decisions
        One per feature, in the order sent (across every chunk): a read-only
        sequence of :class:`Decision` (each built when first read).
    selected : tuple of str
        The selection after the last request.
    seqs : tuple of int
        The sequence numbers used, one per request (chunk).
    replayed : bool
        True when the server answered at least one chunk from its stored
        responses (the request had already been applied).
    warnings : tuple of dict
        The status warnings these requests raised, each ``{"code", "message"}``
        (e.g. ``untestable-tests``); the stream's status keeps showing them.
    """

    version: int
    decisions: Decisions
    selected: tuple[str, ...]
    seqs: tuple[int, ...] = ()
    replayed: bool = False
    warnings: tuple[dict[str, str], ...] = ()

    def __repr__(self) -> str:
        return (
            f"FeaturesResult(version={self.version}, decisions={len(self.decisions)} "
            f"({len(self.accepted)} accepted), selected={_names(self.selected)}, "
            f"seqs={_seqs(self.seqs)}, replayed={self.replayed})"
        )

    @property
    def accepted(self) -> list[str]:
        """Names of the features accepted on arrival (some may be evicted later)."""
        return self.decisions.names(accepted=True)

    @property
    def rejected(self) -> list[str]:
        return self.decisions.names(accepted=False)

    @staticmethod
    def combine(parts: Sequence[FeaturesResult], version: int = 0) -> FeaturesResult:
        if not parts:
            return FeaturesResult(version, Decisions(), ())
        return FeaturesResult(
            version=parts[-1].version,
            decisions=Decisions._joined(
                chain.from_iterable(segments_of(p.decisions) for p in parts)
            ),
            selected=parts[-1].selected,
            seqs=tuple(s for p in parts for s in p.seqs),
            replayed=any(p.replayed for p in parts),
            warnings=tuple(w for p in parts for w in p.warnings),
        )

    @classmethod
    def from_answer(
        cls, content: bytes, replayed: bool, parse: Callable[[bytes], Any]
    ) -> FeaturesResult:
        """From an answer's JSON text, ``parse`` reading it (a module-level function).

        The decisions of a large answer stay its text until they are first
        read (see ``_Unread``): what is parsed now is freed at once.
        """
        d = parse(content)
        count = len(d.get("decisions") or ())
        if count < UNREAD_DECISIONS:
            return cls.from_json(d, replayed)
        return cls.from_json(d, replayed, Decisions.unread(content, count, parse))

    @classmethod
    def from_json(
        cls, d: Mapping[str, Any], replayed: bool = False, decisions: Decisions | None = None
    ) -> FeaturesResult:
        """From a parsed answer (``decisions``: its decisions, when already made)."""
        seq = d.get("seq")
        return cls(
            version=int(d["version"]),
            decisions=Decisions(d.get("decisions") or ()) if decisions is None else decisions,
            selected=tuple(str(s) for s in d.get("selected") or ()),
            seqs=() if seq is None else (int(seq),),
            replayed=replayed,
            warnings=tuple(
                {"code": str(w.get("code", "")), "message": str(w.get("message", ""))}
                for w in d.get("warnings") or ()
                if isinstance(w, Mapping)
            ),
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

    def __repr__(self) -> str:
        errors = f", errors={len(self.errors)}" if self.errors else ""
        return (
            f"InstancesResult(version={self.version}, instances_seen={self.instances_seen}, "
            f"selected={_names(self.selected)}, seqs={_seqs(self.seqs)}, "
            f"replayed={self.replayed}{errors})"
        )

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

    def __repr__(self) -> str:
        return (
            f"Selection(version={self.version}, features={_names(self.names)}, "
            f"updated_at={self.updated_at!r})"
        )

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.features]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Selection:
        return cls(
            version=int(d["version"]),
            features=tuple(
                SelectedFeature(str(f["name"]), opt_float(f.get("score")), opt_str(f.get("group")))
                for f in d.get("features") or ()
            ),
            updated_at=opt_str(d.get("updated_at")),
        )

    @classmethod
    def from_message(cls, d: Mapping[str, Any]) -> Selection:
        """From a WebSocket selection message (``selected`` names, and ``features`` if sent)."""
        if isinstance(d.get("features"), list):
            return cls.from_json(d)
        features = tuple(SelectedFeature(str(name)) for name in d.get("selected") or ())
        return cls(int(d["version"]), features, opt_str(d.get("updated_at")))


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
            seq=opt_int(d.get("seq")),
            producer=opt_str(d.get("producer")),
            names=tuple(str(n) for n in d.get("names") or ()),
            reason=opt_str(d.get("reason")),
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
            next=opt_str(d.get("next")),
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
