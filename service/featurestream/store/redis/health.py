"""Whether Redis takes writes now: what ``/readyz`` asks the store."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from redis import exceptions as rex
from redis.asyncio.cluster import RedisCluster

from featurestream.errors import StoreUnavailable
from featurestream.store.redis.faults import rediscover, timed_out

log = logging.getLogger("featurestream.store")

# Seconds /readyz fails after Redis refused a write for want of memory (unless it
# has room again, or a write succeeds, before).
FULL_HOLD = 10.0
# The share of maxmemory below which Redis has room again.
ROOM = 0.9


async def not_writable(client: Any, cluster: bool) -> str | None:
    """Why the store cannot take writes now; None when it can.

    A single Redis must be a master (``ROLE``: a replica refuses writes). On a
    cluster every master the client knows must answer ``ROLE`` as a master and
    see the cluster ``ok`` (``CLUSTER INFO``: every slot served).
    """
    if not cluster:
        if is_master(await client.execute_command("ROLE")):
            return None
        return "Redis is a replica (ROLE)"
    if client._initialize:
        await client.initialize()
    for node in client.get_primaries():
        if not is_master(await node.execute_command("ROLE")):
            return f"{node.name}, a master of the client's topology, is not one (ROLE)"
        info: Any = await node.execute_command("CLUSTER", "INFO")
        text = info.decode() if isinstance(info, bytes) else str(info)
        if "cluster_state:ok" not in text:
            return f"{node.name} does not see the cluster ok (CLUSTER INFO)"
    return None


async def out_of_memory(client: Any, cluster: bool) -> str | None:
    """Why Redis has no room for writes (``INFO memory``, :func:`has_room`); None when
    it has."""
    info: Any = await client.info("memory")
    if cluster:
        if not all(has_room(i) for i in info.values() if isinstance(i, dict)):
            return "a node is out of memory"
    elif not has_room(info):
        return "Redis is out of memory"
    return None


def is_master(role: Any) -> bool:
    """Whether a ``ROLE`` reply is a master's."""
    if not role:
        return False
    first = role[0]
    return (first.decode() if isinstance(first, bytes) else str(first)) == "master"


def has_room(info: dict[str, Any]) -> bool:
    """Whether Redis has room for writes (``INFO memory``): the memory it counts against
    ``maxmemory`` (used, less what it does not count for eviction) is below
    ROOM x maxmemory (0: no limit). Redis refuses a write when it is over maxmemory as
    the write arrives, its own bytes included: a commit carries a whole state, so
    memory just below the limit is not room."""
    limit = int(info.get("maxmemory", 0))
    used = int(info.get("used_memory", 0)) - int(info.get("mem_not_counted_for_evict", 0))
    return limit == 0 or used < ROOM * limit


class Readiness:
    """The store's answer to ``/readyz``, and what it keeps between answers: when Redis
    last refused a write for want of memory (``full_at``, None when not since it had
    room), and why it said no last."""

    def __init__(
        self, client: Any, timeout: float, guard: Callable[[], AbstractAsyncContextManager[None]]
    ) -> None:
        self._redis = client
        self._cluster = isinstance(client, RedisCluster)
        self._timeout = timeout
        self._guard = guard
        self.full_at: float | None = None
        self._unready: str | None = None

    async def ping(self) -> bool:
        """Whether the store answers within ``store_timeout`` and takes writes.

        A single Redis must be a master (``ROLE``: a replica refuses writes). On a
        cluster every master the client knows must answer ``ROLE`` as a master and
        see the cluster ``ok`` (``CLUSTER INFO``: every slot served); otherwise, or
        when a node does not answer, the client reads the topology again and asks
        once more. All of it within one ``store_timeout``.

        After an OOM refusal the process is not ready until a write succeeds, Redis
        has room again (``INFO memory``: see :func:`has_room`), or FULL_HOLD seconds
        pass without another refusal (then writes are tried again).
        """
        deadline = asyncio.get_running_loop().time() + self._timeout
        why = await self._why_not(deadline, self._writable)
        if why is not None and self._cluster:
            # The topology the client read before a failover names a master that is
            # gone or demoted: read it again and ask once more, within the same time.
            rediscover(self._redis)
            why = await self._why_not(deadline, self._writable)
        if why is not None:
            rediscover(self._redis)
        else:
            why = await self._why_not(deadline, self._no_room)
        return self._ready(why)

    async def _why_not(
        self, deadline: float, check: Callable[[], Awaitable[str | None]]
    ) -> str | None:
        """What ``check`` says stands in the way, or that Redis did not answer or
        failed by ``deadline``; None when nothing does."""
        try:
            async with asyncio.timeout_at(deadline), self._guard():
                return await check()
        except TimeoutError:
            return timed_out(self._timeout)
        except (StoreUnavailable, rex.RedisError, rex.RedisClusterException, OSError) as exc:
            return str(exc)

    async def _no_room(self) -> str | None:
        """Out of memory, within FULL_HOLD seconds of a refusal; None otherwise (and the
        refusal is forgotten)."""
        full_at = self.full_at
        if full_at is not None and time.monotonic() - full_at < FULL_HOLD:
            why = await out_of_memory(self._redis, self._cluster)
            if why is not None:
                return why
        self.full_at = None
        return None

    def _ready(self, why: str | None) -> bool:
        """Whether ready (``why`` None). Turning not ready is a warning, with why; back
        to ready, or another reason meanwhile, a line at info."""
        was, self._unready = self._unready, why
        if why is None:
            if was is not None:
                log.info("the store takes writes again")
        elif was is None:
            log.warning("not ready: %s", why)
        elif why != was:
            log.info("still not ready: %s", why)
        return why is None

    async def _writable(self) -> str | None:
        return await not_writable(self._redis, self._cluster)
