"""A stream's past, read from its event log: selections by version, changes, stability.

Every log entry committed since the log kept them carries ``at`` (the commit
time) and, when the selected set moved, ``change``: the names ``added`` and
``removed`` and the new ``size`` (``outcome.change_of``). The selection after an
older version V is rebuilt backwards from the current selection, undoing the
changes of versions N, N-1, ..., V+1 (N the current version), so it needs
every entry from V to N (V's own entry gives its time; version 0 is the
stream's creation).

What cannot be rebuilt is *not retained*, answered ``410 history-trimmed``:

* entries the log dropped (it keeps the last ``event_retention`` commits);
* entries stored before the log kept ``at`` and ``change``: whether they moved
  the selection is not recorded (an instance stream's batch names no feature),
  so the history starts after the newest of them. Their events are still
  listed by ``/events``, with ``at`` null.

Reads never decode a selector state: the current selection comes from the
stream's summary and the past from the log. Large pages of the log are parsed
in a worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import orjson

from featurestream import offload
from featurestream.engine import wire
from featurestream.engine.packing import is_packed, unpack
from featurestream.engine.results import Selection
from featurestream.errors import HistoryTrimmed, VersionNotFound
from featurestream.evaluation.stability import consecutive_jaccard, nogueira_over
from featurestream.selectors import SelectedFeature
from featurestream.store.base import EventEntry, StateStore, StreamSummary

# Log entries read from the store per round trip.
_CHUNK = 256
# Entries one history page looks through at most (a page may then hold fewer changes
# than asked for; ``next`` goes on from where it stopped).
SCAN_ENTRIES = 2000
# The most selections /stability compares.
MAX_LAST = 1000


@dataclass(frozen=True, slots=True)
class Entry:
    """What the history needs of one log entry."""

    version: int
    at: str | None
    added: tuple[str, ...]
    removed: tuple[str, ...]
    size: int | None  # None: the selected set did not change
    columns: int  # feature columns the entry's batches brought
    legacy: bool  # stored before the log kept ``at`` and ``change``
    drifts: tuple[dict[str, Any], ...] = ()  # the drift events of the entry

    @property
    def moved(self) -> bool:
        """Whether the selected set moved (a drift's entry may list no change)."""
        return self.size is not None and bool(self.added or self.removed)


@dataclass(frozen=True, slots=True)
class Change:
    """One move of the selected set."""

    version: int
    at: str | None
    added: Sequence[str]
    removed: Sequence[str]
    size: int
    drifts: Sequence[dict[str, Any]] = ()


@dataclass(frozen=True, slots=True)
class HistoryPage:
    changes: Sequence[Change]
    next: int | None  # the ``after_version`` of the following page; None: none yet
    version: int  # the stream's version when read


@dataclass(frozen=True, slots=True)
class Stability:
    versions: Sequence[int]
    sizes: Sequence[int]
    jaccard: Sequence[float]
    nogueira: float | None
    features: int  # d: the features the stream had seen at the latest of ``versions``


def parse_entries(entries: Sequence[EventEntry]) -> list[Entry]:
    """The history's view of raw log entries (pure; may run in a worker thread)."""
    out: list[Entry] = []
    for e in entries:
        payload = orjson.loads(unpack(e.payload))
        change = payload.get("change")
        events = payload.get("events", ())
        columns = sum(int(ev.get("count", 0)) for ev in events if ev.get("type") == "batch")
        drifts = tuple(
            {k: v for k, v in ev.items() if k not in ("type", "version")}
            for ev in events
            if ev.get("type") == "drift"
        )
        out.append(
            Entry(
                version=e.version,
                at=payload.get("at"),
                added=tuple(change["added"]) if change else (),
                removed=tuple(change["removed"]) if change else (),
                size=int(change["size"]) if change else None,
                columns=columns,
                legacy="at" not in payload,
                drifts=drifts,
            )
        )
    return out


async def _parse(entries: Sequence[EventEntry]) -> list[Entry]:
    # A packed (deflated) entry inflates to far more than its stored bytes.
    packed = any(is_packed(e.payload) for e in entries)
    size = sum(len(e.payload) for e in entries) + (offload.INLINE_BYTES if packed else 0)
    return await offload.run(size, partial(parse_entries, entries))


async def read_log(
    store: StateStore, stream_id: str, start: int, stop: int, most: int | None = None
) -> list[Entry]:
    """The entries of versions ``start..stop`` that the log holds (at most ``most``)."""
    out: list[Entry] = []
    nxt = max(start, 1)
    while nxt <= stop and (most is None or len(out) < most):
        want = _CHUNK if most is None else min(_CHUNK, most - len(out))
        raw = [e for e in await store.events(stream_id, nxt, want) if e.version <= stop]
        if not raw:
            break
        out.extend(await _parse(raw))
        nxt = raw[-1].version + 1
    return out


def _trimmed(stream_id: str, version: int, oldest: int) -> HistoryTrimmed:
    return HistoryTrimmed(
        stream_id,
        str(version),
        oldest,
        message=f"The history of stream {stream_id!r} at version {version} is no longer kept: "
        f"it goes back to version {oldest} (the log keeps the last commits only, and "
        "entries stored before it recorded selection changes do not count).",
    )


def _current(s: StreamSummary) -> Selection:
    return wire.parse_selection(s.selection)


async def selection_at(store: StateStore, stream_id: str, version: int) -> Selection:
    """The selection as it was after ``version`` (scores and groups only for the current one).

    Raises VersionNotFound beyond the current version, HistoryTrimmed when the log
    no longer holds what it takes to rebuild it.
    """
    summary = await store.summary(stream_id)
    current = summary.version
    if version > current:
        raise VersionNotFound(stream_id, version, current)
    now = _current(summary)
    if version == current:
        return now
    entries = await read_log(store, stream_id, version, current)
    first = max(version, 1)
    if not entries or entries[0].version != first:
        raise _trimmed(stream_id, version, entries[0].version if entries else current)
    later = [e for e in entries if e.version > version]
    legacy = [e.version for e in later if e.legacy]
    if legacy:
        raise _trimmed(stream_id, version, legacy[-1])
    names = set(now.names)
    for e in reversed(later):
        names.difference_update(e.added)
        names.update(e.removed)
    at = str(summary.info.get("created_at", "")) if version == 0 else entries[0].at
    features = tuple(SelectedFeature(n, None) for n in sorted(names))
    return Selection(version, features, at or "")


async def history(
    store: StateStore, stream_id: str, after_version: int | None, limit: int
) -> HistoryPage:
    """Up to ``limit`` changes of the selected set after ``after_version``, in order.

    Without ``after_version``, from the oldest change kept. A page looks through
    at most ``SCAN_ENTRIES`` log entries.
    """
    summary = await store.summary(stream_id)
    current = summary.version
    start = (after_version or 0) + 1
    if start > current:
        return HistoryPage([], None, current)
    entries = await read_log(store, stream_id, start, current, SCAN_ENTRIES)
    if after_version is not None and (not entries or entries[0].version != start):
        raise _trimmed(stream_id, after_version, entries[0].version if entries else current)
    if after_version is None:
        # Entries stored before selection changes were recorded come first: look past
        # them all (a few pages at most: the log is bounded), so that the ``next`` of
        # this page never points into them (a page from there would be a 410).
        while entries and entries[-1].legacy and entries[-1].version < current:
            start = entries[-1].version + 1
            entries = await read_log(store, stream_id, start, current, SCAN_ENTRIES)
    changes: list[Change] = []
    last = start - 1
    for e in entries:
        if e.legacy:
            if after_version is not None:
                raise _trimmed(stream_id, after_version, e.version)
            # From the oldest change kept: the history starts after this entry.
            changes.clear()
            last = e.version
            continue
        if len(changes) >= limit:
            break
        last = e.version
        if e.size is not None:
            changes.append(Change(e.version, e.at, e.added, e.removed, e.size, e.drifts))
    return HistoryPage(changes, None if last >= current else last, current)


async def stability(store: StateStore, stream_id: str, last: int) -> Stability:
    """Jaccard and Nogueira's stability over the selections after the last ``last`` changes.

    The selections compared are the selected sets after each of the latest
    ``last`` changes kept in the log (fewer when fewer are kept), oldest first.
    The universe is every feature the stream had seen at the latest of them: a
    feature stream's columns so far, an instance stream's fixed feature space.
    With fewer than two selections ``nogueira`` is None (a variance needs two).
    """
    summary = await store.summary(stream_id)
    entries = await _newest_changes(store, stream_id, summary.version, last)
    # The selections may be large (thousands of names each): computed beside the loop.
    return await anyio.to_thread.run_sync(_stability_of, summary, entries, last)


async def _newest_changes(store: StateStore, stream_id: str, stop: int, last: int) -> list[Entry]:
    """The newest log entries up to ``stop`` that hold its latest ``last`` changes, oldest first.

    Read backwards, a window at a time (``last`` entries first, doubling up to
    ``_CHUNK``), so a stream with a long log costs what its latest changes cost. Ends
    early at an entry stored before the log kept changes (it is included: the
    history starts after it) and where the log holds nothing older.
    """
    newest_first: list[Entry] = []
    changes = 0
    hi = stop
    window = max(1, last)
    while hi >= 1:
        lo = max(1, hi - window + 1)
        raw = [e for e in await store.events(stream_id, lo, hi - lo + 1) if e.version <= hi]
        if not raw:
            break
        for e in reversed(await _parse(raw)):
            newest_first.append(e)
            changes += e.moved
            if e.legacy or changes >= last:
                return newest_first[::-1]
        if raw[0].version > lo:  # the log was trimmed: nothing older is kept
            break
        hi = lo - 1
        window = min(2 * window, _CHUNK)
    return newest_first[::-1]


def _stability_of(summary: StreamSummary, entries: list[Entry], last: int) -> Stability:
    legacy = [i for i, e in enumerate(entries) if e.legacy]
    if legacy:
        entries = entries[legacy[-1] + 1 :]
    names = set(_current(summary).names)
    picked: list[tuple[int, frozenset[str]]] = []
    later_columns = 0
    columns_after: int | None = None
    for e in reversed(entries):
        if e.moved:
            if columns_after is None:
                columns_after = later_columns
            picked.append((e.version, frozenset(names)))
            if len(picked) >= last:
                break
            names.difference_update(e.added)
            names.update(e.removed)
        later_columns += e.columns
    picked.reverse()
    selections = [s for _, s in picked]
    d = _universe(summary, columns_after or 0)
    union = set().union(*selections) if selections else set()
    d = max(d, len(union))
    value: float | None = None
    if len(selections) >= 2:
        # Features never selected add nothing to the variances: only their number
        # counts (no d-sized matrix, whatever the stream has seen).
        value = nogueira_over(selections, d)
    return Stability(
        versions=[v for v, _ in picked],
        sizes=[len(s) for s in selections],
        jaccard=consecutive_jaccard(selections),
        nogueira=value,
        features=d,
    )


def _universe(summary: StreamSummary, columns_after: int) -> int:
    """The features a stream had seen, ``columns_after`` columns before now."""
    info: dict[str, Any] = summary.info
    if info.get("kind") == "instances":
        return int(info.get("n_features", 0))
    counters = wire.parse_status_counters(summary.status)
    return max(0, int(counters.get("features_seen", 0)) - columns_after)


__all__ = [
    "MAX_LAST",
    "SCAN_ENTRIES",
    "Change",
    "Entry",
    "HistoryPage",
    "Stability",
    "history",
    "parse_entries",
    "read_log",
    "selection_at",
    "stability",
]
