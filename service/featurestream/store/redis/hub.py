"""Selection notifications: the pub/sub connections of one process, with recovery.

The commit script SPUBLISHes (Redis >= 7; PUBLISH before) on the stream's
shard channel. Each process keeps one pub/sub connection per node subscribed
to the channels its local listeners want, and fans messages out to them; after
a lost connection or a slot move it subscribes again on the new owner and
tells the channels' listeners to re-read (RESYNC), since messages sent while
it was away are lost.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from featurestream.errors import StoreUnavailable
from featurestream.store.base import RESYNC, Broadcaster, Subscription
from featurestream.store.redis.faults import outage, rediscover

log = logging.getLogger("featurestream.store")


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
                rediscover(self._client)  # re-read the slots before resolving owners
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
