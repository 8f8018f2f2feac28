"""Which producer records a commit drops: the idle past the retention, then past the cap.

A stream records, for each producer that wrote with a ``seq``, its last seq
and when it last wrote (the committing process's clock, in milliseconds).
Without a bound these records grow forever: every WebSocket without
``?producer=`` makes a producer of its own. Each commit that records a
producer therefore also drops, in the same compare-and-set:

* every other producer idle for longer than ``producer_retention``;
* then, while more than ``max_producers`` would remain, the least recently
  seen (ties by name), never the committing one.

A dropped producer is forgotten whole (its seq and its stored responses): its
next write starts a sequence afresh at seq 1, and a write with another seq is
refused as a gap whose message says the record may have been dropped.

A log's partition (``featurestream consume``) records no time: its position is
what makes redelivery a replay, so it is never dropped (a topic has a bounded
number of partitions).

>>> drop({"a": 1_000, "b": 9_000, "c": 9_500}, "c", 10_000, retention_ms=5_000, cap=10)
('a',)
>>> drop({"a": 8_000, "b": 9_000, "c": 9_500}, "d", 10_000, retention_ms=5_000, cap=2)
('a', 'b')
>>> drop({"a": 8_000, "b": 9_000}, "a", 10_000, retention_ms=5_000, cap=2)
()
"""

from __future__ import annotations

from collections.abc import Mapping


def drop(
    seen: Mapping[str, int], producer: str, now_ms: int, *, retention_ms: int, cap: int
) -> tuple[str, ...]:
    """The producers a commit by ``producer`` at ``now_ms`` drops, oldest first.

    ``seen``: when each recorded producer (with a time) last wrote.
    """
    others = [(t, name) for name, t in seen.items() if name != producer]
    if len(others) < cap and all(now_ms - t <= retention_ms for t, _ in others):
        return ()  # the common case: nothing to drop, and nothing sorted
    others.sort()
    idle = [name for t, name in others if now_ms - t > retention_ms]
    kept = [name for t, name in others if now_ms - t <= retention_ms]
    # The committing producer counts as one of the ``cap``.
    over = max(0, len(kept) + 1 - cap)
    return (*idle, *kept[:over])


__all__ = ["drop"]
