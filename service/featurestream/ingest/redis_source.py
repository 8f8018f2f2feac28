"""Consuming Redis Streams: ``redis-stream://host:port/db?key=K&group=G``.

Each key is a partition, its producer ``redis:<key>``; an entry ``ms-n``
has the position ``ms * 2**20 + n`` (docs/api.md, "Consuming from a log").
Partition order is what makes a stream's state the same as over HTTP, and a
Redis consumer group hands entries to whichever consumer asks: so at most one
consumer of a group reads a key at a time, holding its *lease* (a key that
expires unless renewed). Consumers that see each other (a heartbeat in one
sorted set) share the keys: each holds at most its share, rounded up; the
others wait for a lease to come free.

The holder of a key, on each round:

1. claims (``XAUTOCLAIM``) the entries other consumers left pending beyond
   the claim timeout (a consumer that died, or lost its lease);
2. applies its own pending entries (claimed, or read before a restart under
   the same name), and while another consumer still holds entries of the key
   not yet claimable, waits: nothing newer is applied before them;
3. otherwise reads new entries (``XREADGROUP ... >``) of all its keys at once.

Entries are acknowledged (``XACK``) after the engine committed them; a
refused entry goes to the dead letters (``<key>:dead`` unless ``dead=``
names another key), with its problem and position, in the same transaction
as its acknowledgement. A store outage acknowledges nothing: the same entries
are applied again once it answers (replays, never second applications).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import socket
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from featurestream.api.problems import problem_of
from featurestream.engine import wire
from featurestream.errors import InvalidInput, StoreUnavailable
from featurestream.ingest.applier import Applier, Dead, Retry
from featurestream.ingest.messages import Message
from featurestream.ingest.stats import ConsumerStats

log = logging.getLogger("featurestream.ingest")

SCHEME = "redis-stream"
# Bits of an entry id's sequence part in its position (more is refused).
SEQ_BITS = 20

_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@dataclass(frozen=True)
class RedisSource:
    """A parsed ``redis-stream://`` source."""

    url: str  # the redis:// URL of the server holding the keys
    keys: tuple[str, ...]
    group: str
    dead: str | None = None  # one dead-letter key for all; None: <key>:dead
    claim_after: float = 30.0  # seconds: lease time, and idle time before a claim
    count: int = 100  # entries read at most per key and round
    block: float = 1.0  # seconds a read waits for new entries
    dead_max: int = 100_000  # dead letters kept per key (older ones trimmed)

    def dead_key(self, key: str) -> str:
        return self.dead or f"{key}:dead"


def parse(url: str) -> RedisSource:
    """The source ``url`` names, or InvalidInput.

    >>> s = parse("redis-stream://127.0.0.1:6379/0?key=a&key=b&group=g&claim=5")
    >>> s.url, s.keys, s.group, s.claim_after, s.dead_key("a")
    ('redis://127.0.0.1:6379/0', ('a', 'b'), 'g', 5.0, 'a:dead')
    """
    parts = urlsplit(url)
    if parts.scheme != SCHEME:
        raise InvalidInput(f"A Redis Streams source starts {SCHEME}://; got {url!r}.")
    query = parse_qs(parts.query)
    keys = tuple(k for value in query.pop("key", []) for k in value.split(",") if k)
    group = query.pop("group", [""])[-1]
    if not keys or not group:
        raise InvalidInput(f"A Redis Streams source names key=K and group=G; got {url!r}.")

    def number(name: str, default: float, minimum: float) -> float:
        raw = query.pop(name, [str(default)])[-1]
        try:
            value = float(raw)
        except ValueError:
            raise InvalidInput(f"{name} must be a number; got {raw!r}.", field=name) from None
        if not value >= minimum:
            raise InvalidInput(f"{name} must be >= {minimum}; got {raw}.", field=name)
        return value

    source = RedisSource(
        url=f"redis://{parts.netloc}{parts.path or '/0'}",
        keys=keys,
        group=group,
        dead=query.pop("dead", [None])[-1],
        claim_after=number("claim", 30.0, 0.1),
        count=int(number("count", 100, 1)),
        block=number("block", 1.0, 0.001),
        dead_max=int(number("dead_max", 100_000, 1)),
    )
    if query:
        raise InvalidInput(f"Unknown option(s) {', '.join(sorted(query))} in {url!r}.")
    return source


