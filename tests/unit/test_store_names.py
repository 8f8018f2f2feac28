"""A process's copies of its streams' names logs (store/names.py), without Redis."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from featurestream.store.names import NamesCache, StreamNames, split


def test_a_copy_takes_entries_and_its_own_commits() -> None:
    copy = StreamNames("inc")
    copy.take([b"c1", b"c2"], [b"a\nb", b"c"])
    assert (copy.chunks, copy.head, copy.seen) == (2, "c2", {"a", "b", "c"})
    copy.add(["d"], "c3")
    assert (copy.chunks, copy.head) == (3, "c3")
    assert copy.duplicates(["x", "d", "a", "y"]) == ["d", "a"]
    assert copy.duplicates([f"{n}" for n in "abcd"], limit=2) == ["a", "b"]
    copy.reset()
    assert (copy.chunks, copy.head, copy.seen, copy.legacy_read) == (0, "", set(), False)


def test_another_incarnation_starts_an_empty_copy() -> None:
    cache = NamesCache()
    first = cache.get("s", "inc-1")
    first.add(["a"], "c1")
    assert cache.get("s", "inc-1") is first
    second = cache.get("s", "inc-2")
    assert second is not first and not second.seen


def test_the_least_recently_written_copies_go_beyond_the_limit() -> None:
    cache = NamesCache(limit=10)
    for i, stream in enumerate(["a", "b", "c"]):
        cache.get(stream, "inc").add([f"{stream}{j}" for j in range(4)], f"c{i}")
    cache.get("a", "inc")  # written again: the most recent
    cache.trim()
    # 12 names held: "b", the least recently written, goes; 8 remain.
    assert len(cache) == 2
    assert cache.get("b", "inc").chunks == 0  # read again from the start
    # A single copy over the limit stays (its stream is being written).
    one = NamesCache(limit=1)
    one.get("s", "inc").add(["x", "y"], "c")
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
    assert copy.seen == {n for e in entries for n in e}
    assert [split("\n".join(e).encode()) for e in entries] == entries
