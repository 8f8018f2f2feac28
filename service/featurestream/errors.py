"""The whole featurestream exception hierarchy.

Every error carries structured fields and subclasses the builtin it refines,
so ``except ValueError`` keeps working for callers of the core. The HTTP layer
maps each class to a status and an RFC 9457 problem type (``api/problems.py``).
"""

from __future__ import annotations

from typing import Any


def _rebuilt(cls: type[FeatureStreamError], args: tuple[Any, ...], attrs: dict[str, Any]) -> Any:
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(attrs)
    return exc


class FeatureStreamError(Exception):
    """Base class of every error featurestream raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as its attributes (from a compute worker): a subclass's constructor
        # takes other arguments than ``args``.
        return (_rebuilt, (type(self), self.args, self.__dict__))

    def fields(self) -> dict[str, Any]:
        """Structured extension members for a problem document."""
        return {}


class InvalidParameter(FeatureStreamError, ValueError):
    """A selector parameter is unknown or out of its allowed range."""

    def __init__(self, message: str, *, parameter: str) -> None:
        super().__init__(message)
        self.parameter = parameter

    def fields(self) -> dict[str, Any]:
        return {"errors": [{"field": f"params.{self.parameter}", "message": self.message}]}


class InvalidInput(FeatureStreamError, ValueError):
    """Input data is malformed: wrong length, NaN/Inf, bad labels, duplicate names..."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

    def fields(self) -> dict[str, Any]:
        if self.field is None:
            return {}
        return {"errors": [{"field": self.field, "message": self.message}]}


class DuplicateNames(InvalidInput):
    """New feature names that the stream has already seen (checked when committing)."""

    def __init__(self, stream_id: str, names: list[str]) -> None:
        shown = ", ".join(repr(n) for n in names)
        super().__init__(f"Feature name(s) already in the stream: {shown}.", field="features")
        self.stream_id = stream_id
        self.names = names


class WrongStreamKind(FeatureStreamError, TypeError):
    """The request does not fit the stream's kind (features vs instances)."""

    def __init__(self, message: str, *, stream_id: str, kind: str) -> None:
        super().__init__(message)
        self.stream_id = stream_id
        self.kind = kind

    def fields(self) -> dict[str, Any]:
        return {"stream_id": self.stream_id, "kind": self.kind}

    @classmethod
    def for_request(cls, stream_id: str, kind: str, wanted: str) -> WrongStreamKind:
        """A request for ``wanted`` streams sent to a ``kind`` stream, with the call to use."""
        return cls(
            f"Stream {stream_id!r} is {KIND_PHRASE.get(kind, kind)}; this request is for "
            f"{wanted[:-1]} streams. {KIND_HINT.get(kind, '')}".rstrip(),
            stream_id=stream_id,
            kind=kind,
        )


#: A stream kind in a sentence: "an instance stream", "a feature stream".
KIND_PHRASE = {"features": "a feature stream", "instances": "an instance stream"}
#: The calls that feed a stream of each kind.
KIND_HINT = {
    "features": "Send it feature columns: POST /v1/streams/ID/features (or /groups); "
    "SDK: Stream.add_features or add_groups.",
    "instances": "Send it rows: POST /v1/streams/ID/instances or its WebSocket; "
    "SDK: Stream.add_instances or stream_instances.",
}


class StreamNotFound(FeatureStreamError, LookupError):
    """No stream with this id exists."""

    def __init__(self, stream_id: str) -> None:
        super().__init__(f"Stream {stream_id!r} does not exist.")
        self.stream_id = stream_id

    def fields(self) -> dict[str, Any]:
        return {"stream_id": self.stream_id}


class VersionNotFound(FeatureStreamError, LookupError):
    """A version the stream has not reached (yet)."""

    def __init__(self, stream_id: str, version: int, current: int) -> None:
        super().__init__(
            f"Stream {stream_id!r} is at version {current}; version {version} does not exist."
        )
        self.stream_id = stream_id
        self.version = version
        self.current = current

    def fields(self) -> dict[str, Any]:
        return {"stream_id": self.stream_id, "current_version": self.current}


class EvaluationUnavailable(FeatureStreamError):
    """The stream's selection cannot be evaluated (its selector keeps nothing to score)."""

    def __init__(self, message: str, *, algorithm: str) -> None:
        super().__init__(message)
        self.algorithm = algorithm

    def fields(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm}


class StreamExists(FeatureStreamError):
    """A stream with this id already exists."""

    def __init__(self, stream_id: str) -> None:
        super().__init__(f"Stream {stream_id!r} already exists.")
        self.stream_id = stream_id

    def fields(self) -> dict[str, Any]:
        return {"stream_id": self.stream_id}


class SequenceConflict(FeatureStreamError):
    """A producer's ``seq`` is out of order (a gap, or older than the replay window)."""

    def __init__(self, message: str, *, producer: str, expected_seq: int) -> None:
        super().__init__(message)
        self.producer = producer
        self.expected_seq = expected_seq

    def fields(self) -> dict[str, Any]:
        return {"producer": self.producer, "expected_seq": self.expected_seq}


class SeqReused(SequenceConflict):
    """A producer's ``seq`` was already applied with other content: this write was not."""


