"""The Redis store, by job: the store (``store.py``), the commit of a write with its
check of new feature names (``commits.py``), the pub/sub hub of selection
notifications (``hub.py``), the Lua scripts (``*.lua``, ``scripts.py``), the map of
redis-py's errors to the store's (``faults.py``), acknowledged writes
(``writes.py``) and readiness (``health.py``)."""

from featurestream.store.redis.faults import client_fault, outage
from featurestream.store.redis.hub import PubSubHub
from featurestream.store.redis.store import RESERVATION_GRACE, RedisStore

__all__ = ["RESERVATION_GRACE", "PubSubHub", "RedisStore", "client_fault", "outage"]
