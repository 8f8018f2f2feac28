"""Whether Redis takes writes now: what ``/readyz`` asks the store."""

from __future__ import annotations

from typing import Any

# The share of maxmemory below which Redis has room again.
ROOM = 0.9


async def not_writable(client: Any, cluster: bool) -> str | None:
    """Why the store cannot take writes now; None when it can.

    A single Redis must be a master (``ROLE``: a replica refuses writes). On a
    cluster every master the client knows must answer ``ROLE`` as a master and
    see the cluster ``ok`` (``CLUSTER INFO``: every slot served).
    """
    if not cluster:
        if is_master(await client.execute_command("ROLE")):
            return None
        return "Redis is a replica (ROLE)"
    if client._initialize:
        await client.initialize()
    for node in client.get_primaries():
        if not is_master(await node.execute_command("ROLE")):
            return f"{node.name}, a master of the client's topology, is not one (ROLE)"
        info: Any = await node.execute_command("CLUSTER", "INFO")
        text = info.decode() if isinstance(info, bytes) else str(info)
        if "cluster_state:ok" not in text:
            return f"{node.name} does not see the cluster ok (CLUSTER INFO)"
    return None


async def out_of_memory(client: Any, cluster: bool) -> str | None:
    """Why Redis has no room for writes (``INFO memory``, :func:`has_room`); None when
    it has."""
    info: Any = await client.info("memory")
    if cluster:
        if not all(has_room(i) for i in info.values() if isinstance(i, dict)):
            return "a node is out of memory"
    elif not has_room(info):
        return "Redis is out of memory"
    return None


def is_master(role: Any) -> bool:
    """Whether a ``ROLE`` reply is a master's."""
    if not role:
        return False
    first = role[0]
    return (first.decode() if isinstance(first, bytes) else str(first)) == "master"


def has_room(info: dict[str, Any]) -> bool:
    """Whether Redis has room for writes (``INFO memory``): the memory it counts against
    ``maxmemory`` (used, less what it does not count for eviction) is below
    ROOM x maxmemory (0: no limit). Redis refuses a write when it is over maxmemory as
    the write arrives, its own bytes included: a commit carries a whole state, so
    memory just below the limit is not room."""
    limit = int(info.get("maxmemory", 0))
    used = int(info.get("used_memory", 0)) - int(info.get("mem_not_counted_for_evict", 0))
    return limit == 0 or used < ROOM * limit
