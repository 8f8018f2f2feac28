"""Every document featurestream sends to clients, rendered from typed data.

Responses of writes, the selection, the status, the event log, problem
documents (RFC 9457) and the WebSocket messages (``ack``, ``selection``,
``error``) are built here and nowhere else, so that an HTTP response, the copy
the store keeps for replays and the WebSocket message that reports the same
thing cannot drift apart. Documents on the hot paths (one decision or event
per column, one message per frame) go through orjson, which also writes a
non-finite score as null.

Some of these documents are stored (write responses for replays, the
selection and status summaries, the event log): their layout is part of the
stored data, so a change here must keep what is already stored readable and
replays byte-identical.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import orjson

from featurestream.engine.problem_docs import (  # the problem documents, rendered here too
    MAX_ERRORS,
    PROBLEMS,
    TYPE_BASE,
    Refused,
    parse_problem,
    problem,
    problem_of,
    replayed_problem,
    validation_problem,
)
from featurestream.engine.results import (
    AlgorithmInfo,
    EventPage,
    FeaturesWritten,
    FrameAck,
    InstancesWritten,
    Problem,
    Selection,
    StreamResource,
    StreamStatus,
)
from featurestream.selectors import REGISTRY, Decision, SelectedFeature

Document = dict[str, Any]

# --------------------------------------------------------------------------- writes


def decision(d: Decision) -> Document:
    """One feature's decision, as in the ``decisions`` of a features response."""
    return render_decisions([d])[0][0]


def render_decisions(decisions: Sequence[Decision]) -> tuple[list[Document], list[Document]]:
    """The ``decisions`` of a features response and their events, in one pass.

    :func:`decision` and :func:`decision_events` are this for one decision; a
    batch of 100,000 columns renders in one loop, with no call per column.
    """
    docs: list[Document] = []
    events: list[Document] = []
    add_doc = docs.append
    add_event = events.append
    for d in decisions:
        name = d.feature
        # The member's plain string: orjson writes the same bytes, twice as fast as
        # through the enum.
        reason: str | None = None if d.reason is None else d.reason._value_
        score = d.score
        accepted = d.accepted
        evicted = d.evicted
        doc: Document = {
            "name": name,
            "accepted": accepted,
            "evicted": [e.feature for e in evicted] if evicted else [],
            "reason": reason,
            "score": score,
        }
        event: Document = {
            "type": "accepted" if accepted else "rejected",
            "names": [name],
            "reason": reason,
            "score": score,
        }
        if d.by is not None:
            doc["by"] = event["by"] = d.by
        if d.group is not None:
            doc["group"] = event["group"] = d.group
        add_doc(doc)
        add_event(event)
        for e in evicted:
            add_event({"type": "evicted", "names": [e.feature], "reason": e.reason, "by": e.by})
    return docs, events


def features_written(r: FeaturesWritten, rendered: list[Document] | None = None) -> bytes:
    """The response of a features write (``rendered``: its decisions, already rendered)."""
    doc: Document = {
        "version": r.version,
        "seq": r.seq,
        "producer": r.producer,
        "decisions": [decision(d) for d in r.decisions] if rendered is None else rendered,
        "selected": list(r.selected),
    }
    if r.warnings:
        # Only the request that raised a status warning carries it (API.md, v1 extensions).
        doc["warnings"] = [dict(w) for w in r.warnings]
    return orjson.dumps(doc)


def instances_written(r: InstancesWritten) -> bytes:
    return orjson.dumps(
        {
            "version": r.version,
            "seq": r.seq,
            "producer": r.producer,
            "instances_seen": r.instances_seen,
            "selected": list(r.selected),
        }
    )


# --------------------------------------------------------------------------- events


def feature_batch_event(names: Sequence[str], groups: Sequence[str | None] | None) -> Document:
    event: Document = {"type": "batch", "names": list(names), "count": len(names)}
    if groups is not None:
        event["groups"] = list(groups)
    return event


def decision_events(d: Decision) -> list[Document]:
    """The ``accepted``/``rejected`` event of a decision, then one per eviction."""
    return render_decisions([d])[1]


def instance_batch_event(
    instances: int, instances_seen: int, mistakes: int, seq: int | None = None
) -> Document:
    """A batch of instances; a frame's batch also names its seq."""
    event: Document = {"type": "batch"}
    if seq is not None:
        event["seq"] = seq
    event.update(instances=instances, instances_seen=instances_seen, mistakes=mistakes)
    return event


def drift_events(drifts: Sequence[Any], detector: str, version: int) -> list[Document]:
    """The events of a batch's drift detections (selectors/drift.py, Detection)."""
    return [
        {
            "type": "drift",
            "version": version,
            "detector": detector,
            "instances_seen": d.instances_seen,
            "statistic": d.statistic,
            "moved": d.moved,
            "reset": d.reset,
        }
        for d in drifts
    ]


