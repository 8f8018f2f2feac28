"""The store's Redis client, from the settings: one Redis or a Redis Cluster."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis import exceptions as rex
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from featurestream.config import Settings, parse_cluster_url


def connect(settings: Settings) -> Any:
    """A client of the Redis (or Redis Cluster) of ``settings.store_url``."""
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
    if settings.store_cluster:
        target = parse_cluster_url(settings.store_url)
        return RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in target.nodes],
            username=target.username,
            password=target.password,
            ssl=target.ssl,
            # A failover or a slot moving is retried by the client once the
            # topology is read again; what is left over is a 503 (store_timeout).
            **common,
        )
    return aioredis.Redis.from_url(
        settings.store_url, retry_on_error=[rex.ConnectionError, rex.TimeoutError], **common
    )
