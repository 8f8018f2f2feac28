"""Every Redis key name featurestream uses, built here and nowhere else.

All keys of one stream share the hash tag ``{<id>}``, so Redis Cluster keeps a
stream on one slot and the multi-key commit script is legal there. The stream
index is the only key outside a stream's slot; it is written separately and
tolerates entries whose stream is gone.
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


def response_field(producer: str, seq: int) -> str:
    """Field of the responses hash holding the stored response of (producer, seq)."""
    return f"{producer}\n{seq}"


__all__ = ["StreamKeys", "index_key", "response_field", "stream_keys"]
