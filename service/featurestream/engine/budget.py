"""The time budget of one request's work (``request_time_budget``), checked cooperatively.

A selector calls its checkpoint between the items of a batch (feature columns,
groups, instances) and, where one item can take long (OSFS's conditional
tests), inside it too, with how many items it has completed (see
``Selector.checkpoint``). The :class:`Budget` is that checkpoint: once the
budget's deadline has passed it raises :class:`RequestTooExpensive`, which
stops the worker thread at once; the engine puts the selector back as it was
and commits nothing. The selector itself never reads a clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from featurestream.errors import RequestTooExpensive


class Budget:
    """A deadline for one request's work, and how far the work got before it.

    Parameters
    ----------
    seconds : the budget; 0 means none (the checkpoint never raises).
    unit : what the items are ("columns" or "instances"), for the problem's detail.
    total : items in the request.
    clock : seconds, monotonic.

    The deadline is set by the first :meth:`start`; a request applied again (after
    a concurrent update) keeps it, so its work as a whole stays within the budget.

    >>> now = [0.0]
    >>> b = Budget(1.0, "columns", 3, clock=lambda: now[0])
    >>> b.start(); b(0); b(1)
    >>> now[0] = 2.0
    >>> try:
    ...     b(2)
    ... except RequestTooExpensive as exc:
    ...     print(exc.completed, exc.total)
    1 3
    """

    def __init__(
        self, seconds: float, unit: str, total: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.seconds = seconds
        self.unit = unit
        self.total = total
        self._clock = clock
        self._deadline: float | None = None
        self.completed = 0

    def start(self) -> None:
        """Begin (or, for a request applied again, go on with) the work."""
        self.completed = 0
        if self._deadline is None and self.seconds > 0:
            self._deadline = self._clock() + self.seconds

    def __call__(self, done: int) -> None:
        """The checkpoint: ``done`` items are complete; raise once the deadline has passed."""
        if self._deadline is None:
            return
        if self._clock() <= self._deadline:
            self.completed = done
            return
        raise RequestTooExpensive(
            budget=self.seconds, completed=self.completed, total=self.total, unit=self.unit
        )


__all__ = ["Budget"]
