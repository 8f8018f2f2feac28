"""Reading a stream's event log, page by page."""

from __future__ import annotations

import json

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
        entries = await store.events(stream_id, next_version, 64)
        if not entries:
            break
        if after and not out and entries[0].version > next_version:
            # The log keeps the last event_retention commits: what follows 'after' is gone.
            raise HistoryTrimmed(stream_id, after, entries[0].version)
        for entry in entries:
            payload = json.loads(entry.payload)
            for i, ev in enumerate(payload["events"]):
                if (entry.version, i) <= (after_v, after_i):
                    continue
                record = EventRecord(
                    f"{entry.version}-{i}",
                    entry.version,
                    payload.get("seq"),
                    payload.get("producer"),
                    ev,
                )
                out.append(record)
                if len(out) >= limit:
                    break
            if len(out) >= limit:
                break
        next_version = entries[-1].version + 1
    return EventPage(out, out[-1].id if out else after)


def _parse_event_id(value: str) -> tuple[int, int]:
    try:
        v, i = value.split("-", 1)
        out = int(v), int(i)
    except ValueError:
        raise InvalidInput(
            f"Event ids look like '<version>-<index>'; got {value!r}.", field="after"
        ) from None
    if out[0] < 0 or out[1] < 0:
        raise InvalidInput(f"Event ids are non-negative; got {value!r}.", field="after")
    return out


__all__ = ["read_events"]
