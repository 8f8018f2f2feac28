"""Acknowledged writes: with ``replicas_ack`` N > 0, every create, commit and delete
is followed by ``WAIT N timeout`` on the same connection (to the master of the
stream's slot); fewer acknowledgements are a StoreUnavailable whose outcome is
unknown (the engine then drops its copy of the stream)."""

from __future__ import annotations

from typing import Any

from redis import exceptions as rex
from redis.asyncio.cluster import PipelineCommand, RedisCluster

from featurestream.errors import StoreUnavailable
from featurestream.store.redis.faults import rediscover


class Writes:
    """The write commands and scripts of one store, acknowledged as it asks."""

    def __init__(self, client: Any, replicas_ack: int, replicas_ack_timeout: float) -> None:
        self._redis = client
        self._cluster = isinstance(client, RedisCluster)
        self._replicas_ack = replicas_ack
        self._replicas_ack_ms = max(1, round(replicas_ack_timeout * 1000))

    @property
    def acknowledged_by(self) -> int:
        """How many replicas must acknowledge a write (0: none)."""
        return self._replicas_ack

    async def script(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        """Run a write script; with ``replicas_ack``, wait for that many replicas."""
        if not self._replicas_ack:
            return await script(keys=keys, args=args)
        head = ("EVALSHA", script.sha, len(keys), *keys, *args)
        try:
            return await self.acknowledged(keys[0], head)
        except rex.NoScriptError:
            # Not run (a node that never saw the script): send it whole this once.
            return await self.acknowledged(keys[0], ("EVAL", script.script, *head[2:]))

    async def command(self, key: str, *command: Any) -> Any:
        """Run one write command; with ``replicas_ack``, wait for that many replicas."""
        if not self._replicas_ack:
            return await self._redis.execute_command(*command)
        return await self.acknowledged(key, command)

    async def acknowledged(self, key: str, command: tuple[Any, ...]) -> Any:
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
            rediscover(self._redis)
            raise
        return [c.result for c in queued]
