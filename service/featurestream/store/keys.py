"""Every Redis key name featurestream uses, built here and nowhere else.

All keys of one stream share the hash tag ``{<id>}``, so Redis Cluster keeps a
stream on one slot and the multi-key commit script is legal there. The
indexes (every stream; the streams of each tenant; the streams indexed by
tenant) are the only keys outside a stream's slot; each is written by
single-key commands or scripts, and tolerates entries whose stream is gone.
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
    names: str
    replays: str  # the stored responses' fields, oldest first (a sorted set)
    channel: str

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
        channel=f"{base}:selection",
    )


def index_key(prefix: str) -> str:
    """The set of stream ids (listing only; not part of any stream's slot)."""
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


def indexed_key(prefix: str) -> str:
    """The set of stream ids already in their tenant's index (the rest are indexed at start).

    Its hash tag is the name of the global index, so Redis Cluster keeps both on
    one slot and can compare them in one command.

    >>> indexed_key("fs")
    '{fs:streams}:indexed'
    """
    return f"{{{index_key(prefix)}}}:indexed"


def response_field(producer: str, seq: int) -> str:
    """Field of the responses hash holding the stored response of (producer, seq)."""
    return f"{producer}\n{seq}"


__all__ = [
    "StreamKeys",
    "index_key",
    "indexed_key",
    "response_field",
    "stream_keys",
    "tenant_index_key",
]
