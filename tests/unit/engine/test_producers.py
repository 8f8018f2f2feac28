"""The rule that bounds a stream's producer records (engine/producers.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from featurestream.engine.producers import drop


def test_idle_producers_go_whatever_the_cap() -> None:
    seen = {"old": 0, "mid": 5_000, "new": 9_000}
    assert drop(seen, "new", 10_000, retention_ms=4_999, cap=100) == ("old", "mid")
    # Exactly the retention is not past it.
    assert drop(seen, "new", 10_000, retention_ms=5_000, cap=100) == ("old",)


def test_past_the_cap_the_least_recently_seen_go_ties_by_name() -> None:
    seen = {"b": 7, "a": 7, "c": 8}
    assert drop(seen, "z", 10, retention_ms=100, cap=2) == ("a", "b")
    assert drop(seen, "z", 10, retention_ms=100, cap=3) == ("a",)
    assert drop(seen, "z", 10, retention_ms=100, cap=4) == ()


def test_the_committing_producer_is_never_dropped() -> None:
    # Itself idle for long (its time is the one before this write) and over the cap.
    assert drop({"me": 0}, "me", 10**9, retention_ms=1, cap=1) == ()
    assert drop({"me": 0, "other": 1}, "me", 2, retention_ms=100, cap=1) == ("other",)


@given(
    st.dictionaries(st.text(min_size=1, max_size=3), st.integers(0, 1_000), max_size=30),
    st.text(min_size=1, max_size=3),
    st.integers(0, 2_000),
    st.integers(1, 10),
)
def test_what_remains_is_bounded_recent_and_keeps_the_writer(
    seen: dict[str, int], producer: str, retention: int, cap: int
) -> None:
    now = 1_000
    dropped = drop(seen, producer, now, retention_ms=retention, cap=cap)
    assert producer not in dropped and len(set(dropped)) == len(dropped)
    remaining = {p: t for p, t in seen.items() if p not in dropped and p != producer}
    assert len(remaining) + 1 <= cap
    assert all(now - t <= retention for t in remaining.values())
    # Nothing dropped is more recent than what remains (ties by name).
    for p in dropped:
        assert all((seen[p], p) < (t, q) for q, t in remaining.items())
    # Nothing is dropped without cause.
    if all(now - t <= retention for p, t in seen.items() if p != producer):
        assert len(dropped) == max(0, len(set(seen) - {producer}) + 1 - cap)
