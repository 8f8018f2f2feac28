"""The Redis store: streams in Redis or a Redis Cluster, shared by any number of processes.

Layout (``store/keys.py``): per stream a meta hash, the state string, an event
log Stream with one entry per commit (entry id ``<version>-0``), the producers
hash (last seq), the stored-responses hash and the names log (store/names.py),
all under one hash tag, so a Redis Cluster keeps a stream on one slot. Writes are Lua
scripts, so each is atomic on the server and touches one slot; the commit
script is a compare-and-set on (incarnation, version, last commit id). Redis
errors become StoreUnavailable here and nowhere else: among them a call that
takes longer than ``store_timeout`` end to end (a hung Redis: SIGSTOP, a
partition, a long fork), every cluster condition (MOVED or ASK the client
could not follow in time, TRYAGAIN, CLUSTERDOWN, a slot no node serves, a node
down, a master demoted under a WAIT: the client reads the topology again),
``OOM`` refusals (StoreFull, Redis at ``maxmemory``), and a connection failing
inside redis-py under a command, closed by another task (:func:`client_fault`).
A call cut short by the timeout is cancelled inside redis-py, which then
closes that connection instead of returning it to the pool with a reply still
pending.

Cluster: ``redis+cluster://host:port[,host:port...]`` (``rediss+cluster://``
for TLS) uses redis-py's cluster client, which routes each command to the
master of its slot and follows the topology as it changes. There is no key
shared by every stream or tenant.

Tenants: each tenant's stream ids are a sorted set of their own (one key). A
create first *reserves* its id there with a script that counts the set and
adds the id in one step (the per-tenant quota, atomic however many processes
create at once), then creates the stream's keys, then marks the reservation
done (score 0): three single-slot steps, since the index and the stream live
on different slots of a cluster. A reservation whose create never happened (a
crash, an outage, an unknown outcome) is dropped once it is older than a
minute and its stream does not exist, when the tenant next reaches its quota;
a retried create completes one whose stream exists. So creating is O(1) in
the number of streams and listing reads the tenant's own index and streams.

Acknowledged writes: with ``replicas_ack`` N > 0, every create, commit and
delete is followed by ``WAIT N timeout`` on the same connection (to the master
of the stream's slot); fewer acknowledgements are a StoreUnavailable whose
outcome is unknown (the engine then drops its copy of the stream).

Selection notifications: the commit script SPUBLISHes (Redis >= 7; PUBLISH
before) on the stream's shard channel. Each process keeps one pub/sub
connection per node (:class:`PubSubHub`) subscribed to the channels its local
listeners want, and fans messages out to them; after a lost connection or a
slot move it subscribes again on the new owner and tells the channels'
listeners to re-read (RESYNC), since messages sent while it was away are lost.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis import exceptions as rex
from redis.asyncio.cluster import ClusterNode, PipelineCommand, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff

from featurestream.config import Settings, parse_cluster_url
from featurestream.errors import (
    ConcurrentUpdate,
    DuplicateNames,
    StoreFull,
    StoreUnavailable,
    StreamExists,
    StreamNotFound,
)
from featurestream.store.base import (
    RESYNC,
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
    StreamKeys,
    legacy_index_key,
    response_field,
    stream_keys,
    tenant_index_key,
)
from featurestream.store.names import (
    INDEX_NAMES,
    INLINE_NAMES,
    NamesCache,
    NameSet,
    StreamNames,
    split,
)

log = logging.getLogger("featurestream.store")
T = TypeVar("T")

# The cluster's transient conditions: a slot moving or failed over (MOVED, ASK), TRYAGAIN
# during a migration, CLUSTERDOWN / MASTERDOWN, a slot no node serves, a node that became
# a replica (READONLY), the client unable to reach any node.
CLUSTER_CONDITIONS: tuple[type[BaseException], ...] = (
    rex.ClusterError,
    rex.AskError,
    rex.TryAgainError,
    rex.ReadOnlyError,
    rex.SlotNotCoveredError,
    rex.RedisClusterException,
)
# Error replies of a Redis that cannot take the write now (loading its data, a replica,
# fewer good replicas than min-replicas-to-write, a master down), or that became a
# replica under a WAIT (UNBLOCKED) or before it (a WAIT sent to a replica).
UNAVAILABLE_CODES = re.compile(
    r"\b(LOADING|READONLY|MASTERDOWN|NOREPLICAS|CLUSTERDOWN|TRYAGAIN|MOVED|ASK|MISCONF|BUSY"
    r"|UNBLOCKED)\b|cannot be used with replica"
)


# Where redis-py keeps its connections: its socket layer, reply parsers and the cluster
# client's node and slot caches. What fails there under a command is the connection.
CLIENT_CONNECTION_MODULES = ("redis.asyncio.connection", "redis._parsers", "redis.asyncio.cluster")
# What a connection closed under a command raises there (not a Redis error).
CLIENT_RACE_ERRORS = (AttributeError, RuntimeError, TypeError, KeyError, IndexError)


def client_fault(exc: BaseException) -> bool:
    """Whether ``exc`` is a Redis error, or a connection of redis-py failing under a
    command.

    A connection closed under a command by another task: redis-py's cluster client
    closes every node's connections when a topology refresh fails (a node down, a
    failover under way), and a command already past its connection check then finds
    its socket gone (``'NoneType' object has no attribute 'writelines'``, or the event
    loop's ``RuntimeError`` on a closed transport). For the caller that is an outage
    like any other: the outcome of the command is unknown. Recognised by its kind and
    by a frame of redis-py's connection layer on the way to where it was raised; the
    store's own errors, and a call to redis-py with wrong arguments (refused before any
    connection is used), stay themselves.
    """
    if isinstance(exc, (rex.RedisError, rex.RedisClusterException)):
        return True
    if not isinstance(exc, CLIENT_RACE_ERRORS):
        return False
    tb = exc.__traceback__
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        if module.startswith(CLIENT_CONNECTION_MODULES):
            return True
        tb = tb.tb_next
    return False


def outage(exc: BaseException) -> bool:
    """Whether ``exc`` means Redis cannot be reached now: a Redis or socket error, a
    timeout, or a :func:`client_fault`."""
    return isinstance(exc, (OSError, TimeoutError)) or client_fault(exc)


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

# KEYS[1] the tenant's index  ARGV[1] stream id  ARGV[2] when this create reserved it
# Gives the reservation back (a create refused before it wrote anything), unless it was
# renewed or marked done since (another create of the same id). Returns 1 when removed.
UNRESERVE_LUA = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
"""

