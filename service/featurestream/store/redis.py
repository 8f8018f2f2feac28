"""The Redis store: streams in Redis, shared by any number of server processes.

Layout (``store/keys.py``): per stream a meta hash, the state string, an event
log Stream with one entry per commit (entry id ``<version>-0``), the producers
hash (last seq), the stored-responses hash and the names set, all under one
hash tag. Writes are Lua scripts, so each is atomic on the server; the commit
script is a compare-and-set on (incarnation, version, last commit id). Redis
errors become StoreUnavailable here and nowhere else: among them a call that
takes longer than ``store_timeout`` end to end (a hung Redis: SIGSTOP, a
partition, a long fork), and ``OOM`` refusals (StoreFull, Redis at
``maxmemory``). A call cut short by the timeout is cancelled inside redis-py,
which then closes that connection instead of returning it to the pool with a
reply still pending (``Connection.read_response`` and ``send_packed_command``
disconnect on any exception, cancellation included).

Tenants: each tenant's stream ids are a sorted set of their own. A create
first *reserves* its id there with a script that counts the set and adds the
id in one step (the per-tenant quota, atomic however many processes create at
once), then creates the stream's keys and marks the reservation done (score
0). The two steps are separate scripts because the index and the stream live
on different Redis Cluster slots; a reservation whose create never happened
(a crash, an outage) is dropped once it is older than a minute and its
stream does not exist, when the tenant next reaches its quota. Listing reads
the tenant's own index and streams. Streams created before tenant indexes
existed are only in the global index; each process indexes them once, at
start (``index_existing``).

Selection notifications: the commit script PUBLISHes on the stream's channel.
Each process keeps one pub/sub connection (:class:`PubSubHub`) subscribed to
the channels its local listeners want, and fans messages out to them; it
reconnects on its own and then tells every listener to re-read (RESYNC), since
messages sent while it was away are lost.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any

import redis.asyncio as aioredis
from redis import exceptions as rex
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from featurestream.config import Settings
from featurestream.errors import (
    ConcurrentUpdate,
    DuplicateNames,
    StoreFull,
    StoreUnavailable,
    StreamExists,
    StreamNotFound,
)
from featurestream.store.base import (
    Broadcaster,
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
    index_key,
    indexed_key,
    response_field,
    stream_keys,
    tenant_index_key,
)

log = logging.getLogger("featurestream.store")

# KEYS[1] the tenant's index (sorted set: stream id -> when it was last reserved)
# ARGV[1] stream id  ARGV[2] quota  ARGV[3] now (Unix seconds)
# Returns 1 when the id is reserved (or already in the index, then renewed: the create
# finds the stream, or completes one that was interrupted), 0 when the tenant holds
# its quota of streams.
RESERVE_LUA = """
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  return 1
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return 1
"""

# KEYS[1] the tenant's index  ARGV[1] cutoff (Unix seconds)  ARGV[2..] ids whose stream
# does not exist. Drops those last reserved before the cutoff (one renewed since, by a
# create under way, stays). Returns how many it dropped.
DROP_STALE_LUA = """
local dropped = 0
for i = 2, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) <= tonumber(ARGV[1]) then
    redis.call('ZREM', KEYS[1], ARGV[i])
    dropped = dropped + 1
  end
end
return dropped
"""

# A reservation whose stream does not exist is dropped once older than this (seconds),
# and a process looks for such reservations of one tenant at most this often.
RESERVATION_GRACE = 60.0
STALE_CHECK_INTERVAL = 10.0

# KEYS[1] meta  KEYS[2] state  KEYS[3] events  KEYS[4] producers  KEYS[5] responses
# KEYS[6] names
# ARGV[1] info JSON  ARGV[2] incarnation  ARGV[3] state blob  ARGV[4] created_at
# ARGV[5] selection JSON  ARGV[6] status JSON  ARGV[7] time to live in ms ('0': none)
# Returns 1 when created, 0 when the stream already exists. A retried call that finds
# its own incarnation returns 1 again.
CREATE_LUA = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], 'incarnation') == ARGV[2] then return 1 end
  return 0
end
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[6])
redis.call('HSET', KEYS[1], 'info', ARGV[1], 'incarnation', ARGV[2], 'version', 0,
           'updated_at', ARGV[4], 'selection', ARGV[5], 'status', ARGV[6], 'commit_id', '',
           'ttl_ms', ARGV[7])
redis.call('SET', KEYS[2], ARGV[3])
if tonumber(ARGV[7]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
  redis.call('PEXPIRE', KEYS[2], ARGV[7])
end
return 1
"""

