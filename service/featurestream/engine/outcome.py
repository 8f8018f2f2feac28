"""What one write commits: the new state of a stream, and the store commit that carries it."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Generic, TypeVar

from featurestream import codec
from featurestream.engine import wire
from featurestream.engine.cache import Live, footprint
from featurestream.engine.packing import pack
from featurestream.engine.results import Selection
from featurestream.errors import NumericallyUnstable
from featurestream.selectors import Selector
from featurestream.store.base import Commit

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome:
    """The new state of a stream after one request or one group of frames.

    Everything in it is rendered in the worker thread that applied the change:
    the event log entry too, so that the per-column events of a large write
    (tens of thousands of documents) die with that thread's work, not live on
    beside the event loop until the commit.
    """

    # The change's event log entry (its events, and how the selected set moved),
    # packed (engine/packing.py).
    entry: bytes
    names: Sequence[str]
    blob: bytes
    selection: Selection
    selection_json: bytes
    status: bytes
    selection_changed: bool
    # What the change processed, for /metrics: counted here, in the worker thread,
    # since a request of many columns has as many events.
    tally: Counter[str]
    # Memory the new state takes once decoded (the stream's weight in the cache).
    footprint: int = 0


@dataclass(frozen=True)
class Attempt(Generic[T]):
    """What one attempt at a write commits, and what the caller gets once it is committed.

    With no ``outcome`` the state stays as it is; with neither an outcome nor
    ``responses`` nothing is committed and ``result`` is returned at once (a replay).
    """

    result: T
    outcome: Outcome | None = None
    seq: int | None = None
    responses: Sequence[tuple[int, bytes]] = ()


class StaleCache(Exception):
    """The cached copy of a stream is behind the store."""


def finite_state(sel: Selector[Any, Any], stream_id: str) -> Any:
    """The selector's state, refused when a float in it is NaN or infinite.

    Every state the engine commits passes here: a non-finite one would answer
    with NaN scores and could stall the next request inside a numeric kernel.
    """
    state = sel.snapshot()
    field = codec.nonfinite(state)
    if field is not None:
        raise NumericallyUnstable(
            f"This data would make the state of stream {stream_id!r} non-finite "
            f"({sel.name}'s {field!r} overflows float64); nothing was applied. "
            "Rescale the data: values this large cannot be computed on.",
            stream_id=stream_id,
        )
    return state


def outcome_of(
    sel: Selector[Any, Any],
    stream_id: str,
    version: int,
    now: str,
    events: Sequence[dict[str, Any]],
    names: Sequence[str],
    before: Sequence[str],
    seq: int | None,
    producer: str,
) -> Outcome:
    """Snapshot the selector after a change (in the worker thread that applied it).

    ``before`` is the selection (names, in order) the change started from;
    ``seq`` and ``producer`` are the write's, as its log entry names them.
    Raises NumericallyUnstable when the state is not finite (see ``finite_state``).
    """
    state = finite_state(sel, stream_id)
    selection = Selection(version, sel.selected_features(), now)
    after = selection.names
    # How the selected set moved (None: the same set), kept in the log for the history;
    # ``at``: the time the selection document of this version carries (updated_at).
    change = change_of(before, after)
    tally = tally_of(events)
    if change is None and tally["drifts"]:
        # A drift is in the history even when the set stayed (nothing added or removed).
        change = {"added": [], "removed": [], "size": len(after)}
    entry = pack(wire.log_entry(seq, producer, events, at=now, change=change))
    return Outcome(
        entry=entry,
        names=names,
        blob=codec.encode(sel.name, sel.params.to_dict(), state),
        selection=selection,
        selection_json=wire.selection(selection),
        status=wire.status_counters(sel.status()),
        selection_changed=tuple(before) != tuple(after),
        tally=tally,
        footprint=footprint(sel.snapshot()),
    )


def change_of(before: Sequence[str], after: Sequence[str]) -> dict[str, Any] | None:
    """How the selected set moved from ``before`` to ``after`` (None: the same set).

    ``added`` in the order of ``after``, ``removed`` in the order of ``before``.

    >>> change_of(["a", "b"], ["b", "c"])
    {'added': ['c'], 'removed': ['a'], 'size': 2}
    >>> change_of(["a", "b"], ["b", "a"]) is None
    True
    """
    was, now = set(before), set(after)
    if was == now:
        return None
    return {
        "added": [n for n in after if n not in was],
        "removed": [n for n in before if n not in now],
        "size": len(now),
    }


def tally_of(events: Sequence[dict[str, Any]]) -> Counter[str]:
    """What a change processed: columns, instances, and decisions by kind.

    A write of many columns has an event per column: they are counted by type
    in one C-level pass (``Counter`` of ``map``), not one Python step each.

    >>> c = tally_of([{"type": "batch", "count": 2}, {"type": "accepted"}, {"type": "rejected"}])
    >>> c["features_processed"], c["decisions_accepted"], c["decisions_rejected"]
    (2, 1, 1)
    """
    kinds = Counter(map(itemgetter("type"), events))
    c: Counter[str] = Counter()
    batches = kinds.pop("batch", 0)
    if "drift" in kinds:
        c["drifts"] = kinds.pop("drift")
    # A batch event per request or frame (a features write's is its first event):
    # the search stops at the last one.
    for ev in events:
        if not batches:
            break
        if ev["type"] == "batch":
            c["features_processed"] += int(ev.get("count", 0))
            c["instances_processed"] += int(ev.get("instances", 0))
            batches -= 1
    for kind, n in kinds.items():
        c[f"decisions_{kind}"] = n
    return c


def commit_of(
    live: Live,
    producer: str,
    step: Attempt[Any],
    now: str,
    seen_ms: int | None = None,
    drops: tuple[str, ...] = (),
) -> Commit:
    """The store commit of ``step`` on top of the version ``live`` holds.

    ``seen_ms``: when the producer wrote (None: no time is recorded); ``drops``: the
    producer records the commit forgets (``producers.py``).
    """
    outcome = step.outcome
    producer_of = producer if step.responses else None
    if outcome is None:
        # Only the producer's records change (frames refused, their seqs used up).
        return Commit(
            commit_id=uuid.uuid4().hex,
            incarnation=live.incarnation,
            expected_version=live.version,
            expected_commit=live.commit_id,
            blob=b"",
            updated_at=now,
            selection=b"",
            status=b"",
            events=b"",
            producer=producer_of,
            responses=step.responses,
            state_changed=False,
            seen_ms=seen_ms,
            drop_producers=drops,
        )
    return Commit(
        commit_id=uuid.uuid4().hex,
        incarnation=live.incarnation,
        expected_version=live.version,
        expected_commit=live.commit_id,
        blob=outcome.blob,
        updated_at=now,
        selection=outcome.selection_json,
        status=outcome.status,
        events=outcome.entry,
        names=outcome.names,
        notify=outcome.selection_json if outcome.selection_changed else b"",
        producer=producer_of,
        responses=step.responses,
        seen_ms=seen_ms,
        drop_producers=drops,
    )


__all__ = [
    "Attempt",
    "Outcome",
    "StaleCache",
    "change_of",
    "commit_of",
    "finite_state",
    "outcome_of",
    "tally_of",
]
