"""A process's copies of its streams' names logs (store/names.py), without Redis."""

from __future__ import annotations

import gc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from featurestream.store.names import SHARDS, NamesCache, NameSet, StreamNames, split


def test_a_copy_takes_entries_and_its_own_commits() -> None:
    copy = StreamNames("inc")
    copy.take([b"c1", b"c2"], [b"a\nb", b"c"])
    assert (copy.chunks, copy.head, set(copy.seen)) == (2, "c2", {"a", "b", "c"})
    dups, groups = copy.check(["d"])
    assert dups == []
    copy.add(groups, "c3")
    assert (copy.chunks, copy.head) == (3, "c3")
    assert copy.check(["x", "d", "a", "y"])[0] == ["d", "a"]
    assert copy.check(list("abcd"), limit=2)[0] == ["a", "b"]
    copy.reset()
    assert (copy.chunks, copy.head, len(copy.seen)) == (0, "", 0)


def test_another_incarnation_starts_an_empty_copy() -> None:
    cache = NamesCache()
    first = cache.get("s", "inc-1")
    first.add(first.check(["a"])[1], "c1")
    assert cache.get("s", "inc-1") is first
    second = cache.get("s", "inc-2")
    assert second is not first and not second.seen


def test_the_least_recently_written_copies_go_beyond_the_limit() -> None:
    cache = NamesCache(limit=10)
    for i, stream in enumerate(["a", "b", "c"]):
        copy = cache.get(stream, "inc")
        copy.add(copy.check([f"{stream}{j}" for j in range(4)])[1], f"c{i}")
    cache.get("a", "inc")  # written again: the most recent
    cache.trim()
    # 12 names held: "b", the least recently written, goes; 8 remain.
    assert len(cache) == 2
    assert cache.get("b", "inc").chunks == 0  # read again from the start
    # A single copy over the limit stays (its stream is being written).
    one = NamesCache(limit=1)
    copy = one.get("s", "inc")
    copy.add(copy.check(["x", "y"])[1], "c")
    one.trim()
    assert one.get("s", "inc").chunks == 1


# Names as the API takes them: non-empty, printable (no newline, no lone surrogate).
NAMES = st.text(st.characters(categories=("L", "M", "N", "P", "S", "Zs")), min_size=1)


@given(st.lists(st.lists(NAMES)))
def test_entries_read_back_are_the_names_written(entries: list[list[str]]) -> None:
    copy = StreamNames("inc")
    copy.take(
        [f"c{i}".encode() for i in range(len(entries))], ["\n".join(e).encode() for e in entries]
    )
    assert set(copy.seen) == {n for e in entries for n in e}
    assert len(copy.seen) == len({n for e in entries for n in e})
    assert [split("\n".join(e).encode()) for e in entries] == entries


@given(st.lists(NAMES, max_size=300), st.lists(NAMES, max_size=300), st.integers(1, 6))
def test_a_name_set_answers_as_one_set(held: list[str], asked: list[str], limit: int) -> None:
    names = NameSet()
    names.update(held)
    model = set(held)
    assert len(names) == len(model) and set(names) == model
    assert all((n in names) == (n in model) for n in asked)
    assert (
        names.duplicates(names.groups(asked), asked, limit)
        == [n for n in asked if n in model][:limit]
    )


def test_a_name_set_is_no_work_for_the_garbage_collector() -> None:
    """A full collection walks every member of a set: with a million names, 100 to 180
    ms of the event loop's time. Dicts of strings are left alone once seen."""
    names = NameSet()
    names.update(f"feature-{i}" for i in range(1000))
    gc.collect()
    assert not any(gc.is_tracked(shard) for shard in names._shards)
    names.update(["more"])
    assert not any(gc.is_tracked(shard) for shard in names._shards)


def test_no_shard_holds_much_more_than_its_share() -> None:
    names = NameSet()
    names.update(f"feature-{i}" for i in range(SHARDS * 400))
    sizes = [len(s) for s in names._shards]
    assert sum(sizes) == SHARDS * 400 and max(sizes) < 2 * 400


@pytest.mark.anyio
async def test_a_dropped_copy_is_emptied_unless_a_write_holds_it() -> None:
    cache = NamesCache(limit=3)
    held, idle, last = (cache.get(s, "inc") for s in ("held", "idle", "last"))
    for i, copy in enumerate((held, idle, last)):
        copy.add(copy.check([f"{i}a", f"{i}b"])[1], f"c{i}")
    async with held.lock:
        cache.trim()  # 6 names: "held" is the oldest, but a write holds it
        assert held.chunks == 1 and "0a" in held.seen
        assert idle.chunks == 0 and "1a" not in idle.seen  # emptied: read again if used
        assert len(cache) == 2
    garbage = cache.take_garbage()
    assert [set(g) for g in garbage] == [{"1a", "1b"}] and cache.take_garbage() == []
    garbage[0].free()
    assert len(garbage[0]) == 0
    # Another incarnation of a stream, or its deletion, retires its copy the same way.
    cache.get("last", "inc-2")
    cache.drop("held")
    assert [set(g) for g in cache.take_garbage()] == [{"2a", "2b"}, {"0a", "0b"}]
