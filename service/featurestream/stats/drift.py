"""Drift detectors on a numeric signal: Page-Hinkley and ADWIN (docs/algorithms/drift.md).

Both follow the definitions of River (``river.drift.PageHinkley`` and
``river.drift.ADWIN``): fed the same values they detect at the same indices.
As in River, a detector starts afresh after each detection.

A detector's whole state is a tuple of plain numbers (:meth:`to_state`), so it
is stored beside a selector's state and rebuilt exactly (:meth:`from_state`).
Its size does not grow with the signal's length: Page-Hinkley keeps six
numbers, ADWIN at most ``max_buckets + 1`` buckets per power of two of its
window's width.

References
----------
E. S. Page. "Continuous Inspection Schemes." Biometrika 41 (1954).
Albert Bifet, Ricard Gavaldà. "Learning from Time-Changing Data with Adaptive
Windowing." SIAM International Conference on Data Mining, 2007.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

State = tuple[Any, ...]


@dataclass
class PageHinkley:
    """Page-Hinkley test on the deviations from the running mean.

    Each value x updates the mean m of the values so far; with the forgetting
    factor ``alpha``, ``up = alpha up + (x - m) - delta`` and ``down = alpha
    down + (x - m) + delta``. Once ``min_instances`` values are seen, a drift
    is detected when ``up - min(up)`` (a rise) or ``max(down) - down`` (a fall)
    exceeds ``threshold``; the larger of the two is the :attr:`statistic`. With
    ``mode`` "up" only a rise counts, with "down" only a fall (River's modes).

    >>> ph = PageHinkley(threshold=5.0, min_instances=3)
    >>> [i for i, x in enumerate([0.0] * 10 + [3.0] * 10) if ph.update(x)]
    [11]
    >>> PageHinkley.from_state(ph.to_state(), threshold=5.0, min_instances=3) == ph
    True
    """

    name: ClassVar[str] = "page_hinkley"

    delta: float = 0.005
    threshold: float = 50.0
    min_instances: int = 30
    alpha: float = 1.0 - 0.0001
    # Which changes count (River's ``mode``): "up" a rise, "down" a fall, "both" either.
    mode: str = "both"
    n: int = 0
    mean: float = 0.0
    up: float = 0.0
    down: float = 0.0
    min_up: float = 0.0
    max_down: float = -1.0
    statistic: float = 0.0

    def update(self, x: float) -> bool:
        """Add one value; True when it completes a detection (the test then restarts)."""
        self.n += 1
        self.mean += (1.0 / self.n) * (x - self.mean)
        dev = x - self.mean
        self.up = self.alpha * self.up + dev - self.delta
        self.down = self.alpha * self.down + dev + self.delta
        # The first value sets the minimum (River starts it at infinity).
        if self.n == 1 or self.up < self.min_up:
            self.min_up = self.up
        self.max_down = max(self.max_down, self.down)
        if self.n < self.min_instances:
            return False
        rise = self.up - self.min_up if self.mode != "down" else -math.inf
        fall = self.max_down - self.down if self.mode != "up" else -math.inf
        self.statistic = max(rise, fall)
        if self.statistic > self.threshold:
            self.restart()
            return True
        return False

    def restart(self) -> None:
        """Forget every value (keeps the parameters and the last statistic)."""
        self.n, self.mean, self.up, self.down = 0, 0.0, 0.0, 0.0
        self.min_up, self.max_down = 0.0, -1.0

    def to_state(self) -> State:
        return (self.n, self.mean, self.up, self.down, self.min_up, self.max_down, self.statistic)

    @classmethod
    def from_state(cls, state: State, **params: Any) -> PageHinkley:
        n, mean, up, down, min_up, max_down, statistic = state
        return cls(
            **params,
            n=int(n),
            mean=float(mean),
            up=float(up),
            down=float(down),
            min_up=float(min_up),
            max_down=float(max_down),
            statistic=float(statistic),
        )


@dataclass
class ADWIN:
    """Adaptive windowing: a drift when two parts of the recent window differ in mean.

    The window is kept as buckets of 2^r values (their total and variance),
    at most ``max_buckets`` of each size once merged; every ``clock`` values,
    once the window holds more than ``grace_period``, each cut between
    buckets (oldest first) splits it in W0 (older, n0 values) and W1 (newer,
    n1), and a drift is detected at the first cut with n0, n1 >=
    ``min_window_length`` and ``|mean0 - mean1| > eps``, where with
    ``dd = ln(2 ln(n) / delta)`` and ``m = 1 / (n0 - L + 1) + 1 / (n1 - L + 1)``
    (L = ``min_window_length``), ``eps = sqrt(2 m v dd) + 2/3 dd m`` and v is
    the window's variance. The :attr:`statistic` is that ``|mean0 - mean1|``.

    >>> adwin = ADWIN(clock=1)
    >>> [i for i, x in enumerate([0.0] * 100 + [1.0] * 50) if adwin.update(x)]
    [115]
    """

    name: ClassVar[str] = "adwin"

    delta: float = 0.002
    clock: int = 32
    max_buckets: int = 5
    min_window_length: int = 5
    grace_period: int = 10
    tick: int = 0
    width: int = 0
    total: float = 0.0
    variance: float = 0.0
    # rows[r]: the buckets of 2^r values, oldest first, each (total, variance).
    rows: list[list[tuple[float, float]]] = field(default_factory=list)
    statistic: float = 0.0
    # At the last detection: whether the newer part's mean was the higher (not stored).
    rising: bool = False

    def update(self, x: float) -> bool:
        """Add one value; True when it completes a detection (the window then restarts)."""
        self.tick += 1
        self._insert(float(x))
        if self.tick % self.clock != 0 or self.width <= self.grace_period:
            return False
        if self._cut_found():
            self.restart()
            return True
        return False

    def restart(self) -> None:
        """Forget every value (keeps the parameters and the last statistic)."""
        self.tick, self.width, self.total, self.variance = 0, 0, 0.0, 0.0
        self.rows = []

    def _insert(self, x: float) -> None:
        if self.width > 0:
            mean = self.total / self.width
            self.variance += self.width * (x - mean) * (x - mean) / (self.width + 1)
        self.width += 1
        self.total += x
        if not self.rows:
            self.rows.append([])
        self.rows[0].append((x, 0.0))
        r = 0
        # A row holding max_buckets + 1 buckets merges its two oldest into the next row.
        while len(self.rows[r]) > self.max_buckets:
            size = float(2**r)
            (t1, v1), (t2, v2) = self.rows[r][0], self.rows[r][1]
            diff = t1 / size - t2 / size
            merged = (t1 + t2, v1 + v2 + size * size * diff * diff / (size + size))
            del self.rows[r][:2]
            if r + 1 == len(self.rows):
                self.rows.append([])
            self.rows[r + 1].append(merged)
            r += 1

    def _cut_found(self) -> bool:
        n0, n1 = 0.0, float(self.width)
        u0, u1 = 0.0, self.total
        dd = math.log(2.0 * math.log(self.width) / self.delta)
        v = self.variance / self.width
        low = self.min_window_length - 1
        for r in range(len(self.rows) - 1, -1, -1):
            size = float(2**r)
            for total, _ in self.rows[r]:
                n0 += size
                n1 -= size
                u0 += total
                u1 -= total
                if n0 < self.min_window_length or n1 < self.min_window_length:
                    continue
                gap = abs(u0 / n0 - u1 / n1)
                m = 1.0 / (n0 - low) + 1.0 / (n1 - low)
                if gap > math.sqrt(2.0 * m * v * dd) + 2.0 / 3.0 * dd * m:
                    self.statistic = gap
                    self.rising = u1 / n1 > u0 / n0
                    return True
        return False

    def to_state(self) -> State:
        rows = tuple(tuple(v for bucket in row for v in bucket) for row in self.rows)
        return (self.tick, self.width, self.total, self.variance, rows, self.statistic)

    @classmethod
    def from_state(cls, state: State, **params: Any) -> ADWIN:
        tick, width, total, variance, rows, statistic = state
        buckets = [
            [(float(row[i]), float(row[i + 1])) for i in range(0, len(row), 2)] for row in rows
        ]
        return cls(
            **params,
            tick=int(tick),
            width=int(width),
            total=float(total),
            variance=float(variance),
            rows=buckets,
            statistic=float(statistic),
        )


Detector = PageHinkley | ADWIN
DETECTORS: dict[str, type[PageHinkley] | type[ADWIN]] = {
    PageHinkley.name: PageHinkley,
    ADWIN.name: ADWIN,
}


def detections(detector: Detector, values: Iterable[float]) -> list[int]:
    """The indices (0-based, in ``values``) at which ``detector`` detects a drift.

    >>> detections(PageHinkley(threshold=5.0, min_instances=3), [0.0] * 10 + [3.0] * 10)
    [11]
    """
    return [i for i, x in enumerate(values) if detector.update(float(x))]


__all__ = ["ADWIN", "DETECTORS", "Detector", "PageHinkley", "detections"]