def log_entry(
    seq: int | None,
    producer: str,
    events: Sequence[Document],
    *,
    at: str | None = None,
    change: Mapping[str, Any] | None = None,
) -> bytes:
    """One commit's entry of the event log.

    ``at`` is the commit time, ``change`` how the selected set moved (``added``,
    ``removed``, ``size``; absent when it stayed the same). Entries written before
    the log kept them have neither: see ``engine/history.py``.
    """
    entry: Document = {"seq": seq, "producer": producer}
    if at is not None:
        entry["at"] = at
    if change is not None:
        entry["change"] = change
    entry["events"] = list(events)
    return orjson.dumps(entry)


def event_page(page: EventPage) -> Document:
    return {
        "events": [
            {
                "id": e.id,
                "version": e.version,
                "seq": e.seq,
                "producer": e.producer,
                "at": e.at,
                **e.body,
            }
            for e in page.events
        ],
        "next": page.next,
    }


# --------------------------------------------------------------------------- selection


def _finite(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return float(x)


def selected_feature(f: SelectedFeature) -> Document:
    out: Document = {"name": f.name, "score": _finite(f.score)}
    if f.group is not None:
        out["group"] = f.group
    return out


def selection(s: Selection) -> bytes:
    """The selection document (``GET /selected``), also stored and published."""
    return orjson.dumps(
        {
            "version": s.version,
            "features": [selected_feature(f) for f in s.features],
            "updated_at": s.updated_at,
        }
    )


def parse_selection(raw: bytes) -> Selection:
    """A stored or published selection document, back as a Selection."""
    doc = orjson.loads(raw)
    features = tuple(
        SelectedFeature(f["name"], f.get("score"), f.get("group")) for f in doc["features"]
    )
    return Selection(int(doc["version"]), features, str(doc.get("updated_at", "")))


# --------------------------------------------------------------------------- streams


def status_counters(counters: Mapping[str, Any]) -> bytes:
    """The selector's counters, as stored in the stream's summary."""
    return orjson.dumps(dict(counters))


def parse_status_counters(raw: bytes) -> dict[str, Any]:
    counters: dict[str, Any] = json.loads(raw)
    return counters


def status(s: StreamStatus) -> Document:
    """``GET /status``: the stream's identity and version, then the counters."""
    return {
        "id": s.id,
        "algorithm": s.algorithm,
        "kind": s.kind,
        "version": s.version,
        "updated_at": s.updated_at,
        **s.counters,
    }


def stream_resource(
    info: Mapping[str, Any], version: int, updated_at: str, status: bytes | None = None
) -> StreamResource:
    """A stream's stored info (written at creation), with its version.

    A supervised instance stream resolves its target from its first labelled
    batch: its status then holds the resolved ``target_type`` and ``classes``.
    """
    n_instances = info.get("n_instances")
    n_features = info.get("n_features")
    algorithm = str(info["algorithm"])
    cls = REGISTRY.get(algorithm)
    params = info["params"]
    if cls is not None:
        # A stream created before a parameter existed shows the value it runs with.
        params = cls.params_type.with_legacy(params)
    names = info.get("feature_names")
    target_type = info.get("target_type")
    classes = info.get("classes")
    if status is not None and info.get("kind") == "instances" and target_type is not None:
        counters = parse_status_counters(status)
        target_type = counters.get("target_type", target_type)
        classes = counters.get("classes", classes)
    return StreamResource(
        id=str(info["id"]),
        algorithm=algorithm,
        kind=str(info["kind"]),
        params=params,
        version=version,
        created_at=str(info["created_at"]),
        updated_at=updated_at,
        n_instances=None if n_instances is None else int(n_instances),
        n_features=None if n_features is None else int(n_features),
        tenant=info.get("tenant"),
        feature_names=None if names is None else tuple(str(n) for n in names),
        labels=info.get("labels"),
        ttl_seconds=info.get("ttl_seconds"),
        target_type=None if target_type is None else str(target_type),
        classes=None if classes is None else tuple(classes),
    )


def stream(r: StreamResource, *, names: bool = True) -> Document:
    """The stream resource; ``names=False`` leaves out an instance stream's feature names."""
    out: Document = {"id": r.id, "algorithm": r.algorithm, "kind": r.kind, "params": r.params}
    if r.n_instances is not None:
        out["n_instances"] = r.n_instances
    if r.n_features is not None:
        out["n_features"] = r.n_features
    if names and r.feature_names is not None:
        out["feature_names"] = list(r.feature_names)
    if r.labels:
        out["labels"] = dict(r.labels)
    if r.ttl_seconds is not None:
        out["ttl_seconds"] = r.ttl_seconds
    if r.target_type is not None:
        out["target_type"] = r.target_type
        if r.classes is not None:
            out["classes"] = list(r.classes)
    out.update(created_at=r.created_at, version=r.version, updated_at=r.updated_at)
    return out


def algorithm(a: AlgorithmInfo) -> Document:
    return {
        "name": a.name,
        "kind": a.kind,
        "title": a.title,
        "summary": a.summary,
        "params_schema": a.params_schema,
        "defaults": a.defaults,
        "supports_groups": a.supports_groups,
        "supervised": a.supervised,
        "score_kind": a.score_kind,
        "higher_is_better": a.higher_is_better,
        "score_by_magnitude": a.score_by_magnitude,
        "score_kind_by": a.score_kind_by,
        "decision_score_kind": a.decision_score_kind,
        "decision_higher_is_better": a.decision_higher_is_better,
    }


# --------------------------------------------------------------------------- WebSocket


def ack_message(ack: FrameAck) -> str:
    return orjson.dumps(
        {
            "type": "ack",
            "ack": ack.seq,
            "version": ack.version,
            "instances_seen": ack.instances_seen,
        }
    ).decode()


def selection_message(
    s: Selection,
    *,
    max_features: int | None = None,
    producer: str | None = None,
    seq: int | None = None,
) -> str:
    """A ``selection`` message; the first one of a connection also names its ``producer``
    and the ``seq`` of its first frame (what a client needs to resume).

    A selection of more than ``max_features`` features is not listed: the message
    is a notice of its ``version`` and ``size``, with ``truncated: true`` (the client
    reads the selection with ``GET /selected``), so that no message is large.
    """
    doc: Document = {"type": "selection"}
    if max_features is not None and len(s.features) > max_features:
        doc.update(version=s.version, size=len(s.features), truncated=True)
    else:
        doc["selected"] = s.names
        doc["version"] = s.version
        doc["features"] = [selected_feature(f) for f in s.features]
    if producer is not None:
        doc["producer"] = producer
        doc["seq"] = seq
    return orjson.dumps(doc).decode()


@lru_cache(maxsize=2)
def published_selection_message(raw: bytes, max_features: int) -> tuple[int, str]:
    """The version and the ``selection`` message of a published selection document.

    One publication reaches every subscriber of the process alike: it is parsed and
    rendered once for all of them (a large selection only counted, for its notice).
    """
    doc = orjson.loads(raw)
    version = int(doc["version"])
    if len(doc["features"]) > max_features:
        notice = {"type": "selection", "version": version, "size": len(doc["features"])}
        return version, orjson.dumps({**notice, "truncated": True}).decode()
    return version, selection_message(parse_selection(raw))


def error_message(p: Problem, seq: int | None) -> bytes:
    """The ``error`` message of a refused frame (``seq``) or of the connection (None).

    It is also the response stored for the refused frame's seq.
    """
    doc = {"type": "error", "error": problem(p), "seq": seq}
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()


def stored_reply(body: bytes, seq: int) -> FrameAck | Problem:
    """What a stored response says about its seq: applied (an ack) or refused.

    The response stored for a seq is that of the HTTP request that used it
    (``version``, ``instances_seen``...) or the ``error`` message of a refused
    frame, so an HTTP request and a frame are answered alike on a replay.
    """
    doc = orjson.loads(body)
    if doc.get("type") == "error":
        return parse_problem(doc["error"])
    return FrameAck(seq, int(doc["version"]), int(doc["instances_seen"]))


def stored_problem(body: bytes) -> Problem | None:
    """The problem of a stored response when a refused frame used up its seq."""
    # Write responses start with "version": only a refused frame's starts so.
    if not body.startswith(b'{"type":"error"'):
        return None
    return parse_problem(orjson.loads(body)["error"])


__all__ = [
    "MAX_ERRORS",
    "PROBLEMS",
    "TYPE_BASE",
    "Refused",
    "ack_message",
    "algorithm",
    "decision",
    "decision_events",
    "drift_events",
    "error_message",
    "event_page",
    "feature_batch_event",
    "features_written",
    "instance_batch_event",
    "instances_written",
    "log_entry",
    "parse_problem",
    "parse_selection",
    "parse_status_counters",
    "problem",
    "problem_of",
    "published_selection_message",
    "render_decisions",
    "replayed_problem",
    "selected_feature",
    "selection",
    "selection_message",
    "status",
    "status_counters",
    "stored_problem",
    "stored_reply",
    "stream",
    "stream_resource",
    "validation_problem",
]
