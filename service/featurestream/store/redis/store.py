"""The Redis store: streams in Redis or a Redis Cluster, shared by any number of processes.

Layout (``store/keys.py``): per stream a meta hash, the state string, an event
log Stream with one entry per commit (entry id ``<version>-0``), the producers
hash (last seq), the stored-responses hash and the names log (store/names.py),
all under one hash tag, so a Redis Cluster keeps a stream on one slot. Writes
are the Lua scripts beside this module, so each is atomic on the server and
touches one slot; the commit script is a compare-and-set on (incarnation,
version, last commit id), run with its check of new feature names by
``commits.py``. Every call is bounded by ``store_timeout`` end to end
(a hung Redis: SIGSTOP, a partition, a long fork; a call cut short is cancelled
inside redis-py, which then closes that connection); Redis errors become the
store's own here and nowhere else (``faults.py``).

Cluster: ``redis+cluster://host:port[,host:port...]`` (``rediss+cluster://``
for TLS) uses redis-py's cluster client, which routes each command to the
master of its slot and follows the topology as it changes. There is no key
shared by every stream or tenant.
Tenants: see ``tenants.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any

from redis import exceptions as rex
from redis.asyncio.cluster import RedisCluster

from featurestream.config import Settings
from featurestream.errors import (
    StoreFull,
    StoreUnavailable,
    StreamExists,
    StreamNotFound,
)
from featurestream.store.base import (
    Commit,
    EventEntry,
    QuotaReached,
    StreamHead,
    StreamRecord,
    StreamSummary,
    Subscription,
    ttl_ms,
)
from featurestream.store.keys import (
    response_field,
    stream_keys,
    tenant_index_key,
)
from featurestream.store.names import INDEX_NAMES
from featurestream.store.redis.commits import Commits
from featurestream.store.redis.connect import connect
from featurestream.store.redis.faults import rediscover, store_error, timed_out
from featurestream.store.redis.health import Readiness
from featurestream.store.redis.hub import PubSubHub
from featurestream.store.redis.scripts import Scripts
from featurestream.store.redis.tenants import RESERVATION_GRACE, Reservations
from featurestream.store.redis.writes import Writes

log = logging.getLogger("featurestream.store")

_SUMMARY_FIELDS = ("info", "version", "updated_at", "selection", "status")


class RedisStore:
    """StateStore on a Redis server or a Redis Cluster (see the module docstring)."""

    def __init__(
        self,
        client: Any,
        *,
        prefix: str = "fs",
        replay_window: int = 1000,
        replay_bytes: int = 16 * 1024 * 1024,
        event_retention: int = 10_000,
        timeout: float = 2.0,
        replicas_ack: int = 0,
        replicas_ack_timeout: float = 1.0,
        notify_socket_timeout: float | None = None,
        names_cache: int = INDEX_NAMES,
    ):
        self._redis = client
        self._notify_socket_timeout = notify_socket_timeout
        self._cluster = isinstance(client, RedisCluster)
        self._prefix = prefix
        self._replay_window = replay_window
        self._replay_bytes = replay_bytes
        self._event_retention = event_retention
        self._timeout = timeout
        self._writes = Writes(client, replicas_ack, replicas_ack_timeout)
        scripts = Scripts(client)
        self._create = scripts.create
        self._unreserve = scripts.unreserve
        self._reservations = Reservations(client, prefix, scripts.reserve, scripts.drop_stale)
        self._hub: PubSubHub | None = None
        self._readiness = Readiness(client, timeout, self._guard)
        self._commits = Commits(
            scripts,
            self._writes,
            self._guard,
            self._readiness,
            prefix=prefix,
            limits=(replay_window, event_retention, replay_bytes),
            names_cache=names_cache,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisStore:
        return cls(
            connect(settings),
            prefix=settings.key_prefix,
            replay_window=settings.replay_window,
            replay_bytes=settings.replay_bytes,
            event_retention=settings.event_retention,
            timeout=settings.store_timeout,
            replicas_ack=settings.replicas_ack,
            replicas_ack_timeout=settings.replicas_ack_timeout,
            notify_socket_timeout=settings.redis_socket_timeout,
            names_cache=settings.names_cache,
        )

    @property
    def client(self) -> Any:
        return self._redis

    @property
    def cluster(self) -> bool:
        """Whether the store is a Redis Cluster."""
        return self._cluster

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def full(self) -> bool:
        """Whether Redis refused a write for want of memory and has not had room since."""
        return self._readiness.full_at is not None

    def _rediscover(self) -> None:
        """Have the cluster client read the topology again before its next command."""
        rediscover(self._redis)

    def _timed_out(self) -> str:
        return timed_out(self._timeout)

    @asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        """Every store call: bounded by ``store_timeout``, Redis errors as StoreUnavailable."""
        try:
            async with asyncio.timeout(self._timeout):
                yield
        except TimeoutError as exc:
            self._rediscover()
            raise StoreUnavailable(self._timed_out()) from exc
        except rex.OutOfMemoryError as exc:
            self._readiness.full_at = time.monotonic()
            log.warning("Redis refused a write: out of memory (maxmemory): %s", exc)
            raise StoreFull(
                "Redis is out of memory (maxmemory) and refuses writes; nothing was applied. "
                "Free memory (delete streams) or raise Redis's maxmemory, then retry."
            ) from exc
        except Exception as exc:
            error = store_error(exc)
            if error is None:
                raise
            self._rediscover()
            raise error from exc

    async def _script(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        return await self._writes.script(script, keys, args)

    async def _write(self, key: str, *command: Any) -> Any:
        return await self._writes.command(key, *command)

    # ------------------------------------------------------------ life cycle

    async def open(self) -> None:
        """Nothing to do: the client connects on its first command."""

    async def close(self) -> None:
        await self._commits.close()
        if self._hub is not None:
            await self._hub.close()
            self._hub = None
        await self._redis.aclose()

    @property
    def hub(self) -> PubSubHub:
        """This process's pub/sub connections (opened on the first subscription)."""
        if self._hub is None:
            self._hub = PubSubHub(
                self._redis,
                cluster=self._cluster,
                confirm_timeout=self._timeout,
                socket_timeout=self._notify_socket_timeout,
            )
        return self._hub

    @asynccontextmanager
    async def subscribe(self, stream_id: str) -> AsyncIterator[Subscription]:
        channel = stream_keys(self._prefix, stream_id).channel
        sub = Subscription(stream_id)
        hub = self.hub
        await hub.add(channel, sub)
        try:
            yield sub
        finally:
            await hub.remove(channel, sub)

    async def ping(self) -> bool:
        """Whether the store answers within ``store_timeout`` and takes writes
        (:class:`Readiness`)."""
        return await self._readiness.ping()

    # ------------------------------------------------------------ streams

    async def create(
        self,
        stream_id: str,
        info: dict[str, Any],
        incarnation: str,
        blob: bytes,
        created_at: str,
        selection: bytes,
        status: bytes,
        *,
        tenant: str | None = None,
        quota: int | None = None,
    ) -> None:
        k = stream_keys(self._prefix, stream_id)
        owned = tenant_index_key(self._prefix, tenant)
        async with self._guard():
            # Three steps, each on one slot (the tenant's index and the stream live on
            # different slots of a cluster): reserve the id in the tenant's index, the
            # quota counted in the same script; create the stream; mark the entry done.
            # A listing tolerates an index entry whose stream is missing, never the
            # reverse; an interrupted create leaves a reservation that a retry completes
            # or that is dropped once old (see _drop_stale_reservations).
            reserved_at = time.time()
            if not await self._reservations.reserve(owned, stream_id, quota, reserved_at):
                raise QuotaReached(tenant, quota or 0)
            try:
                created = await self._script(
                    self._create,
                    list(k.all()),
                    [
                        json.dumps(info),
                        incarnation,
                        blob,
                        created_at,
                        selection,
                        status,
                        ttl_ms(info),
                    ],
                )
            except rex.OutOfMemoryError:
                # Refused before it ran (maxmemory): nothing of the stream exists, so the
                # reservation is given back at once. Any other failure leaves it: the
                # create may have happened (outcome unknown).
                with suppress(rex.RedisError, rex.RedisClusterException, OSError):
                    await self._unreserve(keys=[owned], args=[stream_id, reserved_at])
                raise
            # Done (score 0) whether created now or found (the id is this tenant's: ids
            # are scoped by tenant), again in case a delete of the same id removed the
            # reservation meanwhile.
            await self._write(owned, "ZADD", owned, 0, stream_id)
        self._readiness.full_at = None
        if not created:
            raise StreamExists(stream_id)

    async def load(self, stream_id: str) -> StreamRecord:
        k = stream_keys(self._prefix, stream_id)
        async with self._guard(), self._redis.pipeline(transaction=True) as pipe:
            pipe.hmget(k.meta, "info", "incarnation", "version", "commit_id")
            pipe.get(k.state)
            pipe.hgetall(k.producers)
            pipe.hgetall(k.seen)
            meta, blob, producers, seen = await pipe.execute()
        if meta[0] is None or blob is None:
            raise StreamNotFound(stream_id)
        return StreamRecord(
            info=json.loads(meta[0]),
            incarnation=meta[1].decode(),
            version=int(meta[2]),
            blob=bytes(blob),
            producers={p.decode(): int(s) for p, s in producers.items()},
            commit_id=(meta[3] or b"").decode(),
            seen={p.decode(): int(t) for p, t in seen.items()},
        )

    async def head(self, stream_id: str) -> StreamHead:
        k = stream_keys(self._prefix, stream_id)
        async with self._guard():
            values: Any = await self._redis.hmget(k.meta, "incarnation", "version", "commit_id")
        if values[0] is None:
            raise StreamNotFound(stream_id)
        return StreamHead(values[0].decode(), int(values[1]), (values[2] or b"").decode())

    async def selection(self, stream_id: str) -> tuple[int, bytes]:
        k = stream_keys(self._prefix, stream_id)
        async with self._guard():
            values: Any = await self._redis.hmget(k.meta, "version", "selection")
        if values[0] is None:
            raise StreamNotFound(stream_id)
        return int(values[0]), bytes(values[1])

    async def summary(self, stream_id: str) -> StreamSummary:
        k = stream_keys(self._prefix, stream_id)
        async with self._guard():
            values = await self._redis.hmget(k.meta, *_SUMMARY_FIELDS)
        if values[0] is None:
            raise StreamNotFound(stream_id)
        return _summary(values)

    async def commit(self, stream_id: str, commit: Commit) -> int:
        """Commit a write as one compare-and-set (``commit.lua``); a feature stream's
        new names are refused when already in it (DuplicateNames, ``commits.py``)."""
        return await self._commits.commit(stream_id, commit)

    async def events(self, stream_id: str, from_version: int, count: int) -> list[EventEntry]:
        k = stream_keys(self._prefix, stream_id)
        async with self._guard():
            rows: Any = await self._redis.xrange(
                k.events, min=f"{max(from_version, 0)}-0", count=count
            )
            if not rows and not await self._redis.exists(k.meta):
                raise StreamNotFound(stream_id)
        return [EventEntry(int(eid.split(b"-")[0]), bytes(fields[b"e"])) for eid, fields in rows]

    async def stored_response(self, stream_id: str, producer: str, seq: int) -> bytes | None:
        k = stream_keys(self._prefix, stream_id)
        async with self._guard():
            value: Any = await self._redis.hget(k.responses, response_field(producer, seq))
            if value is not None and self._writes.acknowledged_by:
                # The write it answers may never have reached a replica (its first try got
                # 503): a write behind it that replicas acknowledge carries it with it, as
                # replication keeps the order of the master's writes.
                await self._writes.acknowledged(k.barrier, ("SET", k.barrier, b"", "PX", 60_000))
        return None if value is None else bytes(value)

    async def list_streams(self, tenant: str | None = None) -> list[StreamSummary]:
        async with self._guard():
            members: Any = await self._redis.zrange(tenant_index_key(self._prefix, tenant), 0, -1)
            ids = sorted(m.decode() for m in members)
            async with self._redis.pipeline(transaction=False) as pipe:
                for sid in ids:
                    pipe.hmget(stream_keys(self._prefix, sid).meta, *_SUMMARY_FIELDS)
                rows = await pipe.execute()
        return [_summary(values) for values in rows if values[0] is not None]

    async def delete(self, stream_id: str) -> bool:
        k = stream_keys(self._prefix, stream_id)
        async with self._guard():
            info: Any = await self._redis.hget(k.meta, "info")
            # One UNLINK of the stream's keys (one slot), then its index entry (a listing
            # skips an entry whose stream is gone; the quota drops it once old). UNLINK
            # frees the values in a background thread: a DEL of a stream of a million
            # feature names held Redis, and every read, for a quarter of a second.
            await self._write(k.meta, "UNLINK", *k.all(), k.barrier)
            self._commits.forget(stream_id)
            if info is not None:
                tenant = json.loads(info).get("tenant")
                index = tenant_index_key(self._prefix, tenant)
                await self._redis.zrem(index, stream_id)
                # A create of the same id may have run between the DEL and the ZREM:
                # its stream exists and must stay listed (and counted against the quota).
                if await self._redis.exists(k.meta):
                    await self._redis.zadd(index, {stream_id: 0}, nx=True)
        return info is not None


def _summary(values: Sequence[Any]) -> StreamSummary:
    info, version, updated_at, selection, status = values
    return StreamSummary(
        info=json.loads(info),
        version=int(version),
        updated_at=updated_at.decode(),
        selection=bytes(selection),
        status=bytes(status),
    )


__all__ = ["RESERVATION_GRACE", "RedisStore"]
