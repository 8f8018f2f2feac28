"""Selection F1 against a drifting truth, and what it says after each switch.

The truth of a concept is its groups (``drift_data``): each original feature
with its redundant copies. A selection S of a stream whose concept has k
groups scores

    F1 = 2 h / (|S| + k),  h = the number of groups with a member in S,

the F1 of precision h / |S| and recall h / k. A copy of a relevant feature
therefore counts as a hit for its group, since it carries what its original
carries, but only once: a second member of a group already hit, like a noise
feature, is a false positive. So a selector is not blamed for picking a copy
over its original, and is blamed for spending its budget on the same
information twice. ``strict_f1`` counts the originals alone (a copy is a
miss), for comparison; the empty selection scores 0.

A curve is the F1 of the selection read after each chunk: point (t, f1) for
the selection after the first t instances, judged against the concept of
instance t - 1, the last one learnt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from featurestream.bench.drift_data import Concept

#: F1 a selection must reach to count as recovered after a switch.
RECOVERED = 0.9


def f1(selected: Sequence[int], concept: Concept) -> float:
    """Group F1 of a selection (feature indices) against a concept.

    >>> import numpy as np
    >>> c = Concept(np.array([0, 1, -1, 0]), np.array([0, 1]), np.ones(2), np.zeros(2))
    >>> f1([0, 1], c), f1([3, 1], c), f1([0, 3], c), f1([2], c), f1([], c)
    (1.0, 1.0, 0.5, 0.0, 0.0)
    """
    k = int(concept.originals.size)
    hit = {int(concept.groups[j]) for j in selected if concept.groups[j] >= 0}
    return 2.0 * len(hit) / (len(selected) + k)


def strict_f1(selected: Sequence[int], concept: Concept) -> float:
    """F1 of a selection against the originals alone (a copy is a miss).

    >>> import numpy as np
    >>> c = Concept(np.array([0, 1, -1, 0]), np.array([0, 1]), np.ones(2), np.zeros(2))
    >>> strict_f1([0, 1], c), strict_f1([3, 1], c)
    (1.0, 0.5)
    """
    k = int(concept.originals.size)
    hit = len(set(int(j) for j in selected) & set(concept.originals.tolist()))
    return 2.0 * hit / (len(selected) + k)


@dataclass(frozen=True)
class Recovery:
    """What the curve does after one switch (instances counted from the switch)."""

    switch: int
    to_recovered: int | None  # the first point at or above RECOVERED, None: not in the segment
    at: dict[int, float | None]  # F1 at each offset (None: beyond the segment)


def point_at(curve: Sequence[tuple[int, float]], t: int, after: int) -> float | None:
    """F1 of the last point at or before instance t that comes after instance ``after``.

    >>> point_at([(10, 0.1), (20, 0.5), (30, 0.9)], 25, 10), point_at([(10, 0.1)], 25, 10)
    (0.5, None)
    """
    chosen = None
    for u, value in curve:
        if after < u <= t:
            chosen = value
    return chosen


def recoveries(
    curve: Sequence[tuple[int, float]],
    switches: Sequence[int],
    end: int,
    offsets: Sequence[int] = (5_000, 10_000),
) -> list[Recovery]:
    """Per switch: instances until F1 >= RECOVERED, and the F1 ``offsets`` after it.

    Each switch is judged up to the next one (or ``end``, the stream's length);
    an offset beyond that is None, and so is a recovery that does not happen
    in it.

    >>> curve = [(10, 1.0), (20, 0.2), (30, 0.95), (40, 0.5)]
    >>> r = recoveries(curve, [10], 40, offsets=[10, 30])
    >>> r[0].to_recovered, r[0].at
    (20, {10: 0.2, 30: 0.5})
    """
    out = []
    bounds = [*switches[1:], end]
    for s, stop in zip(switches, bounds, strict=True):
        seg = [(t, v) for t, v in curve if s < t <= stop]
        first = next((t - s for t, v in seg if v >= RECOVERED), None)
        at = {o: (point_at(seg, s + o, s) if s + o <= stop else None) for o in offsets}
        out.append(Recovery(s, first, at))
    return out


def stationary_f1(curve: Sequence[tuple[int, float]], end: int) -> float:
    """Mean F1 over the points of the stream's second half (after instance end / 2).

    >>> stationary_f1([(10, 0.0), (20, 0.5), (30, 1.0), (40, 1.0)], 40)
    1.0
    """
    values = [v for t, v in curve if t > end / 2]
    return float(np.mean(values)) if values else float("nan")


__all__ = [
    "RECOVERED",
    "Recovery",
    "f1",
    "point_at",
    "recoveries",
    "stationary_f1",
    "strict_f1",
]
