"""Reading a stream's event log, page by page."""

from __future__ import annotations

import json
import re

from featurestream.engine.packing import unpack
from featurestream.engine.results import EventPage, EventRecord
from featurestream.errors import HistoryTrimmed, InvalidInput
from featurestream.store.base import StateStore


async def read_events(
    store: StateStore, stream_id: str, after: str | None, limit: int
) -> EventPage:
    """Up to ``limit`` events in order, after the event id ``after`` (``<version>-<index>``)."""
    after_v, after_i = _parse_event_id(after) if after else (0, -1)
    out: list[EventRecord] = []
    next_version = max(after_v, 1)
    while len(out) < limit:
        # Each entry holds one or more events: never load more entries than events wanted.
        entries = await store.events(stream_id, next_version, min(_CHUNK, limit - len(out)))
        if not entries:
            break
        if after and not out and entries[0].version > next_version:
            # The log keeps the last event_retention commits: what follows 'after' is gone.
            raise HistoryTrimmed(stream_id, after, entries[0].version)
        for entry in entries:
            payload = json.loads(unpack(entry.payload))
            for i, ev in enumerate(payload["events"]):
                if (entry.version, i) <= (after_v, after_i):
                    continue
                record = EventRecord(
                    f"{entry.version}-{i}",
                    entry.version,
                    payload.get("seq"),
                    payload.get("producer"),
                    ev,
                    payload.get("at"),
                )
                out.append(record)
                if len(out) >= limit:
                    break
            if len(out) >= limit:
                break
        next_version = entries[-1].version + 1
    return EventPage(out, out[-1].id if out else after)


_CHUNK = 64
# Versions and indices are stored as 64-bit integers (Redis stream ids): at most 19 digits,
# and below 2**63.
_EVENT_ID = re.compile(r"([0-9]{1,19})-([0-9]{1,19})")
_MAX_PART = 2**63 - 1


def _parse_event_id(value: str) -> tuple[int, int]:
    match = _EVENT_ID.fullmatch(value)
    if match is None:
        raise InvalidInput(
            "Event ids look like '<version>-<index>' (two non-negative integers); "
            f"got {value[:64]!r}.",
            field="after",
        )
    out = int(match[1]), int(match[2])
    if out[0] > _MAX_PART or out[1] > _MAX_PART:
        raise InvalidInput(
            f"Event ids are at most {_MAX_PART}-{_MAX_PART}; got {value!r}.", field="after"
        )
    return out


__all__ = ["read_events"]
