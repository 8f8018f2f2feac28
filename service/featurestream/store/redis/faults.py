"""What a failure of Redis or of redis-py means for a caller of the store.

One map from redis-py's exception types to the store's own errors
(:func:`store_error`): every cluster condition, every Redis that cannot take
writes for now, a connection lost or timed out is StoreUnavailable (a 503 the
client may retry); any other error stays itself (a bug: a 500 with its
traceback logged).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from redis import exceptions as rex
from redis.asyncio.cluster import RedisCluster

from featurestream.errors import StoreUnavailable

log = logging.getLogger("featurestream.store")

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
CONNECTION_ERRORS = (rex.ConnectionError, rex.TimeoutError, rex.BusyLoadingError, OSError)

# Where redis-py keeps its connections: its socket layer, reply parsers and the cluster
# client's node and slot caches. What fails there under a command is the connection.
CLIENT_CONNECTION_MODULES = ("redis.asyncio.connection", "redis._parsers", "redis.asyncio.cluster")
# What a connection closed under a command raises there (not a Redis error).
CLIENT_RACE_ERRORS = (AttributeError, RuntimeError, TypeError, KeyError, IndexError)


def client_fault(exc: BaseException) -> bool:
    """Whether ``exc`` is a Redis error, or a connection of redis-py failing under a
    command.

    redis-py's cluster client closes every node's connections when a topology
    refresh fails; a command of another task already past its connection check then
    finds its socket gone (``'NoneType' object has no attribute 'writelines'``, or
    the event loop's ``RuntimeError`` on a closed transport). redis-py raises no
    exception type of its own for that, so it is told by where it was raised: a
    frame of redis-py's connection layer. A call to redis-py with wrong arguments
    (refused before any connection is used) and the store's own errors stay
    themselves.
    """
    if isinstance(exc, (rex.RedisError, rex.RedisClusterException)):
        return True
    if not isinstance(exc, CLIENT_RACE_ERRORS):
        return False
    tb = exc.__traceback__
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).startswith(CLIENT_CONNECTION_MODULES):
            return True
        tb = tb.tb_next
    return False


def outage(exc: BaseException) -> bool:
    """Whether ``exc`` means Redis cannot be reached now: a Redis or socket error, a
    timeout, or a :func:`client_fault`."""
    return isinstance(exc, (OSError, TimeoutError)) or client_fault(exc)


def store_error(exc: BaseException) -> StoreUnavailable | None:
    """The StoreUnavailable that ``exc`` (raised by redis-py) stands for; None when it
    stays itself. Redis's refusal for want of memory is the caller's (StoreFull)."""
    if isinstance(exc, CONNECTION_ERRORS):
        return StoreUnavailable(f"Redis is unavailable: {exc}")
    if isinstance(exc, CLUSTER_CONDITIONS):
        # A failover or a slot moving under way, a slot no node serves, a node that was
        # demoted: the client reads the topology again; the caller may retry.
        return StoreUnavailable(f"Redis Cluster cannot serve this now: {exc}")
    if isinstance(exc, rex.ResponseError):
        if UNAVAILABLE_CODES.search(str(exc)):
            return StoreUnavailable(f"Redis cannot serve writes: {exc}")
        return None  # a script error: a bug
    if isinstance(exc, rex.RedisError) or not client_fault(exc):
        return None
    log.warning("the Redis client failed under a command (%r)", exc, exc_info=exc)
    return StoreUnavailable(f"Redis is unavailable (client: {exc!r})")


def timed_out(timeout: float) -> str:
    """What a call that ran past ``store_timeout`` answers."""
    return f"Redis did not answer within {timeout:g} s (store_timeout)."


def rediscover(client: Any) -> None:
    """Have a cluster client read the topology again before its next command."""
    if isinstance(client, RedisCluster):
        # redis-py's own flag: RedisCluster.initialize() runs again on the next call.
        client._initialize = True