def position(entry_id: str) -> int:
    """The position of entry ``ms-n``: ``ms * 2**20 + n`` (increasing with the id).

    >>> position("1-0"), position("1-5"), position("2-0")
    (1048576, 1048581, 2097152)
    """
    ms, _, n = entry_id.partition("-")
    seq = int(n or 0)
    if seq >= 1 << SEQ_BITS:
        raise InvalidInput(
            f"Entry {entry_id}'s sequence part is beyond {(1 << SEQ_BITS) - 1}, the most a "
            "position keeps.",
            field="id",
        )
    return (int(ms) << SEQ_BITS) + seq


def _text(fields: dict[bytes, bytes], name: str) -> str | None:
    raw = fields.get(name.encode())
    return None if raw is None else raw.decode(errors="replace")


def message_of(key: str, entry_id: str, fields: dict[bytes, bytes]) -> Message:
    """The message of entry ``entry_id`` of ``key`` (position: see :func:`position`)."""
    return Message(
        partition=f"redis:{key}",
        position=position(entry_id),
        ref=entry_id,
        stream=_text(fields, "stream"),
        kind=_text(fields, "kind"),
        content_type=_text(fields, "content-type"),
        body=fields.get(b"body", b""),
        create=fields.get(b"create"),
    )


def default_consumer() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class RedisConsumer:
    """One consumer of a group, applying its keys' entries (see the module docstring)."""

    def __init__(
        self,
        source: RedisSource,
        applier: Applier,
        *,
        name: str | None = None,
        prefix: str = "featurestream:",
        stats: ConsumerStats | None = None,
    ) -> None:
        self.source = source
        self.applier = applier
        self.name = name or default_consumer()
        self.stats = stats or ConsumerStats()
        self._base = f"{prefix}consume:{source.group}"
        self._redis: aioredis.Redis = aioredis.Redis.from_url(source.url)
        self._acquire = self._redis.register_script(_ACQUIRE)
        self._release = self._redis.register_script(_RELEASE)
        self.owned: list[str] = []
        self._groups: set[str] = set()

    def _lease(self, key: str) -> str:
        return f"{self._base}:lease:{key}"

    @property
    def _ttl_ms(self) -> int:
        return max(1, int(self.source.claim_after * 1000))

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set; then give the leases back."""
        renewing = asyncio.get_running_loop().create_task(self._renew(stop))
        pause = 0.05
        try:
            while not stop.is_set():
                try:
                    await self.round()
                    pause = 0.05
                except (StoreUnavailable, Retry, RedisError, OSError) as exc:
                    # Nothing acknowledged: the same entries come again once it answers.
                    self.stats.pauses += 1
                    log.warning("consumer %s paused: %s", self.name, exc)
                    with suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), pause)
                    pause = min(pause * 2, 2.0)
        finally:
            renewing.cancel()
            with suppress(asyncio.CancelledError):
                await renewing
            await self.close()

    async def _renew(self, stop: asyncio.Event) -> None:
        """Keep the leases held while a batch is applied (a third of their time apart)."""
        while not stop.is_set():
            await asyncio.sleep(self.source.claim_after / 3)
            with suppress(RedisError, OSError):
                for key in list(self.owned):
                    await self._acquire(keys=[self._lease(key)], args=[self.name, self._ttl_ms])

    async def close(self) -> None:
        try:
            for key in self.owned:
                await self._release(keys=[self._lease(key)], args=[self.name])
            await self._redis.zrem(f"{self._base}:members", self.name)
        except (RedisError, OSError):
            pass  # the leases expire by themselves
        self.owned = []
        await self._redis.aclose()

    async def round(self) -> None:
        """Hold the leases due, then apply one batch per key (or wait for new entries)."""
        await self._hold()
        if not self.owned:
            await asyncio.sleep(min(self.source.claim_after / 3, self.source.block))
            return
        batches: dict[str, list[Any]] = {}
        fresh: list[str] = []
        for key in self.owned:
            mine, others = await self._pending(key)
            if mine:
                batches[key] = mine
            elif not others:
                fresh.append(key)
        if not batches and fresh:
            read: Any = await self._redis.xreadgroup(
                self.source.group,
                self.name,
                {k: ">" for k in fresh},
                count=self.source.count,
                block=max(1, int(self.source.block * 1000)),
            )
            batches = {k.decode(): entries for k, entries in read or []}
        elif not batches:
            # Every key waits for entries another consumer left: until they are claimable.
            await asyncio.sleep(min(self.source.claim_after / 4, 0.5))
        for key, entries in batches.items():
            await self._settle(key, entries)

    async def _hold(self) -> None:
        """Renew the leases held, give back those beyond this consumer's share, take free ones."""
        members = f"{self._base}:members"
        now = time.time()
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zadd(members, {self.name: now + self.source.claim_after})
            pipe.zremrangebyscore(members, "-inf", now)
            pipe.zcard(members)
            _, _, alive = await pipe.execute()
        keys = self.source.keys
        share = math.ceil(len(keys) / max(1, alive))
        held = [k for k in self.owned if await self._take(k)]
        while len(held) > share:
            key = held.pop()
            await self._release(keys=[self._lease(key)], args=[self.name])
        # Start at a place of this consumer's own, so consumers try different keys first.
        start = sum(self.name.encode()) % len(keys)
        for key in keys[start:] + keys[:start]:
            if len(held) >= share:
                break
            if key not in held and await self._take(key):
                held.append(key)
        self.owned = held

    async def _take(self, key: str) -> bool:
        if not await self._acquire(keys=[self._lease(key)], args=[self.name, self._ttl_ms]):
            return False
        if key not in self._groups:
            try:
                await self._redis.xgroup_create(key, self.source.group, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
            self._groups.add(key)
        return True

    async def _pending(self, key: str) -> tuple[list[Any], bool]:
        """This consumer's pending entries of ``key`` (claiming others' idle ones first),
        and whether other consumers still hold entries of it."""
        summary = await self._redis.xpending(key, self.source.group)
        holders = {c["name"].decode(): int(c["pending"]) for c in summary["consumers"] or []}
        others = any(n > 0 for name, n in holders.items() if name != self.name)
        if others:
            claimed = await self._redis.xautoclaim(
                key,
                self.source.group,
                self.name,
                min_idle_time=self._ttl_ms,
                start_id="0-0",
                count=self.source.count,
            )
            if claimed[1]:
                self.stats.claimed += len(claimed[1])
                summary = await self._redis.xpending(key, self.source.group)
                holders = {
                    c["name"].decode(): int(c["pending"]) for c in summary["consumers"] or []
                }
                others = any(n > 0 for name, n in holders.items() if name != self.name)
        if holders.get(self.name, 0) == 0:
            return [], others
        read: Any = await self._redis.xreadgroup(
            self.source.group, self.name, {key: "0"}, count=self.source.count
        )
        return (read[0][1] if read else []), others

    async def _settle(self, key: str, entries: Sequence[Any]) -> None:
        """Apply the entries, then acknowledge them, dead letters in the same transaction."""
        ids: list[bytes] = []
        read: list[tuple[str, dict[bytes, bytes], Message | Dead]] = []
        for raw_id, fields in entries:
            ids.append(raw_id)
            if not fields:
                continue  # deleted since it was read: nothing to apply
            entry_id = raw_id.decode()
            try:
                read.append((entry_id, fields, message_of(key, entry_id, fields)))
            except InvalidInput as exc:
                read.append((entry_id, fields, Dead(problem_of(exc))))
        # Fencing: a consumer that lost its lease (paused past it) applies nothing more.
        if not await self._take(key):
            self.owned = [k for k in self.owned if k != key]
            return
        applied = iter(await self.applier.apply([m for _, _, m in read if isinstance(m, Message)]))
        settled = [m if isinstance(m, Dead) else next(applied) for _, _, m in read]
        async with self._redis.pipeline(transaction=True) as pipe:
            for (entry_id, fields, _), outcome in zip(read, settled, strict=True):
                if isinstance(outcome, Dead):
                    pipe.xadd(
                        self.source.dead_key(key),
                        _dead_fields(fields, outcome, key, entry_id, self.source.group),
                        maxlen=self.source.dead_max,
                        approximate=True,
                    )
            pipe.xack(key, self.source.group, *ids)
            await pipe.execute()
        self.stats.count(settled)


def _dead_fields(
    fields: dict[bytes, bytes], outcome: Dead, key: str, ref: str, group: str
) -> dict[Any, Any]:
    """A dead letter: the entry's own fields, with its problem and where it was."""
    problem = json.dumps(wire.problem(outcome.problem), separators=(",", ":"))
    return {**fields, "problem": problem, "source": key, "position": ref, "group": group}


__all__ = ["SCHEME", "RedisConsumer", "RedisSource", "message_of", "parse", "position"]
