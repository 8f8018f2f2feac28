"""Turns at a few slots, taken in round robin over tenants (``GET /evaluation``).

A first-come queue lets one tenant that asks for many evaluations hold every
other tenant back for as long as its own take. :class:`FairGate` queues the
waiters of each tenant apart and, whenever a slot frees, hands it to the
next tenant in turn: a tenant waits for at most one turn of each other
tenant that is waiting, however many each has queued.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager


class FairGate:
    """At most ``slots`` holders at once; waiters served one tenant after another.

    >>> async def demo() -> list[str]:
    ...     gate, order = FairGate(1), []
    ...     async def job(tenant: str, name: str) -> None:
    ...         async with gate.turn(tenant):
    ...             order.append(name)
    ...             await asyncio.sleep(0)
    ...     await asyncio.gather(*(job(t, n) for t, n in
    ...         [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1"), ("c", "c1")]))
    ...     return order
    >>> asyncio.run(demo())
    ['a1', 'a2', 'b1', 'c1', 'a3']
    """

    def __init__(self, slots: int = 1) -> None:
        self.slots = slots
        self.busy = 0
        # Tenants in turn order, each with its waiters in the order they came.
        self._queues: OrderedDict[Hashable, deque[asyncio.Future[None]]] = OrderedDict()

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self._queues.values())

    @asynccontextmanager
    async def turn(self, tenant: Hashable) -> AsyncIterator[None]:
        """Hold a slot inside; wait for the tenant's turn first when none is free."""
        if self.busy < self.slots and not self._queues:
            self.busy += 1
        else:
            granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._queues.setdefault(tenant, deque()).append(granted)
            try:
                await granted
            except asyncio.CancelledError:
                if granted.done() and not granted.cancelled():
                    self._release()  # handed the slot as it was cancelled: pass it on
                else:
                    self._forget(tenant, granted)
                raise
        try:
            yield
        finally:
            self._release()

    def _forget(self, tenant: Hashable, granted: asyncio.Future[None]) -> None:
        queue = self._queues.get(tenant)
        if queue is not None and granted in queue:
            queue.remove(granted)
            if not queue:
                del self._queues[tenant]

    def _release(self) -> None:
        """The slot goes to the first waiter of the next tenant in turn, else frees."""
        while self._queues:
            tenant, queue = next(iter(self._queues.items()))
            granted = queue.popleft()
            if queue:
                self._queues.move_to_end(tenant)  # its next waiter after the others
            else:
                del self._queues[tenant]
            if not granted.done():
                granted.set_result(None)
                return
        self.busy -= 1


__all__ = ["FairGate"]
