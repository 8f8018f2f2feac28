"""Reading the event log: event ids are checked, and a page loads no more than it needs."""

from __future__ import annotations

import json

import pytest

from featurestream.engine.events import read_events
from featurestream.errors import InvalidInput
from featurestream.store.base import EventEntry

pytestmark = pytest.mark.anyio


class Log:
    """A store's ``events`` over ``versions`` entries of two events each, counting loads."""

    def __init__(self, versions: int) -> None:
        self.entries = [
            EventEntry(v, json.dumps({"events": [{"n": 2 * v}, {"n": 2 * v + 1}]}).encode())
            for v in range(1, versions + 1)
        ]
        self.loaded = 0

    async def events(self, stream_id: str, from_version: int, count: int) -> list[EventEntry]:
        out = self.entries[from_version - 1 : from_version - 1 + count]
        self.loaded += len(out)
        return out


@pytest.mark.parametrize(
    "after",
    [
        "18446744073709551616-0",  # 2**64: no Redis stream id is that large
        "9223372036854775808-0",  # 2**63
        "0-9223372036854775808",
        "99999999999999999999-0",
        "-1-0",
        "1--1",
        "1-0\n",
        " 1-0",
        "1_0-0",
        "\u0661-0",  # an Arabic-Indic digit: int() would take it
        "1",
        "",
    ],
)
async def test_event_ids_out_of_range_or_malformed_are_refused(after: str) -> None:
    with pytest.raises(InvalidInput) as err:
        await read_events(Log(3), "s", after or "x", 10)  # type: ignore[arg-type]
    assert err.value.field == "after"


async def test_the_largest_event_id_reads_an_empty_page() -> None:
    page = await read_events(Log(3), "s", f"{2**63 - 1}-{2**63 - 1}", 10)  # type: ignore[arg-type]
    assert page.events == []


@pytest.mark.parametrize(("limit", "loaded"), [(1, 1), (2, 1), (3, 2), (200, 100)])
async def test_a_page_loads_no_more_entries_than_events_wanted(limit: int, loaded: int) -> None:
    log = Log(100)
    page = await read_events(log, "s", None, limit)  # type: ignore[arg-type]
    assert [e.body["n"] for e in page.events] == list(range(2, 2 + min(limit, 200)))
    assert log.loaded <= max(loaded, 1) + 1


async def test_paging_after_an_id_in_the_middle_of_an_entry() -> None:
    log = Log(10)
    page = await read_events(log, "s", "3-0", 2)  # type: ignore[arg-type]
    assert [e.id for e in page.events] == ["3-1", "4-0"]
    assert page.next == "4-0" and log.loaded <= 3
