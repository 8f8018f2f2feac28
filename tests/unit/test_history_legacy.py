"""History of a stream whose log begins with entries stored before selection changes were
recorded (an upgraded stream): paging from the start never lands inside them."""

from __future__ import annotations

import uuid

import anyio
import orjson
import pytest

from featurestream.engine import wire
from featurestream.engine.history import SCAN_ENTRIES, history
from featurestream.engine.outcome import change_of
from featurestream.errors import HistoryTrimmed
from featurestream.store.base import Commit
from featurestream.store.memory import InMemoryStore

LEGACY = SCAN_ENTRIES + 300  # more than one page of them


async def _build() -> InMemoryStore:
    store = InMemoryStore()
    info = {"id": "s", "algorithm": "x", "kind": "features", "n_instances": 10}
    empty = wire.selection(wire.parse_selection(b'{"version":0,"features":[]}'))
    await store.create("s", info, "inc", b"", "t0", empty, b"{}")
    last = ""
    before: list[str] = []
    for v in range(1, LEGACY + 4):
        after = ["a"] if v <= LEGACY else ["a", *(f"n{i}" for i in range(v - LEGACY))]
        if v <= LEGACY:  # as an older release wrote them: no `at`, no `change`
            entry = orjson.dumps({"seq": None, "producer": "p", "events": []})
        else:
            entry = wire.log_entry(None, "p", [], at=f"t{v}", change=change_of(before, after))
        doc = {"version": v, "features": [{"name": n, "score": 1.0} for n in after]}
        cid = uuid.uuid4().hex
        commit = Commit(
            commit_id=cid,
            incarnation="inc",
            expected_version=v - 1,
            expected_commit=last,
            blob=b"",
            updated_at=f"t{v}",
            selection=orjson.dumps({**doc, "updated_at": f"t{v}"}),
            status=b"{}",
            events=entry,
        )
        await store.commit("s", commit)
        last = cid
        before = after
    return store


def test_paging_from_the_start_skips_every_older_entry() -> None:
    async def run() -> list[int]:
        store = await _build()
        page = await history(store, "s", None, 100)
        versions = [c.version for c in page.changes]
        while page.next is not None:  # every `next` the server gives must be usable
            page = await history(store, "s", page.next, 100)
            versions += [c.version for c in page.changes]
        # An explicit version inside the older entries is history not kept: 410.
        with pytest.raises(HistoryTrimmed):
            await history(store, "s", 5, 100)
        return versions

    assert anyio.run(run) == [LEGACY + 1, LEGACY + 2, LEGACY + 3]
