"""Every cluster condition redis-py reports is StoreUnavailable (503, WebSocket 1013).

The live cluster tests (tests/deploy/test_redis_cluster.py,
tests/faults/test_cluster_failover.py) meet these conditions in a real
failover; here each kind is raised inside the store's guard, so none of them
can slip through as a 500.
"""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
from redis import exceptions as rex

from featurestream.errors import StoreUnavailable
from featurestream.store.redis import RedisStore

pytestmark = pytest.mark.anyio

CONDITIONS = [
    rex.MovedError("3999 127.0.0.1:6381"),
    rex.AskError("3999 127.0.0.1:6381"),
    rex.TryAgainError("Multiple keys request during rehashing of slot"),
    rex.ClusterDownError("The cluster is down"),
    rex.MasterDownError("Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
    rex.SlotNotCoveredError('Slot "3999" is not covered by the cluster.'),
    rex.ReadOnlyError("You can't write against a read only replica."),
    rex.RedisClusterException(
        "Redis Cluster cannot be connected. Please provide at least one reachable node"
    ),
    rex.ResponseError("NOREPLICAS Not enough good replicas to write."),
    rex.ResponseError(
        "Command # 1 (EVALSHA x) of pipeline caused error: CLUSTERDOWN Hash slot not served"
    ),
    # Not cluster conditions, but Redis refusing writes for now: the same answer.
    rex.ResponseError(
        "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to "
        "persist to disk."
    ),
    rex.ResponseError("BUSY Redis is busy running a script."),
    rex.ConnectionError("Error 111 connecting to 127.0.0.1:6381. Connection refused."),
    rex.TimeoutError("Timeout reading from 127.0.0.1:6381"),
]


@pytest.mark.parametrize("condition", CONDITIONS, ids=lambda e: type(e).__name__)
async def test_a_cluster_condition_is_store_unavailable(condition: Exception) -> None:
    client = aioredis.Redis.from_url("redis://127.0.0.1:1/0")
    store = RedisStore(client)
    try:
        with pytest.raises(StoreUnavailable):
            async with store._guard():
                raise condition
    finally:
        await client.aclose()


async def test_other_errors_are_not_hidden() -> None:
    client = aioredis.Redis.from_url("redis://127.0.0.1:1/0")
    store = RedisStore(client)
    try:
        # A bug (a script error, a CROSSSLOT the code should never cause) stays an error.
        for error in (
            rex.ResponseError("ERR Error running script: TASK failed"),
            rex.ClusterCrossSlotError("Keys in request don't hash to the same slot"),
        ):
            with pytest.raises(type(error)):
                async with store._guard():
                    raise error
    finally:
        await client.aclose()
