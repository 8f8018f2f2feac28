"""Every Redis key name featurestream uses, built here and nowhere else.

All keys of one stream share the hash tag ``{<id>}``, so Redis Cluster keeps a
stream on one slot and the multi-key commit script (and its SPUBLISH, whose
shard channel carries the tag too) is legal there. The only other key written
is each tenant's index of streams: one key per tenant, written by single-key
commands or scripts, never in the same command as a stream's keys; it
tolerates entries whose stream is gone. There is no key shared by every
tenant.
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
    replays: str  # the stored responses' fields, oldest first (a sorted set)
    # The names log (a list, an entry per commit with new names, joined by newlines)
    # and the ids of those commits (a list, in step): see store/names.py.
    names_log: str
    names_ids: str
    seen: str  # when each producer last wrote (a hash: producer -> ms)
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
            self.replays,
            self.names_log,
            self.names_ids,
            self.seen,
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
        replays=f"{base}:replays",
        names_log=f"{base}:names-log",
        names_ids=f"{base}:names-ids",
        seen=f"{base}:seen",
        channel=f"{base}:selection",
        barrier=f"{base}:barrier",
    )


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
    "response_field",
    "stream_keys",
    "tenant_index_key",
]