class ConcurrentUpdate(FeatureStreamError):
    """Another writer committed first; the operation may be retried."""

    def __init__(self, stream_id: str, expected_version: int) -> None:
        super().__init__(
            f"Stream {stream_id!r} changed while this update was applied "
            f"(expected version {expected_version}); retry the request."
        )
        self.stream_id = stream_id
        self.expected_version = expected_version

    def fields(self) -> dict[str, Any]:
        return {"stream_id": self.stream_id, "retryable": True}


class PayloadTooLarge(FeatureStreamError):
    """The request body exceeds the configured limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"The request body exceeds the limit of {limit} bytes.")
        self.limit = limit

    def fields(self) -> dict[str, Any]:
        return {"limit_bytes": self.limit}


class UnsupportedMediaType(FeatureStreamError):
    """The request body's content type is not one the endpoint reads."""

    def __init__(self, media_type: str, supported: tuple[str, ...]) -> None:
        said = f"Unsupported content type {media_type!r}" if media_type else "No Content-Type"
        super().__init__(f"{said}; send one of {', '.join(supported)}.")
        self.media_type = media_type
        self.supported = supported

    def fields(self) -> dict[str, Any]:
        return {"supported": list(self.supported)}


class Unauthorized(FeatureStreamError):
    """API keys are configured and the request has no valid one."""

    def __init__(
        self, message: str = "A valid API key is required: Authorization: Bearer <key>."
    ) -> None:
        super().__init__(message)


class LimitExceeded(FeatureStreamError):
    """A request goes beyond a configured limit (columns, instances, streams...)."""

    def __init__(self, message: str, *, limit: str, maximum: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.maximum = maximum

    def fields(self) -> dict[str, Any]:
        return {"limit": self.limit, "maximum": self.maximum}


class RequestTooExpensive(FeatureStreamError):
    """A request's work went beyond the time budget (``request_time_budget``): nothing applied.

    ``completed`` is how many of its items (feature columns or instances) the
    selector got through within the budget: a request of that many, or fewer,
    should fit.
    """

    def __init__(self, *, budget: float, completed: int, total: int, unit: str) -> None:
        super().__init__(
            f"This request's work took longer than the server's time budget of {budget:g} s "
            f"(request_time_budget) and nothing of it was applied: {completed} of its {total} "
            f"{unit} were done within the budget. Split it into smaller requests."
        )
        self.budget = budget
        self.completed = completed
        self.total = total
        self.unit = unit

    def fields(self) -> dict[str, Any]:
        return {
            "completed": self.completed,
            "total": self.total,
            "unit": self.unit,
            "budget_seconds": self.budget,
        }


class QuotaExceeded(LimitExceeded):
    """A tenant has as many streams as it may have."""


class RequestTimeout(FeatureStreamError):
    """The client did not send its body in time."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"The request body did not arrive within {seconds:g} s.")
        self.seconds = seconds


class NumericallyUnstable(FeatureStreamError, ArithmeticError):
    """The data would take a stream's state beyond what float64 holds (an overflow, NaN).

    Such a state is never committed, and a state of that kind found in the store is
    never computed on: the request is refused and nothing changes.
    """

    def __init__(self, message: str, *, stream_id: str | None = None) -> None:
        super().__init__(message)
        self.stream_id = stream_id

    def fields(self) -> dict[str, Any]:
        return {} if self.stream_id is None else {"stream_id": self.stream_id}


class Unavailable(FeatureStreamError):
    """A part of the service the operation needs does not answer now; retry it later (503).

    For a write the outcome is unknown to the caller: a retry with the same seq is safe.
    """

    def fields(self) -> dict[str, Any]:
        return {"retryable": True}


class StoreUnavailable(Unavailable):
    """The state store cannot be reached; the operation may be retried later."""

    def __init__(self, message: str = "The state store is unavailable.") -> None:
        super().__init__(message)


class ComputeUnavailable(Unavailable):
    """The compute worker that applied a write stopped before answering; nothing was
    committed (``engine/compute.py``)."""


class HistoryTrimmed(FeatureStreamError):
    """Events asked for are older than the event log keeps (``event_retention``)."""

    def __init__(
        self, stream_id: str, after: str, oldest: int, *, message: str | None = None
    ) -> None:
        super().__init__(
            message
            or f"The events of stream {stream_id!r} after {after!r} are no longer kept: its log "
            f"keeps the last commits only, from version {oldest}. Read again without "
            "'after' to start from the oldest event kept."
        )
        self.stream_id = stream_id
        self.oldest_version = oldest

    def fields(self) -> dict[str, Any]:
        return {"stream_id": self.stream_id, "oldest_version": self.oldest_version}


class StoreFull(StoreUnavailable):
    """The store refuses writes: Redis is at ``maxmemory`` (noeviction)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


__all__ = [
    "ComputeUnavailable",
    "ConcurrentUpdate",
    "DuplicateNames",
    "EvaluationUnavailable",
    "FeatureStreamError",
    "HistoryTrimmed",
    "InvalidInput",
    "InvalidParameter",
    "LimitExceeded",
    "NumericallyUnstable",
    "PayloadTooLarge",
    "QuotaExceeded",
    "RequestTimeout",
    "RequestTooExpensive",
    "SeqReused",
    "SequenceConflict",
    "StoreFull",
    "StoreUnavailable",
    "StreamExists",
    "StreamNotFound",
    "Unauthorized",
    "Unavailable",
    "UnsupportedMediaType",
    "VersionNotFound",
    "WrongStreamKind",
]
