"""A plain transcription of the neighborhood dependency, for the rough-set selector tests.

docs/algorithms.md, "Neighborhood dependency": one pair of instances at a
time, in Python floats, sorted by (distance, instance). It has no tolerance
for near ties, so the test data must have none (exact ties, as from repeated
values, are fine).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

Card = Callable[[int, list[float], list[int], list[int]], float]


def standardized(x: np.ndarray) -> list[float]:
    if x.max() == x.min():
        return [float(v) for v in x]
    s = float(np.std(x, ddof=1))
    return [float(v) / s for v in x]


def neighbours(cols: Sequence[np.ndarray], i: int) -> tuple[list[float], list[int]]:
    """Instance i's distances in ascending order and the instances in that order."""
    zs = [standardized(c) for c in cols]
    n = len(cols[0]) if cols else 0
    pairs = []
    for j in range(n):
        total = 0.0
        for z in zs:
            total += (z[i] - z[j]) ** 2
        pairs.append((math.sqrt(total), j))
    pairs.sort()
    return [d for d, _ in pairs], [j for _, j in pairs]


def gamma(cols: Sequence[np.ndarray], y: Sequence[int], card: Card) -> float:
    if not cols:
        return 0.0
    total = 0.0
    for i in range(len(y)):
        dist, order = neighbours(cols, i)
        total += card(i, dist, order, list(y))
    return total / len(y)


def share(i: int, members: list[int], y: list[int]) -> float:
    if not members:
        return 0.0
    return sum(1 for j in members if y[j] == y[i]) / len(members)


def k_nearest(k: int, majority: int) -> Card:
    def card(i: int, dist: list[float], order: list[int], y: list[int]) -> float:
        near = order[1 : k + 1]
        if y[i] == majority:
            return 1.0 if near and all(y[j] == y[i] for j in near) else 0.0
        return share(i, near, y)

    return card


def adapted(i: int, dist: list[float], order: list[int], y: list[int]) -> float:
    n = len(dist)
    members = order[1:2]
    if n > 2:
        gap = 1.5 * (dist[n - 1] - dist[1]) / (n - 2)
        j = 2
        while j < n and dist[j] - dist[j - 1] < gap:
            members.append(order[j])
            j += 1
    return share(i, members, y)


def density(i: int, dist: list[float], order: list[int], y: list[int]) -> float:
    n = len(dist)
    members = order[1:2]
    if n > 2:
        last = dist[1]
        j = 2
        while j < n:
            d = dist[j] / j
            if not (d == 0 or d <= last):
                break
            members.append(order[j])
            last = d
            j += 1
    return share(i, members, y)


def arrivals(
    X: np.ndarray, y: list[int], card: Card, out: list[Any]
) -> Iterator[tuple[int, str, float]]:
    """The non-constant columns of X in order, (index, name, single dependency); a
    constant one gets its decision (name, False, constant, []) in ``out``."""
    from featurestream.selectors import Reason

    for i, x in enumerate(X):
        if x.max() == x.min():
            out.append((f"f{i}", False, Reason.CONSTANT, []))
            continue
        yield i, f"f{i}", gamma([x], y, card)


def run(sel: Any, X: np.ndarray, step: int = 1) -> tuple[list[Any], list[str], Any]:
    """Columns f0, f1, ... of X into ``sel``, ``step`` a request: the decisions as
    (name, accepted, reason, evicted names), the selection, and the selector."""
    names = [f"f{i}" for i in range(X.shape[0])]
    out = []
    for lo in range(0, len(names), step):
        for d in sel.learn_features(names[lo : lo + step], X[lo : lo + step]):
            out.append((d.feature, d.accepted, d.reason, [e.feature for e in d.evicted]))
    return out, list(sel.selected()), sel