# A reservation whose stream does not exist is dropped once older than this (seconds),
# and a process looks for such reservations of one tenant at most this often.
RESERVATION_GRACE = 60.0
STALE_CHECK_INTERVAL = 10.0

# KEYS[1] meta  KEYS[2] state  KEYS[3] events  KEYS[4] producers  KEYS[5] responses
# KEYS[6] names (releases before the names log)  KEYS[7] replays  KEYS[8] names pending
# (idem)  KEYS[9] names log  KEYS[10] names ids
# ARGV[1] info JSON  ARGV[2] incarnation  ARGV[3] state blob  ARGV[4] created_at
# ARGV[5] selection JSON  ARGV[6] status JSON  ARGV[7] time to live in ms ('0': none)
# Returns 1 when created, 0 when the stream already exists. A retried call that finds
# its own incarnation returns 1 again.
CREATE_LUA = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], 'incarnation') == ARGV[2] then return 1 end
  return 0
end
redis.call('UNLINK', KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9],
           KEYS[10])
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
# KEYS[6] names (releases before the names log)  KEYS[7] replays (the stored responses'
# fields by age)  KEYS[8] names pending (idem)  KEYS[9] names log  KEYS[10] names ids
# ARGV[1] commit id  ARGV[2] incarnation  ARGV[3] expected version  ARGV[4] expected last
# commit id  ARGV[5] state blob  ARGV[6] updated_at  ARGV[7] selection JSON
# ARGV[8] status JSON  ARGV[9] events payload  ARGV[10] producer ('' = none)
# ARGV[11] number P of (seq, response) pairs  ARGV[12] replay window  ARGV[13] channel
# ARGV[14] notification ('' = none; SPUBLISHed on Redis >= 7, else PUBLISHed)
# ARGV[15] '1' when the state changes, '0' for a commit of producer records only
# ARGV[16] event retention (log entries kept)
# ARGV[17] replay bytes (stored-response bytes kept)
# ARGV[18 .. 17+2P] seq_1, response_1, ..., seq_P, response_P (ascending; the producer's
# last seq becomes seq_P)  ARGV[18+2P] the new feature names, joined by newlines
# ARGV[19+2P] the entries of the names log the caller looked the names up in, ARGV[20+2P]
# the id of the last of them ('' for none)
# Returns {version, appended}: the new version (the current one for a records-only
# commit), or -1 on an incarnation, version or last-commit mismatch, -2 when the stream
# is gone, -4 when the names log does not end where the caller looked (see
# RedisStore.commit; nothing is written then); appended is 1 when the names went to the
# log as its next entry. The names are not looked up here (the caller did, in its copy
# of the log: store/names.py), only appended, as one entry. A commit whose id is already
# recorded returns the current version (a retried call). Every
# commit records its id as the last commit id. The stored
# responses are trimmed to the replay window per producer, then to the replay bytes per
# stream, oldest first (never those of this commit). A stream created with a time to live
# ('ttl_ms' in its meta) has the expiry of every key set again to it by each commit.
COMMIT_LUA = """
local meta = redis.call('HMGET', KEYS[1], 'version', 'incarnation', 'commit_id', 'replay_bytes',
                        'ttl_ms')
if not meta[1] then return {-2, 0} end
if meta[2] == ARGV[2] and meta[3] == ARGV[1] then return {tonumber(meta[1]), 0} end
if meta[2] ~= ARGV[2] or tonumber(meta[1]) ~= tonumber(ARGV[3])
   or (meta[3] or '') ~= ARGV[4] then return {-1, 0} end
local v = tonumber(meta[1])
local pairs_n = tonumber(ARGV[11])
local appended = 0
if ARGV[15] == '1' then
  local names = ARGV[18 + 2 * pairs_n]
  if names ~= '' then
    local n = redis.call('LLEN', KEYS[10])
    if n ~= tonumber(ARGV[19 + 2 * pairs_n])
       or (n > 0 and redis.call('LINDEX', KEYS[10], -1) ~= ARGV[20 + 2 * pairs_n]) then
      return {-4, 0}
    end
  end
  v = v + 1
  redis.call('SET', KEYS[2], ARGV[5])
  redis.call('HSET', KEYS[1], 'version', v, 'updated_at', ARGV[6], 'selection', ARGV[7],
             'status', ARGV[8], 'commit_id', ARGV[1])
  redis.call('XADD', KEYS[3], 'MAXLEN', '=', ARGV[16], v .. '-0', 'e', ARGV[9])
  if names ~= '' then
    redis.call('RPUSH', KEYS[9], names)
    redis.call('RPUSH', KEYS[10], ARGV[1])
    appended = 1
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
    -- The seq as given: a log's positions are beyond what a Lua number prints exactly.
    local field = ARGV[10] .. '\\n' .. ARGV[18 + 2 * p]
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
if ARGV[15] == '1' and ARGV[14] ~= '' then
  -- Sharded pub/sub from Redis 7 on (redis.REDIS_VERSION is new in 7.0): on a cluster the
  -- message goes to the stream's shard only; classic PUBLISH before.
  if redis.REDIS_VERSION then redis.call('SPUBLISH', ARGV[13], ARGV[14])
  else redis.call('PUBLISH', ARGV[13], ARGV[14]) end
end
local ttl = tonumber(meta[5] or '0') or 0
if ttl > 0 then
  for k = 1, #KEYS do redis.call('PEXPIRE', KEYS[k], ttl) end
end
return {v, appended}
"""