# KEYS[1] meta  KEYS[2] state  KEYS[3] events  KEYS[4] producers  KEYS[5] responses
# KEYS[6] names  KEYS[7] replays (the stored responses' fields by age)
# ARGV[1] commit id  ARGV[2] incarnation  ARGV[3] expected version  ARGV[4] expected last
# commit id  ARGV[5] state blob  ARGV[6] updated_at  ARGV[7] selection JSON
# ARGV[8] status JSON  ARGV[9] events payload  ARGV[10] producer ('' = none)
# ARGV[11] number P of (seq, response) pairs  ARGV[12] replay window  ARGV[13] channel
# ARGV[14] notification ('' = none)  ARGV[15] '1' when the state changes, '0' for a
# commit of producer records only  ARGV[16] event retention (log entries kept)
# ARGV[17] replay bytes (stored-response bytes kept)
# ARGV[18 .. 17+2P] seq_1, response_1, ..., seq_P, response_P (ascending; the producer's
# last seq becomes seq_P)  ARGV[18+2P] the new feature names, joined by newlines
# Returns the new version (the current one for a records-only commit); -1 on an
# incarnation, version or last-commit mismatch; -2 when the stream is gone; {-3, name,
# ...} (up to five names) when a new feature name is already in the stream, and then
# writes nothing. A commit whose id is already recorded returns the current version (a
# retried call). Every commit records its id as the last commit id. The stored
# responses are trimmed to the replay window per producer, then to the replay bytes per
# stream, oldest first (never those of this commit). A stream created with a time to live
# ('ttl_ms' in its meta) has the expiry of every key set again to it by each commit.
COMMIT_LUA = """
local meta = redis.call('HMGET', KEYS[1], 'version', 'incarnation', 'commit_id', 'replay_bytes',
                        'ttl_ms')
if not meta[1] then return -2 end
if meta[2] == ARGV[2] and meta[3] == ARGV[1] then return tonumber(meta[1]) end
if meta[2] ~= ARGV[2] or tonumber(meta[1]) ~= tonumber(ARGV[3])
   or (meta[3] or '') ~= ARGV[4] then return -1 end
local v = tonumber(meta[1])
local pairs_n = tonumber(ARGV[11])
local names = {}
if ARGV[15] == '1' then
  for name in string.gmatch(ARGV[18 + 2 * pairs_n], '[^\\n]+') do names[#names + 1] = name end
  local dups = {}
  local i = 1
  while i <= #names do
    local j = math.min(i + 999, #names)
    local seen = redis.call('SMISMEMBER', KEYS[6], unpack(names, i, j))
    for k = 1, #seen do
      if seen[k] == 1 and #dups < 5 then dups[#dups + 1] = names[i + k - 1] end
    end
    i = j + 1
  end
  if #dups > 0 then
    table.insert(dups, 1, -3)
    return dups
  end
  v = v + 1
  redis.call('SET', KEYS[2], ARGV[5])
  redis.call('HSET', KEYS[1], 'version', v, 'updated_at', ARGV[6], 'selection', ARGV[7],
             'status', ARGV[8], 'commit_id', ARGV[1])
  redis.call('XADD', KEYS[3], 'MAXLEN', '=', ARGV[16], v .. '-0', 'e', ARGV[9])
  i = 1
  while i <= #names do
    local j = math.min(i + 999, #names)
    redis.call('SADD', KEYS[6], unpack(names, i, j))
    i = j + 1
  end
else
  redis.call('HSET', KEYS[1], 'commit_id', ARGV[1])
end
if ARGV[10] ~= '' and pairs_n > 0 then
  local window = tonumber(ARGV[12])
  local bytes = tonumber(meta[4] or '0')
  local serial = redis.call('HINCRBY', KEYS[1], 'replay_serial', pairs_n) - pairs_n
  for p = 0, pairs_n - 1 do
    local seq = tonumber(ARGV[18 + 2 * p])
    local field = ARGV[10] .. '\\n' .. seq
    local body = ARGV[19 + 2 * p]
    bytes = bytes - redis.call('HSTRLEN', KEYS[5], field) + #body
    redis.call('HSET', KEYS[5], field, body)
    redis.call('ZADD', KEYS[7], serial + p + 1, field)
    local old = seq - window
    if old > 0 then
      local gone = ARGV[10] .. '\\n' .. old
      bytes = bytes - redis.call('HSTRLEN', KEYS[5], gone)
      redis.call('HDEL', KEYS[5], gone)
      redis.call('ZREM', KEYS[7], gone)
    end
  end
  local limit = tonumber(ARGV[17])
  while bytes > limit and redis.call('ZCARD', KEYS[7]) > pairs_n do
    local oldest = redis.call('ZPOPMIN', KEYS[7])
    bytes = bytes - redis.call('HSTRLEN', KEYS[5], oldest[1])
    redis.call('HDEL', KEYS[5], oldest[1])
  end
  if bytes < 0 then bytes = 0 end
  redis.call('HSET', KEYS[1], 'replay_bytes', bytes)
  redis.call('HSET', KEYS[4], ARGV[10], ARGV[16 + 2 * pairs_n])
end
if ARGV[15] == '1' and ARGV[14] ~= '' then redis.call('PUBLISH', ARGV[13], ARGV[14]) end
local ttl = tonumber(meta[5] or '0') or 0
if ttl > 0 then
  for k = 1, #KEYS do redis.call('PEXPIRE', KEYS[k], ttl) end
end
return v
"""

