"""Every Redis key name featurestream uses, built here and nowhere else.

All keys of one stream share the hash tag ``{<id>}``, so Redis Cluster keeps a
stream on one slot and the multi-key commit script (and its SPUBLISH, whose
shard channel carries the tag too) is legal there. The only other key written
is each tenant's index of streams: one key per tenant, written by single-key
commands or scripts, never in the same command as a stream's keys; it
tolerates entries whose stream is gone. There is no key shared by every
tenant (the set of every stream of release 0.1.0 is only read, and emptied,
when a process starts: see ``legacy_index_key``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StreamKeys:
    meta: str
    state: str
    events: str
    producers: str
    responses: str
    # Releases before the names log kept a stream's names in a set (``names``), the
    # names of its last commit in ``names_pending`` while they were added to it: still
    # read (store/names.py), no longer written.
    names: str
    replays: str  # the stored responses' fields, oldest first (a sorted set)
    names_pending: str
    # The names log (a list, an entry per commit with new names, joined by newlines)
    # and the ids of those commits (a list, in step): see store/names.py.
    names_log: str
    names_ids: str
    channel: str
    # Written (and expiring) only to make a replayed answer wait for the replicas: see
    # RedisStore.stored_response. Not one of the keys the scripts take.
    barrier: str

    def all(self) -> tuple[str, ...]:
        """Every key of the stream (the commit script takes them in this order)."""
        return (
            self.meta,
            self.state,
            self.events,
            self.producers,
            self.responses,
            self.names,
            self.replays,
            self.names_pending,
            self.names_log,
            self.names_ids,
        )


def stream_keys(prefix: str, stream_id: str) -> StreamKeys:
    """Keys of one stream: ``<prefix>:{<id>}:<part>``.

    >>> stream_keys("fs", "churn").state
    'fs:{churn}:state'
    """
    base = f"{prefix}:{{{stream_id}}}"
    return StreamKeys(
        meta=f"{base}:meta",
        state=f"{base}:state",
        events=f"{base}:events",
        producers=f"{base}:producers",
        responses=f"{base}:responses",
        names=f"{base}:names",
        replays=f"{base}:replays",
        names_pending=f"{base}:names-pending",
        names_log=f"{base}:names-log",
        names_ids=f"{base}:names-ids",
        channel=f"{base}:selection",
        barrier=f"{base}:barrier",
    )


def legacy_index_key(prefix: str) -> str:
    """The set of every stream id that release 0.1.0 kept (nothing writes it any more).

    A process moves the streams still listed there into their tenants' indexes
    when it starts, and removes them from it.

    >>> legacy_index_key("fs")
    'fs:streams'
    """
    return f"{prefix}:streams"


def tenant_index_key(prefix: str, tenant: str | None) -> str:
    """The sorted set of a tenant's stream ids (None: the streams created without one).

    A member's score is 0 once its stream is created, and the time it was
    reserved (Unix seconds) while its create is under way; its cardinality is
    what the per-tenant stream quota counts.

    >>> tenant_index_key("fs", "acme"), tenant_index_key("fs", None)
    ('fs:streams:tenant:acme', 'fs:streams:untenanted')
    """
    return f"{prefix}:streams:untenanted" if tenant is None else f"{prefix}:streams:tenant:{tenant}"


def response_field(producer: str, seq: int) -> str:
    """Field of the responses hash holding the stored response of (producer, seq)."""
    return f"{producer}\n{seq}"


__all__ = [
    "StreamKeys",
    "legacy_index_key",
    "response_field",
    "stream_keys",
    "tenant_index_key",
]