# The entries of a stream's names log since the first ``known`` (store/names.py), read
# atomically with the stream's head.
# KEYS[1] meta  KEYS[2] names ids  KEYS[3] names log
# ARGV[1] known: entries the caller has  ARGV[2] the id of the last of them ('' for none)
# ARGV[3] entries to return at most
# Returns {version, incarnation, last commit id, entries in the log, from, ids, entries}:
# the entries from ``from`` on, with their commits' ids; ``from`` is -1 (and nothing
# follows) when the caller's entries are not the log's first ones any more (the id at
# their end differs, or the log is shorter): it must read the log from the start.
NAMES_SINCE_LUA = """
local head = redis.call('HMGET', KEYS[1], 'version', 'incarnation', 'commit_id')
local n = redis.call('LLEN', KEYS[2])
local known = tonumber(ARGV[1])
if known > n or (known > 0 and redis.call('LINDEX', KEYS[2], known - 1) ~= ARGV[2]) then
  return {head[1], head[2], head[3], n, -1}
end
local last = math.min(n, known + tonumber(ARGV[3])) - 1
if last < known then return {head[1], head[2], head[3], n, known, {}, {}} end
return {head[1], head[2], head[3], n, known, redis.call('LRANGE', KEYS[2], known, last),
        redis.call('LRANGE', KEYS[3], known, last)}
"""

# Log entries one NAMES_SINCE_LUA call returns at most: an entry holds the names of a
# request (at most max_columns_per_request of them), so a reply holds no more names
# than the commit that wrote them carried.
NAMES_ENTRIES = 1

# Members of the set of names of releases before the log read per SSCAN call.
LEGACY_NAMES_PIECE = 1000

_SUMMARY_FIELDS = ("info", "version", "updated_at", "selection", "status")

# Seconds /readyz fails after Redis refused a write for want of memory (unless it
# has room again, or a write succeeds, before).
FULL_HOLD = 10.0
# The share of maxmemory below which Redis has room again.
ROOM = 0.9


class _Shard:
    """One pub/sub connection to one Redis node, with the channels subscribed on it."""

    def __init__(self, name: str, pubsub: Any) -> None:
        self.name = name
        self.pubsub = pubsub
        self.channels: set[str] = set()
        self.task: asyncio.Task[None] | None = None