_SUMMARY_FIELDS = ("info", "version", "updated_at", "selection", "status")

# Seconds /readyz fails after Redis refused a write for want of memory (unless it
# has room again, or a write succeeds, before).
FULL_HOLD = 10.0
# The share of maxmemory below which Redis has room again.
ROOM = 0.9


class PubSubHub:
    """One pub/sub connection per process, fanned out to local subscriptions.

    A reader task owns the connection's reads. ``add`` subscribes a channel on
    its first local listener and waits until Redis confirms, so a listener
    misses nothing published after ``add`` returns; ``remove`` unsubscribes
    the channel after its last one. When the connection fails, the reader
    drops it, opens a new one with back-off, subscribes every wanted channel
    again and sends RESYNC to every listener.
    """

    def __init__(
        self, client: aioredis.Redis, *, confirm_timeout: float = 5.0, poll: float = 1.0
    ) -> None:
        self._client = client
        self._confirm_timeout = confirm_timeout
        self._poll = poll
        self._broadcaster = Broadcaster()
        self._pubsub: Any = None
        self._task: asyncio.Task[None] | None = None
        self._confirmed: dict[str, asyncio.Event] = {}
        self._healthy = asyncio.Event()
        self._closed = False
        self.reconnects = 0

    def listeners(self, channel: str) -> int:
        return self._broadcaster.count(channel)

    async def add(self, channel: str, sub: Subscription) -> None:
        if self._closed:
            raise StoreUnavailable("The store is closed.")
        first = self._broadcaster.add(channel, sub)
        event = self._confirmed.setdefault(channel, asyncio.Event())
        try:
            # The whole set-up is bounded: a hung Redis neither answers SUBSCRIBE nor
            # confirms it.
            async with asyncio.timeout(self._confirm_timeout):
                if first:
                    await self._subscribe(channel)
                self._ensure_reader()
                await event.wait()
        except BaseException as exc:
            await self.remove(channel, sub)
            if isinstance(exc, (rex.RedisError, OSError, TimeoutError)):
                raise StoreUnavailable(f"Redis pub/sub is unavailable: {exc!r}") from exc
            raise

    async def remove(self, channel: str, sub: Subscription) -> None:
        if not self._broadcaster.remove(channel, sub):
            return
        self._confirmed.pop(channel, None)
        if self._pubsub is not None:
            # The reader notices a broken connection; here a failure only means the
            # channel is dropped with it.
            with suppress(rex.RedisError, OSError, TimeoutError):
                async with asyncio.timeout(self._confirm_timeout):
                    await self._pubsub.unsubscribe(channel)

    async def _subscribe(self, *channels: str) -> None:
        if self._pubsub is None:
            self._pubsub = self._client.pubsub()
        await self._pubsub.subscribe(*channels)
        connection = self._pubsub.connection
        if connection is not None:
            # redis-py reconnects a pub/sub connection by itself (and subscribes again);
            # whatever was published meanwhile is lost, so listeners must re-read.
            connection.register_connect_callback(self._reconnected)

    async def _reconnected(self, connection: Any) -> None:
        self.reconnects += 1
        self._broadcaster.resync_all()

    def _ensure_reader(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._read(), name="featurestream-pubsub"
            )

    async def _read(self) -> None:
        backoff = 0.05
        while not self._closed:
            try:
                if self._pubsub is None:
                    wanted = self._broadcaster.keys()
                    if not wanted:
                        return
                    await self._subscribe(*wanted)
                    # Whatever was published while we were away is lost: listeners re-read.
                    await self._reconnected(None)
                message = await self._pubsub.get_message(timeout=self._poll)
                backoff = 0.05
            except asyncio.CancelledError:
                raise
            except (rex.RedisError, OSError, RuntimeError) as exc:
                log.warning("selection notifications interrupted (%r); reconnecting", exc)
                await self._drop()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            if message is None:
                continue
            kind = message.get("type")
            channel = message.get("channel")
            name = channel.decode() if isinstance(channel, bytes) else str(channel)
            if kind in (b"subscribe", "subscribe"):
                event = self._confirmed.get(name)
                if event is not None:
                    event.set()
            elif kind in (b"message", "message"):
                self._broadcaster.publish(name, bytes(message["data"]))

    async def _drop(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        for event in self._confirmed.values():
            event.clear()
        if pubsub is not None:
            if pubsub.connection is not None:
                # The connection goes back to the pool: it must not resync listeners later.
                pubsub.connection.deregister_connect_callback(self._reconnected)
            with suppress(Exception):
                await pubsub.aclose()

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        self._broadcaster.resync_all()
        await self._drop()


class RedisStore:
    """StateStore on a Redis server (see the module docstring)."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str = "fs",
        replay_window: int = 1000,
        replay_bytes: int = 16 * 1024 * 1024,
        event_retention: int = 10_000,
        timeout: float = 2.0,
    ):
        self._redis = client
        self._prefix = prefix
        self._replay_window = replay_window
        self._replay_bytes = replay_bytes
        self._event_retention = event_retention
        self._timeout = timeout
        self._create = client.register_script(CREATE_LUA)
        self._reserve = client.register_script(RESERVE_LUA)
        self._drop_stale = client.register_script(DROP_STALE_LUA)
        self._indexed = False
        self._stale_checked: dict[str, float] = {}
        self._commit = client.register_script(COMMIT_LUA)
        self._hub: PubSubHub | None = None
        # When Redis last refused a write for want of memory (None: not since it had room).
        self._full_at: float | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisStore:
        client = aioredis.Redis.from_url(
            settings.store_url,
            socket_timeout=settings.redis_socket_timeout,
            socket_connect_timeout=settings.redis_connect_timeout,
            max_connections=settings.redis_max_connections,
            health_check_interval=30,
            # Every write is idempotent (create by incarnation, commit by commit id), so a
            # command re-sent after a dropped connection cannot apply twice.
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=2),
            retry_on_error=[rex.ConnectionError, rex.TimeoutError],
            decode_responses=False,
        )
        return cls(
            client,
            prefix=settings.key_prefix,
            replay_window=settings.replay_window,
            replay_bytes=settings.replay_bytes,
            event_retention=settings.event_retention,
            timeout=settings.store_timeout,
        )

    @property
    def client(self) -> aioredis.Redis:
        return self._redis

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def full(self) -> bool:
        """Whether Redis refused a write for want of memory and has not had room since."""
        return self._full_at is not None

    @asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        """Every store call: bounded by ``store_timeout``, Redis errors as StoreUnavailable."""
        try:
            async with asyncio.timeout(self._timeout):
                yield
        except TimeoutError as exc:
            raise StoreUnavailable(
                f"Redis did not answer within {self._timeout:g} s (store_timeout)."
            ) from exc
        except rex.OutOfMemoryError as exc:
            self._full_at = time.monotonic()
            log.warning("Redis refused a write: out of memory (maxmemory): %s", exc)
            raise StoreFull(
                "Redis is out of memory (maxmemory) and refuses writes; nothing was applied. "
                "Free memory (delete streams) or raise Redis's maxmemory, then retry."
            ) from exc
        except (rex.ConnectionError, rex.TimeoutError, rex.BusyLoadingError, OSError) as exc:
            raise StoreUnavailable(f"Redis is unavailable: {exc}") from exc
        except rex.ResponseError as exc:
            if "LOADING" in str(exc) or "READONLY" in str(exc) or "MASTERDOWN" in str(exc):
                raise StoreUnavailable(f"Redis cannot serve writes: {exc}") from exc
            raise

    async def open(self) -> None:
        try:
            await self.index_existing()
        except StoreUnavailable as exc:
            # Not fatal: the first create or listing tries again.
            log.warning("streams not indexed by tenant yet (%s); retried on first use", exc)

    async def index_existing(self) -> int:
        """Add the streams that are in no tenant's index yet to their tenant's; how many.

        Those are the streams created before tenant indexes existed (or by a
        process of such a release during a rolling upgrade). Runs once per
        process; the difference of two sets, computed by Redis, is empty
        afterwards, so a process start costs one SDIFF.
        """
        if self._indexed:
            return 0
        added = 0
        async with self._guard():
            missing: Any = await self._redis.sdiff(
                [index_key(self._prefix), indexed_key(self._prefix)]
            )
            ids = sorted(m.decode() for m in missing)
            for start in range(0, len(ids), 500):
                batch = ids[start : start + 500]
                async with self._redis.pipeline(transaction=False) as pipe:
                    for sid in batch:
                        pipe.hget(stream_keys(self._prefix, sid).meta, "info")
                    infos = await pipe.execute()
                async with self._redis.pipeline(transaction=False) as pipe:
                    for sid, info in zip(batch, infos, strict=True):
                        if info is None:
                            continue  # a stale entry: its stream is gone
                        tenant = json.loads(info).get("tenant")
                        owned = tenant_index_key(self._prefix, tenant)
                        pipe.zadd(owned, {sid: time.time()}, nx=True)
                        pipe.sadd(indexed_key(self._prefix), sid)
                        added += 1
                    await pipe.execute()
        self._indexed = True
        if added:
            log.info("indexed %d existing stream(s) by tenant", added)
        return added

    async def close(self) -> None:
        if self._hub is not None:
            await self._hub.close()
            self._hub = None
        await self._redis.aclose()

    @property
    def hub(self) -> PubSubHub:
        """This process's pub/sub connection (opened on the first subscription)."""
        if self._hub is None:
            self._hub = PubSubHub(self._redis, confirm_timeout=self._timeout)
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
        """Whether Redis answers within ``store_timeout`` and takes writes.

        After an OOM refusal the process is not ready until a write succeeds, Redis
        has room again (``INFO memory``: see :func:`_has_room`), or FULL_HOLD seconds
        pass without another refusal (then writes are tried again).
        """
        try:
            async with self._guard():
                if not await self._redis.ping():
                    return False
                full_at = self._full_at
                if full_at is not None and time.monotonic() - full_at < FULL_HOLD:
                    info: Any = await self._redis.info("memory")
                    if not _has_room(info):
                        return False
                self._full_at = None
            return True
        except (StoreUnavailable, rex.RedisError, OSError):
            return False

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
        await self.index_existing()
        async with self._guard():
            # Indexes first: a listing tolerates an id whose stream is missing, never the
            # reverse. The reservation counts the tenant's streams and adds this one at once.
            if not await self._reserve_id(owned, stream_id, quota):
                raise QuotaReached(tenant, quota or 0)
            await self._redis.sadd(index_key(self._prefix), stream_id)
            await self._redis.sadd(indexed_key(self._prefix), stream_id)
            created = await self._create(
                keys=list(k.all()),
                args=[
                    json.dumps(info),
                    incarnation,
                    blob,
                    created_at,
                    selection,
                    status,
                    ttl_ms(info),
                ],
            )
            if created:
                # Again: a delete of the same id may have removed the reservation meanwhile.
                await self._redis.zadd(owned, {stream_id: time.time()})
        self._full_at = None
        if not created:
            raise StreamExists(stream_id)

    async def _reserve_id(self, owned: str, stream_id: str, quota: int | None) -> bool:
        """Reserve ``stream_id`` in the tenant's index unless it is full (see RESERVE_LUA)."""
        limit = quota if quota is not None else 2**53
        for attempt in range(2):
            if await self._reserve(keys=[owned], args=[stream_id, limit, time.time()]):
                return True
            # Full: reservations left by creates that never happened may hold slots.
            if attempt or not await self._drop_stale_reservations(owned):
                return False
        return False

    async def _drop_stale_reservations(self, owned: str) -> int:
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

    async def load(self, stream_id: str) -> StreamRecord:
        k = stream_keys(self._prefix, stream_id)
        async with self._guard(), self._redis.pipeline(transaction=True) as pipe:
            pipe.hmget(k.meta, "info", "incarnation", "version", "commit_id")
            pipe.get(k.state)
            pipe.hgetall(k.producers)
            meta, blob, producers = await pipe.execute()
        if meta[0] is None or blob is None:
            raise StreamNotFound(stream_id)
        return StreamRecord(
            info=json.loads(meta[0]),
            incarnation=meta[1].decode(),
            version=int(meta[2]),
            blob=bytes(blob),
            producers={p.decode(): int(s) for p, s in producers.items()},
            commit_id=(meta[3] or b"").decode(),
        )

    async def head(self, stream_id: str) -> StreamHead:
        k = stream_keys(self._prefix, stream_id)
        async with self._guard():
            values: Any = await self._redis.hmget(k.meta, "incarnation", "version", "commit_id")
        if values[0] is None:
            raise StreamNotFound(stream_id)
        return StreamHead(values[0].decode(), int(values[1]), (values[2] or b"").decode())

    async def summary(self, stream_id: str) -> StreamSummary:
        k = stream_keys(self._prefix, stream_id)
        async with self._guard():
            values = await self._redis.hmget(k.meta, *_SUMMARY_FIELDS)
        if values[0] is None:
            raise StreamNotFound(stream_id)
        return _summary(values)

    async def commit(self, stream_id: str, commit: Commit) -> int:
        k = stream_keys(self._prefix, stream_id)
        pairs = commit.seq_responses()
        args: list[Any] = [
            commit.commit_id,
            commit.incarnation,
            commit.expected_version,
            commit.expected_commit,
            commit.blob if commit.state_changed else b"",
            commit.updated_at,
            commit.selection,
            commit.status,
            commit.events,
            commit.producer or "",
            len(pairs),
            self._replay_window,
            k.channel,
            commit.notify,
            1 if commit.state_changed else 0,
            self._event_retention,
            self._replay_bytes,
        ]
        for seq, response in pairs:
            args += [seq, response]
        args.append("\n".join(commit.names) if commit.state_changed else "")
        async with self._guard():
            reply: Any = await self._commit(keys=list(k.all()), args=args)
        if isinstance(reply, int) and reply >= 0:
            self._full_at = None  # a write went through: Redis has room
        if isinstance(reply, list):
            raise DuplicateNames(stream_id, [bytes(n).decode() for n in reply[1:]])
        result = int(reply)
        if result == -2:
            raise StreamNotFound(stream_id)
        if result == -1:
            raise ConcurrentUpdate(stream_id, commit.expected_version)
        return result

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
        return None if value is None else bytes(value)

    async def list_streams(self, tenant: str | None = None) -> list[StreamSummary]:
        await self.index_existing()
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
            await self._redis.delete(*k.all())
            if info is not None:
                tenant = json.loads(info).get("tenant")
                await self._redis.zrem(tenant_index_key(self._prefix, tenant), stream_id)
            await self._redis.srem(index_key(self._prefix), stream_id)
            await self._redis.srem(indexed_key(self._prefix), stream_id)
        return info is not None


def _has_room(info: dict[str, Any]) -> bool:
    """Whether Redis has room for writes (``INFO memory``): the memory it counts against
    ``maxmemory`` (used, less what it does not count for eviction) is below
    ROOM x maxmemory (0: no limit). Redis refuses a write when it is over maxmemory as
    the write arrives, its own bytes included: a commit carries a whole state, so
    memory just below the limit is not room."""
    limit = int(info.get("maxmemory", 0))
    used = int(info.get("used_memory", 0)) - int(info.get("mem_not_counted_for_evict", 0))
    return limit == 0 or used < ROOM * limit


def _summary(values: Sequence[Any]) -> StreamSummary:
    info, version, updated_at, selection, status = values
    return StreamSummary(
        info=json.loads(info),
        version=int(version),
        updated_at=updated_at.decode(),
        selection=bytes(selection),
        status=bytes(status),
    )


__all__ = ["COMMIT_LUA", "CREATE_LUA", "RESERVE_LUA", "RedisStore"]
