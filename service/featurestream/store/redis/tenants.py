"""Reservations in a tenant's index of streams (see reserve.lua).

Each tenant's stream ids are a sorted set of their own (one key). A create
first *reserves* its id there with a script that counts the set and adds the id
in one step (the per-tenant quota, atomic however many processes create at
once), then creates the stream's keys, then marks the reservation done (score
0): three single-slot steps, since the index and the stream live on different
slots of a cluster. A reservation whose create never happened (a crash, an
outage, an unknown outcome) is dropped once it is older than a minute and its
stream does not exist, when the tenant next reaches its quota; a retried create
completes one whose stream exists. So creating is O(1) in the number of streams
and listing reads the tenant's own index and streams.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from featurestream.store.keys import stream_keys

log = logging.getLogger("featurestream.store")

# A reservation whose stream does not exist is dropped once older than this (seconds),
# and a process looks for such reservations of one tenant at most this often.
RESERVATION_GRACE = 60.0
STALE_CHECK_INTERVAL = 10.0


class Reservations:
    """Reserve stream ids in their tenants' indexes."""

    def __init__(self, client: Any, prefix: str, reserve: Any, drop_stale: Any) -> None:
        self._redis = client
        self._prefix = prefix
        self._reserve = reserve
        self._drop_stale = drop_stale
        self._stale_checked: dict[str, float] = {}

    async def reserve(self, owned: str, stream_id: str, quota: int | None, now: float) -> bool:
        """Reserve ``stream_id`` in the tenant's index unless it is full (see reserve.lua)."""
        limit = quota if quota is not None else 2**53
        for attempt in range(2):
            if await self._reserve(keys=[owned], args=[stream_id, limit, now]):
                return True
            # Full: reservations left by creates that never happened may hold slots.
            if attempt or not await self._drop_stale_ones(owned):
                return False
        return False

    async def _drop_stale_ones(self, owned: str) -> int:
        """Drop the tenant's index entries whose stream does not exist (old enough)."""
        now = time.monotonic()
        if now - self._stale_checked.get(owned, -STALE_CHECK_INTERVAL) < STALE_CHECK_INTERVAL:
            return 0
        self._stale_checked[owned] = now
        cutoff = time.time() - RESERVATION_GRACE
        old: Any = await self._redis.zrangebyscore(owned, "-inf", cutoff)
        ids = [m.decode() for m in old]
        gone: list[str] = []
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            async with self._redis.pipeline(transaction=False) as pipe:
                for sid in batch:
                    pipe.exists(stream_keys(self._prefix, sid).meta)
                exists = await pipe.execute()
            gone += [sid for sid, e in zip(batch, exists, strict=True) if not e]
        if not gone:
            return 0
        dropped = int(await self._drop_stale(keys=[owned], args=[cutoff, *gone]))
        log.info("dropped %d stale entr(ies) of %s", dropped, owned)
        return dropped