class PubSubHub:
    """Pub/sub connections of one process, fanned out to local subscriptions.

    On Redis 7 and later the hub uses sharded pub/sub (SSUBSCRIBE, matching the
    commit script's SPUBLISH): each channel is subscribed on a connection to the
    node that owns its slot, one connection per node (on a single Redis, one in
    all). Before Redis 7, one connection with classic SUBSCRIBE.

    ``add`` subscribes a channel on its first local listener and waits until
    Redis confirms, so a listener misses nothing published after ``add``
    returns; ``remove`` unsubscribes the channel after its last one. A reader
    task per connection delivers the messages. When a connection fails (its
    node died, a failover) or the node tells the hub a channel's slot moved
    away (an unsolicited SUNSUBSCRIBE), the hub asks the cluster for its
    topology again, subscribes the channels on their owners' connections, with
    back-off until it succeeds, and sends RESYNC to their listeners: messages
    published meanwhile are lost.
    """

    def __init__(
        self,
        client: Any,
        *,
        cluster: bool = False,
        confirm_timeout: float = 5.0,
        poll: float = 1.0,
        socket_timeout: float | None = None,
    ) -> None:
        self._client = client
        self._cluster = cluster
        self._confirm_timeout = confirm_timeout
        self._poll = poll
        self._socket_timeout = socket_timeout
        self._broadcaster = Broadcaster()
        self._shards: dict[str, _Shard] = {}
        self._where: dict[str, str] = {}  # channel -> name of the shard it is subscribed on
        self._confirmed: dict[str, asyncio.Event] = {}
        self._lock = asyncio.Lock()
        self._sharded: bool | None = True if cluster else None
        self._recovery: asyncio.Task[None] | None = None
        self._single: aioredis.Redis | None = None  # the pub/sub client of a single Redis
        self._lost: set[str] = set()  # wanted channels to subscribe again
        self._closed = False
        self.reconnects = 0

    def listeners(self, channel: str) -> int:
        return self._broadcaster.count(channel)

    @property
    def sharded(self) -> bool | None:
        """Whether the hub uses sharded pub/sub (None until its first subscription)."""
        return self._sharded

    def shard_of(self, channel: str) -> str | None:
        """The node a channel is subscribed on (``host:port``), None when it is not."""
        return self._where.get(channel)

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
                    async with self._lock:
                        await self._subscribe(channel)
                await event.wait()
        except BaseException as exc:
            await self.remove(channel, sub)
            if outage(exc):
                raise StoreUnavailable(f"Redis pub/sub is unavailable: {exc!r}") from exc
            raise

    async def remove(self, channel: str, sub: Subscription) -> None:
        if not self._broadcaster.remove(channel, sub):
            return
        self._confirmed.pop(channel, None)
        self._lost.discard(channel)
        async with self._lock:
            if self._broadcaster.count(channel):
                return  # wanted again meanwhile
            name = self._where.pop(channel, None)
            shard = self._shards.get(name) if name is not None else None
            if shard is None:
                return
            shard.channels.discard(channel)
            # The reader notices a broken connection (and may close it meanwhile):
            # here a failure only means the channel is dropped with it.
            try:
                async with asyncio.timeout(self._confirm_timeout):
                    if self._sharded:
                        await shard.pubsub.sunsubscribe(channel)
                    else:
                        await shard.pubsub.unsubscribe(channel)
            except Exception as exc:
                if not outage(exc):
                    raise
            if not shard.channels:
                await self._close_shard(shard)

    # ------------------------------------------------------------ connections

    async def _is_sharded(self) -> bool:
        if self._sharded is None:
            info: Any = await self._client.info("server")
            major = str(info.get("redis_version", "0")).split(".", 1)[0]
            self._sharded = int(major) >= 7 if major.isdigit() else False
        return self._sharded

    async def _owner(self, channel: str) -> tuple[str, Any]:
        """The name of the node that owns ``channel`` and a factory of pub/sub connections
        to it."""
        if not self._cluster:
            if self._single is None:
                self._single = _own_client(
                    self._client.connection_pool.connection_class,
                    self._client.connection_pool.connection_kwargs,
                    self._socket_timeout,
                )
            return "", self._single.pubsub
        if self._client._initialize:  # the cluster client's own "rediscover" flag
            await self._client.initialize()
        node = self._client.get_node_from_key(channel)
        return node.name, lambda: _own_client(
            node.connection_class, node.connection_kwargs, self._socket_timeout
        ).pubsub()

    async def _subscribe(self, channel: str) -> None:
        """Subscribe ``channel`` on its owner's connection (called with the lock held)."""
        sharded = await self._is_sharded()
        name, make = await self._owner(channel)
        shard = self._shards.get(name)
        if shard is None:
            shard = self._shards[name] = _Shard(name, make())
        try:
            if sharded:
                await shard.pubsub.ssubscribe(channel)
            else:
                await shard.pubsub.subscribe(channel)
        except BaseException:
            if not shard.channels:
                await self._close_shard(shard)  # a connection that never served
            raise
        shard.channels.add(channel)
        self._where[channel] = name
        if shard.task is None:
            shard.task = asyncio.get_running_loop().create_task(
                self._read(shard), name=f"featurestream-pubsub-{name}"
            )

    async def _close_shard(self, shard: _Shard) -> None:
        if self._shards.get(shard.name) is shard:
            del self._shards[shard.name]
        task, shard.task = shard.task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await task
        with suppress(Exception):
            await shard.pubsub.aclose()

    async def _read(self, shard: _Shard) -> None:
        while not self._closed:
            try:
                message = await shard.pubsub.get_message(timeout=self._poll)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not isinstance(exc, RuntimeError) and not outage(exc):
                    # A task nobody awaits: say it died, and why.
                    log.exception("selection notifications from %s failed", shard.name or "redis")
                    raise
                log.warning(
                    "selection notifications from %s interrupted (%r); subscribing again",
                    shard.name or "redis",
                    exc,
                )
                await self._shard_lost(shard)
                return
            if message is None:
                continue
            kind = message.get("type")
            kind = kind.decode() if isinstance(kind, bytes) else str(kind)
            channel = message.get("channel")
            name = channel.decode() if isinstance(channel, bytes) else str(channel)
            if kind in ("subscribe", "ssubscribe"):
                event = self._confirmed.get(name)
                if event is not None:
                    event.set()
            elif kind in ("message", "smessage"):
                self._broadcaster.publish(name, bytes(message["data"]))
            elif (
                kind == "sunsubscribe"
                and self._broadcaster.count(name)
                and self._where.get(name) == shard.name
            ):
                # Not ours: the node no longer owns the channel's slot (a failover, a
                # resharding). Subscribe it again on its new owner.
                log.info("channel %s moved away from %s; subscribing again", name, shard.name)
                shard.channels.discard(name)
                self._where.pop(name, None)
                self._lost_channels([name])

    async def _shard_lost(self, shard: _Shard) -> None:
        lost = [c for c in shard.channels if self._where.get(c) == shard.name]
        for channel in lost:
            self._where.pop(channel, None)
        shard.channels.clear()
        await self._close_shard(shard)
        self._lost_channels(lost)

    def _lost_channels(self, channels: list[str]) -> None:
        for channel in channels:
            event = self._confirmed.get(channel)
            if event is not None:
                event.clear()
        self._lost.update(channels)
        if self._recovery is None or self._recovery.done():
            self._recovery = asyncio.get_running_loop().create_task(
                self._recover(), name="featurestream-pubsub-recovery"
            )

    async def _recover(self) -> None:
        """Subscribe the lost channels again (topology re-read first), with back-off."""
        backoff = 0.05
        while self._lost and not self._closed:
            if self._cluster:
                self._client._initialize = True  # re-read the slots before resolving owners
            done: list[str] = []
            try:
                async with asyncio.timeout(self._confirm_timeout), self._lock:
                    for channel in sorted(self._lost):
                        if not self._broadcaster.count(channel):
                            done.append(channel)
                        elif channel not in self._where:
                            await self._subscribe(channel)
                            done.append(channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not outage(exc):
                    log.exception("subscribing selection notifications again failed")
                    raise
                log.warning("selection notifications not subscribed again yet (%r)", exc)
            self._lost.difference_update(done)
            if done:
                # Whatever was published while they were away is lost: listeners re-read.
                self.reconnects += 1
                for channel in done:
                    self._broadcaster.publish(channel, RESYNC)
            if self._lost:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    async def close(self) -> None:
        self._closed = True
        if self._recovery is not None:
            self._recovery.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._recovery
            self._recovery = None
        self._broadcaster.resync_all()
        for shard in list(self._shards.values()):
            await self._close_shard(shard)
        self._where.clear()
        if self._single is not None:
            with suppress(Exception):
                await self._single.aclose()
            self._single = None


def _own_client(
    connection_class: Any, connection_kwargs: dict[str, Any], socket_timeout: float | None
) -> aioredis.Redis:
    """A client of one Redis node for pub/sub, with the store's connection settings and
    no retries of its own (a silent reconnect would lose messages unnoticed): the hub
    handles every failure, and then makes the listeners re-read. ``socket_timeout``
    (when not None) bounds each of its socket operations: its reads wait outside any
    store call, so nothing else bounds them."""
    kwargs = dict(connection_kwargs)
    if socket_timeout is not None:
        kwargs["socket_timeout"] = socket_timeout
    for key in ("retry_on_error", "retry_on_timeout", "event_dispatcher"):
        kwargs.pop(key, None)
    kwargs["retry"] = Retry(NoBackoff(), 0)
    pool = aioredis.ConnectionPool(connection_class=connection_class, **kwargs)
    return aioredis.Redis(connection_pool=pool)


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
        self._replicas_ack = replicas_ack
        self._replicas_ack_ms = max(1, round(replicas_ack_timeout * 1000))
        self._create = client.register_script(CREATE_LUA)
        self._reserve = client.register_script(RESERVE_LUA)
        self._drop_stale = client.register_script(DROP_STALE_LUA)
        self._unreserve = client.register_script(UNRESERVE_LUA)
        self._migrated = False
        self._stale_checked: dict[str, float] = {}
        self._commit = client.register_script(COMMIT_LUA)
        self._names_since = client.register_script(NAMES_SINCE_LUA)
        self._names = NamesCache(names_cache)
        self._adding: set[asyncio.Task[None]] = set()  # see commit
        self._hub: PubSubHub | None = None
        # When Redis last refused a write for want of memory (None: not since it had room).
        self._full_at: float | None = None
        self._unready: str | None = None  # why /readyz said no last (None: it said yes)

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisStore:
        # Every write is idempotent (create by incarnation, commit by commit id), so a
        # command re-sent after a dropped connection cannot apply twice.
        retry = Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=2)
        common: dict[str, Any] = {
            # No socket timeout on the commands' connections: every store call is
            # bounded as a whole by store_timeout (``_guard``; a call cut short closes
            # its connection). With one, redis-py sends each command through
            # asyncio.wait_for, which on Python 3.11 runs it as a task of its own: one
            # more pass of the event loop for every command, a read's among them.
            # The notifications' connections keep it (``PubSubHub``).
            "socket_timeout": None,
            "socket_connect_timeout": settings.redis_connect_timeout,
            "max_connections": settings.redis_max_connections,
            "health_check_interval": 30,
            "retry": retry,
            "decode_responses": False,
        }
        client: Any
        if settings.store_cluster:
            target = parse_cluster_url(settings.store_url)
            client = RedisCluster(
                startup_nodes=[ClusterNode(host, port) for host, port in target.nodes],
                username=target.username,
                password=target.password,
                ssl=target.ssl,
                # A failover or a slot moving is retried by the client once the
                # topology is read again; what is left over is a 503 (store_timeout).
                **common,
            )
        else:
            client = aioredis.Redis.from_url(
                settings.store_url,
                retry_on_error=[rex.ConnectionError, rex.TimeoutError],
                **common,
            )
        return cls(
            client,
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
        return self._full_at is not None

    def _rediscover(self) -> None:
        """Have the cluster client read the topology again before its next command."""
        if self._cluster:
            # redis-py's own flag: RedisCluster.initialize() runs again on the next call.
            self._redis._initialize = True

    def _timed_out(self) -> str:
        return f"Redis did not answer within {self._timeout:g} s (store_timeout)."

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
            self._full_at = time.monotonic()
            log.warning("Redis refused a write: out of memory (maxmemory): %s", exc)
            raise StoreFull(
                "Redis is out of memory (maxmemory) and refuses writes; nothing was applied. "
                "Free memory (delete streams) or raise Redis's maxmemory, then retry."
            ) from exc
        except (rex.ConnectionError, rex.TimeoutError, rex.BusyLoadingError, OSError) as exc:
            self._rediscover()
            raise StoreUnavailable(f"Redis is unavailable: {exc}") from exc
        except CLUSTER_CONDITIONS as exc:
            # A failover or a slot moving under way, a slot no node serves, a node that
            # was demoted: the client reads the topology again; the caller may retry.
            self._rediscover()
            raise StoreUnavailable(f"Redis Cluster cannot serve this now: {exc}") from exc
        except rex.ResponseError as exc:
            if UNAVAILABLE_CODES.search(str(exc)):
                self._rediscover()
                raise StoreUnavailable(f"Redis cannot serve writes: {exc}") from exc
            raise
        except Exception as exc:
            # A Redis error not handled above is a bug (a script error): it stays itself.
            if isinstance(exc, rex.RedisError) or not client_fault(exc):
                raise
            self._rediscover()
            log.warning("the Redis client failed under a command (%r)", exc, exc_info=True)
            raise StoreUnavailable(f"Redis is unavailable (client: {exc!r})") from exc

    # ------------------------------------------------------------ acknowledged writes

    async def _script(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        """Run a write script; with ``replicas_ack``, wait for that many replicas."""
        if not self._replicas_ack:
            return await script(keys=keys, args=args)
        head = ("EVALSHA", script.sha, len(keys), *keys, *args)
        try:
            return await self._acknowledged(keys[0], head)
        except rex.NoScriptError:
            # Not run (a node that never saw the script): send it whole this once.
            return await self._acknowledged(keys[0], ("EVAL", script.script, *head[2:]))

    async def _write(self, key: str, *command: Any) -> Any:
        """Run one write command; with ``replicas_ack``, wait for that many replicas."""
        if not self._replicas_ack:
            return await self._redis.execute_command(*command)
        return await self._acknowledged(key, command)

    async def _acknowledged(self, key: str, command: tuple[Any, ...]) -> Any:
        """``command`` then ``WAIT replicas_ack timeout`` on one connection to the node
        that owns ``key``'s slot: WAIT counts the replicas that acknowledged every write
        of its own connection. Fewer than asked: StoreUnavailable, outcome unknown."""
        wait = ("WAIT", self._replicas_ack, self._replicas_ack_ms)
        reply, acks = await self._on_owner(key, command, wait)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(acks, Exception):
            raise acks
        if int(acks) < self._replicas_ack:
            raise StoreUnavailable(
                f"The write reached {int(acks)} of the {self._replicas_ack} replica(s) "
                f"replicas_ack asks for within {self._replicas_ack_ms} ms: outcome unknown "
                "(a failover now may lose it). Retrying with the same seq is safe."
            )
        return reply

    async def _on_owner(self, key: str, *commands: tuple[Any, ...]) -> list[Any]:
        """Replies (or errors) of ``commands``, sent in order on one connection to the
        node that owns ``key``'s slot (on a single Redis, one pooled connection)."""
        if not self._cluster:
            async with self._redis.pipeline(transaction=False) as pipe:
                for command in commands:
                    pipe.execute_command(*command)
                return list(await pipe.execute(raise_on_error=False))
        if self._redis._initialize:
            await self._redis.initialize()
        node = self._redis.get_node_from_key(key)
        queued = [PipelineCommand(i, *command) for i, command in enumerate(commands)]
        try:
            await node.execute_pipeline(queued)
        except (rex.ConnectionError, rex.TimeoutError, OSError):
            self._rediscover()
            raise
        return [c.result for c in queued]

    # ------------------------------------------------------------ life cycle

    async def open(self) -> None:
        try:
            await self.migrate_legacy_index()
        except StoreUnavailable as exc:
            # Not fatal: the first create or listing tries again.
            log.warning("streams of release 0.1.0 not indexed yet (%s); retried on first use", exc)

    async def migrate_legacy_index(self) -> int:
        """Move the streams that release 0.1.0 listed in ``<prefix>:streams`` into their
        tenants' indexes; how many.

        Runs once per process: a start costs one SCARD once the set is empty. An id
        whose stream is gone is only removed. Nothing writes that set any more.
        """
        if self._migrated:
            return 0
        legacy = legacy_index_key(self._prefix)
        moved = 0
        while True:
            # A batch at a time, each within its own store_timeout: thousands of old
            # streams take a few round trips per 500, and each batch done stays done.
            async with self._guard():
                members: Any = await self._redis.srandmember(legacy, 500)
                if not members:
                    break
                ids = sorted(m.decode() for m in members)
                async with self._redis.pipeline(transaction=False) as pipe:
                    for sid in ids:
                        pipe.hget(stream_keys(self._prefix, sid).meta, "info")
                    infos = await pipe.execute()
                async with self._redis.pipeline(transaction=False) as pipe:
                    for sid, info in zip(ids, infos, strict=True):
                        if info is not None:
                            tenant = json.loads(info).get("tenant")
                            pipe.zadd(tenant_index_key(self._prefix, tenant), {sid: 0}, nx=True)
                            moved += 1
                        pipe.srem(legacy, sid)
                    await pipe.execute()
        self._migrated = True
        if moved:
            log.info("indexed %d stream(s) of release 0.1.0 by tenant", moved)
        return moved

    async def close(self) -> None:
        for task in list(self._adding):
            with suppress(Exception):
                await task
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
        """Whether the store answers within ``store_timeout`` and takes writes.

        A single Redis must be a master (``ROLE``: a replica refuses writes). On a
        cluster every master the client knows must answer ``ROLE`` as a master and
        see the cluster ``ok`` (``CLUSTER INFO``: every slot served); otherwise, or
        when a node does not answer, the client reads the topology again and asks
        once more. All of it within one ``store_timeout``.

        After an OOM refusal the process is not ready until a write succeeds, Redis
        has room again (``INFO memory``: see :func:`_has_room`), or FULL_HOLD seconds
        pass without another refusal (then writes are tried again).
        """
        deadline = asyncio.get_running_loop().time() + self._timeout
        why = await self._why_not(deadline, self._not_writable)
        if why is not None and self._cluster:
            # The topology the client read before a failover names a master that is
            # gone or demoted: read it again and ask once more, within the same time.
            self._rediscover()
            why = await self._why_not(deadline, self._not_writable)
        if why is not None:
            self._rediscover()
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
            return self._timed_out()
        except (StoreUnavailable, rex.RedisError, rex.RedisClusterException, OSError) as exc:
            return str(exc)

    async def _no_room(self) -> str | None:
        """Out of memory, within FULL_HOLD seconds of a refusal; None otherwise (and the
        refusal is forgotten)."""
        full_at = self._full_at
        if full_at is not None and time.monotonic() - full_at < FULL_HOLD:
            info: Any = await self._redis.info("memory")
            if self._cluster:
                if not all(_has_room(i) for i in info.values() if isinstance(i, dict)):
                    return "a node is out of memory"
            elif not _has_room(info):
                return "Redis is out of memory"
        self._full_at = None
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

    async def _not_writable(self) -> str | None:
        """Why the store cannot take writes now; None when it can."""
        if not self._cluster:
            if _is_master(await self._redis.execute_command("ROLE")):
                return None
            return "Redis is a replica (ROLE)"
        if self._redis._initialize:
            await self._redis.initialize()
        for node in self._redis.get_primaries():
            if not _is_master(await node.execute_command("ROLE")):
                return f"{node.name}, a master of the client's topology, is not one (ROLE)"
            info: Any = await node.execute_command("CLUSTER", "INFO")
            text = info.decode() if isinstance(info, bytes) else str(info)
            if "cluster_state:ok" not in text:
                return f"{node.name} does not see the cluster ok (CLUSTER INFO)"
        return None

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
        await self.migrate_legacy_index()
        async with self._guard():
            # Three steps, each on one slot (the tenant's index and the stream live on
            # different slots of a cluster): reserve the id in the tenant's index, the
            # quota counted in the same script; create the stream; mark the entry done.
            # A listing tolerates an index entry whose stream is missing, never the
            # reverse; an interrupted create leaves a reservation that a retry completes
            # or that is dropped once old (see _drop_stale_reservations).
            reserved_at = time.time()
            if not await self._reserve_id(owned, stream_id, quota, reserved_at):
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
        self._full_at = None
        if not created:
            raise StreamExists(stream_id)

    async def _reserve_id(self, owned: str, stream_id: str, quota: int | None, now: float) -> bool:
        """Reserve ``stream_id`` in the tenant's index unless it is full (see RESERVE_LUA)."""
        limit = quota if quota is not None else 2**53
        for attempt in range(2):
            if await self._reserve(keys=[owned], args=[stream_id, limit, now]):
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
        """Commit a write as one compare-and-set (``COMMIT_LUA``).

        A feature stream's names are unique: a write's new names are looked up in
        this process's copy of the stream's names log, read up to date first
        (``_names_of``); the script appends them to the log as one entry, only if
        the log still ends where the copy does (else -4: read again, look up again).
        Redis does no work per name, and no command holds it longer than a copy of
        the request's names takes. See ``store/names.py``.
        """
        k = stream_keys(self._prefix, stream_id)
        names = list(commit.names) if commit.state_changed else []
        if not names:
            result, _ = await self._commit_script(stream_id, k, commit)
            return result
        copy = self._names.get(stream_id, commit.incarnation)
        await copy.lock.acquire()
        handed = False  # the lock handed to the task that adds the names to the copy
        try:
            for _ in range(3):
                looked = await self._names_of(stream_id, k, commit, copy)
                if looked is None:
                    # This commit is recorded (a retried call): its names are its own.
                    result, _ = await self._commit_script(stream_id, k, commit)
                    return result
                known, groups = looked
                result, appended = await self._commit_script(stream_id, k, commit, known)
                if result != -4:
                    break
                # The log moved under the copy (a failover lost commits?): read it anew.
                self._names.garbage.append(copy.reset())
            else:
                raise ConcurrentUpdate(stream_id, commit.expected_version)
            if appended and (copy.chunks, copy.head) == known:
                if len(names) > INLINE_NAMES:
                    # Committed: the answer need not wait for the copy, only the next
                    # write of this stream in this process does (it takes the lock).
                    task = asyncio.get_running_loop().create_task(
                        self._add_names(copy, groups, commit.commit_id)
                    )
                    self._adding.add(task)
                    task.add_done_callback(self._adding.discard)
                    handed = True
                else:
                    copy.add(groups, commit.commit_id)
        finally:
            if not handed:
                copy.lock.release()
            # Refused or failed too: the copy may have grown, or been read anew.
            self._names.trim()
            self._free_names()
        return result

    async def _add_names(self, copy: StreamNames, groups: list[list[str]], commit_id: str) -> None:
        """The names of a commit into ``copy``, in a thread; then the copy's lock is free."""
        try:
            await asyncio.to_thread(copy.add, groups, commit_id)
        finally:
            copy.lock.release()

    def _free_names(self) -> None:
        """Free the names of the copies dropped, in a thread when they are many (not
        awaited: nothing waits for memory to be freed)."""
        garbage = self._names.take_garbage()
        if sum(map(len, garbage)) > INLINE_NAMES:
            asyncio.get_running_loop().run_in_executor(None, _free, garbage)
        else:
            _free(garbage)

    async def _commit_script(
        self, stream_id: str, k: StreamKeys, commit: Commit, known: tuple[int, str] = (0, "")
    ) -> tuple[int, bool]:
        """The commit script's (result, whether the names were appended to the log);
        ``known``: where the names log ended when the names were looked up."""
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
        args += [known[0], known[1]]
        async with self._guard():
            reply: Any = await self._script(self._commit, list(k.all()), args)
        result, appended = int(reply[0]), bool(int(reply[1]))
        if result >= 0:
            self._full_at = None  # a write went through: Redis has room
        if result == -2:
            raise StreamNotFound(stream_id)
        if result == -1:
            raise ConcurrentUpdate(stream_id, commit.expected_version)
        return result, appended

    async def _names_of(
        self, stream_id: str, k: StreamKeys, commit: Commit, copy: StreamNames
    ) -> tuple[tuple[int, str], list[list[str]]] | None:
        """Bring ``copy`` up to the end of the stream's names log and refuse the names of
        ``commit`` already in it (DuplicateNames); where the log ends (entries, last id),
        and the names grouped for ``copy.add``.

        Only on top of the version the commit expects (else ConcurrentUpdate, as the
        script would answer: the engine reloads and applies the write again); None
        when the commit is already recorded (a retried call).
        """
        while True:
            async with self._guard():
                reply: Any = await self._names_since(
                    keys=[k.meta, k.names_ids, k.names_log],
                    args=[copy.chunks, copy.head, NAMES_ENTRIES],
                )
            head = tuple(None if v is None else bytes(v).decode() for v in reply[:3])
            if head[2] == commit.commit_id:
                return None
            self._expect(stream_id, commit, head)
            total, start = int(reply[3]), int(reply[4])
            if start < 0:
                # Not the log's first entries any more: read it from the start.
                self._names.garbage.append(copy.reset())
                continue
            if not copy.legacy_read:
                await self._legacy_names(k, copy)
            ids, entries = reply[5], reply[6]
            if entries:
                size = sum(len(e) for e in entries) // 8
                await _off_loop(size, copy.take, ids, entries)
            if copy.chunks >= total:
                break
        names = list(commit.names)
        dups, groups = await _off_loop(len(names), copy.check, names)
        if dups:
            raise DuplicateNames(stream_id, dups)
        return (copy.chunks, copy.head), groups

    async def _legacy_names(self, k: StreamKeys, copy: StreamNames) -> None:
        """Into ``copy``: the names releases before the log kept (a set, and the names
        of a commit a process of such a release left pending), read once per copy."""
        async with self._guard():
            mark = await self._redis.hget(k.meta, "names_pending")
            pending = None if mark is None else await self._redis.get(k.names_pending)
        if pending is not None:
            copy.seen.update(split(pending))
        cursor: Any = 0
        while True:
            async with self._guard():
                cursor, members = await self._redis.sscan(k.names, cursor, count=LEGACY_NAMES_PIECE)
            copy.seen.update(bytes(m).decode() for m in members)
            if int(cursor) == 0:
                break
        copy.legacy_read = True

    @staticmethod
    def _expect(stream_id: str, commit: Commit, head: tuple[str | None, ...]) -> None:
        """StreamNotFound or ConcurrentUpdate unless the stream is where ``commit`` expects."""
        version, incarnation, last = head[0], head[1], head[2] or ""
        if version is None:
            raise StreamNotFound(stream_id)
        if (
            incarnation != commit.incarnation
            or int(version) != commit.expected_version
            or last != commit.expected_commit
        ):
            raise ConcurrentUpdate(stream_id, commit.expected_version)

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
            if value is not None and self._replicas_ack:
                # The write it answers may never have reached a replica (its first try got
                # 503): a write behind it that replicas acknowledge carries it with it, as
                # replication keeps the order of the master's writes.
                await self._acknowledged(k.barrier, ("SET", k.barrier, b"", "PX", 60_000))
        return None if value is None else bytes(value)

    async def list_streams(self, tenant: str | None = None) -> list[StreamSummary]:
        await self.migrate_legacy_index()
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
            self._names.drop(stream_id)
            self._free_names()
            if info is not None:
                tenant = json.loads(info).get("tenant")
                index = tenant_index_key(self._prefix, tenant)
                await self._redis.zrem(index, stream_id)
                # A create of the same id may have run between the DEL and the ZREM:
                # its stream exists and must stay listed (and counted against the quota).
                if await self._redis.exists(k.meta):
                    await self._redis.zadd(index, {stream_id: 0}, nx=True)
        return info is not None


def _free(garbage: list[NameSet]) -> None:
    for names in garbage:
        names.free()


async def _off_loop(size: int, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``: in a thread when it handles more than INLINE_NAMES names."""
    if size > INLINE_NAMES:
        return await asyncio.to_thread(fn, *args)
    return fn(*args)


def _is_master(role: Any) -> bool:
    """Whether a ``ROLE`` reply is a master's."""
    if not role:
        return False
    first = role[0]
    return (first.decode() if isinstance(first, bytes) else str(first)) == "master"


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


__all__ = [
    "COMMIT_LUA",
    "CREATE_LUA",
    "RESERVE_LUA",
    "PubSubHub",
    "RedisStore",
]
