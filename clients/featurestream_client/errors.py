"""Typed exceptions: one class per RFC 9457 problem ``type`` the server answers.

The server maps its errors to problem documents (``status``, ``type``,
``title``, ``detail`` and the error's own fields such as ``errors`` or
``expected_seq``). :func:`error_from_problem` maps such a document back to the
class named by the last segment of its ``type``, with every field attached, so
``except featurestream_client.SequenceConflict as e: e.expected_seq`` works.
Each class also subclasses the builtin it refines (``InvalidInput`` is a
``ValueError``, ``StreamNotFound`` a ``LookupError``), as on the server.
"""

from __future__ import annotations

from typing import Any


class FeatureStreamError(Exception):
    """Base class of every error the client raises on purpose.

    Attributes
    ----------
    status : int or None
        HTTP status of the answer (None for errors found by the client itself,
        before anything was sent).
    type : str or None
        The problem ``type`` URI, e.g. ``/problems/invalid-input``.
    title, detail : str or None
        The problem's title and explanation.
    errors : list of dict
        For validation errors, the offending fields (``field``, ``message``).
    problem : dict
        The whole problem document as received (empty for client-side errors).
    retryable : bool
        Whether the same request may succeed later (the client retries these
        itself according to its :class:`~featurestream_client.RetryPolicy`).
    """

    retryable: bool = False
    #: For chunked writes: the result of the requests applied before this error.
    partial: Any = None
    #: How many times the failing request was sent.
    attempts: int = 1
    #: True when a write may have been applied (no answer, or a 5xx, after every try):
    #: sending the same write again through the same handle is safe (same seq).
    outcome_unknown: bool = False

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        type: str | None = None,
        title: str | None = None,
        errors: list[dict[str, Any]] | None = None,
        problem: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.type = type
        self.title = title
        self.errors = list(errors or [])
        self.problem = dict(problem or {})

    def __getattr__(self, name: str) -> Any:
        # Extension members of the problem document (limit_bytes, supported, kind...).
        problem = self.__dict__.get("problem") or {}
        if name in problem:
            return problem[name]
        raise AttributeError(name)

    def __str__(self) -> str:
        return self.detail


class InvalidParameter(FeatureStreamError, ValueError):
    """A selector parameter is unknown or out of range (422 ``invalid-parameter``)."""


class InvalidInput(FeatureStreamError, ValueError):
    """Malformed data: wrong length, NaN/Inf, duplicate names... (422 ``invalid-input``)."""


class MalformedBody(InvalidInput):
    """The request body could not be parsed (400 ``malformed-body``)."""


class WrongStreamKind(FeatureStreamError, TypeError):
    """Feature columns sent to an instance stream or the reverse (409 ``wrong-stream-kind``)."""


class StreamNotFound(FeatureStreamError, LookupError):
    """No stream with this id (404 ``stream-not-found``)."""

    @property
    def stream_id(self) -> str | None:
        value = self.problem.get("stream_id")
        return None if value is None else str(value)


class StreamExists(FeatureStreamError):
    """A stream with this id already exists (409 ``stream-exists``)."""


class SequenceConflict(FeatureStreamError):
    """A producer's ``seq`` is out of order (409 ``sequence-conflict``).

    ``expected_seq`` is the next number the server expects from ``producer``.
    """

    @property
    def expected_seq(self) -> int:
        return int(self.problem["expected_seq"])

    @property
    def producer(self) -> str:
        return str(self.problem.get("producer", ""))


class SeqReused(SequenceConflict):
    """The ``seq`` was already applied with other content (409 ``seq-reused``).

    This write was not applied: another write (perhaps of another writer using
    the same producer name) holds the seq. ``expected_seq`` is the next free one.
    """


class ConcurrentUpdate(FeatureStreamError):
    """Another writer kept winning the commit (409 ``concurrent-update``); retryable."""

    retryable = True


class PayloadTooLarge(FeatureStreamError):
    """The body exceeds the server's limit (413); lower the chunk size."""


class RequestTooExpensive(PayloadTooLarge):
    """The request's work went beyond the server's time budget (413 ``request-too-expensive``).

    Nothing of it was applied. ``completed`` is how many of its columns or
    instances the server got through within the budget. The client splits such
    a request by itself and sends the pieces, each with its own seq; this error
    reaches you only when one column, group or instance alone is over the budget
    (raise the server's ``request_time_budget``).
    """

    @property
    def completed(self) -> int:
        return int(self.problem.get("completed") or 0)


class UnsupportedMediaType(FeatureStreamError):
    """The endpoint does not read this content type (415)."""


class StoreUnavailable(FeatureStreamError):
    """The server's state store is down (503 ``store-unavailable``); retryable.

    The outcome of a write answered so is unknown: it may have been applied.
    Retry it only with the same seq (the client does, and a handle keeps the
    seq after its last try, so sending the same write again is safe).
    """

    retryable = True


class NotFound(FeatureStreamError, LookupError):
    """No such route on the server (404 ``not-found``): a wrong URL or an older server."""


class Unauthorized(FeatureStreamError):
    """Missing or wrong API key (401)."""


class VersionNotFound(FeatureStreamError, LookupError):
    """A version the stream has not reached (404 ``version-not-found``)."""


class EvaluationUnavailable(FeatureStreamError, ValueError):
    """The stream's selection cannot be evaluated (422 ``evaluation-unavailable``)."""


class HistoryTrimmed(FeatureStreamError):
    """The history asked for is no longer kept (410 ``history-trimmed``)."""


class ServerError(FeatureStreamError):
    """The server failed (5xx other than ``store-unavailable``)."""


class ConnectionFailed(FeatureStreamError):
    """The server could not be reached, or did not answer in time, after every retry.

    The outcome of the last write is unknown (``outcome_unknown``); its handle
    keeps its seq, so sending the same write again is safe: the server applies
    it at most once.
    """

    retryable = True


class WebSocketClosed(FeatureStreamError):
    """The WebSocket was closed by the server with a code that is not retried."""

    def __init__(self, detail: str, *, code: int | None = None) -> None:
        super().__init__(detail)
        self.code = code


BY_TYPE: dict[str, type[FeatureStreamError]] = {
    "invalid-parameter": InvalidParameter,
    "invalid-input": InvalidInput,
    "malformed-body": MalformedBody,
    "wrong-stream-kind": WrongStreamKind,
    "stream-not-found": StreamNotFound,
    "stream-exists": StreamExists,
    "sequence-conflict": SequenceConflict,
    "seq-reused": SeqReused,
    "concurrent-update": ConcurrentUpdate,
    "payload-too-large": PayloadTooLarge,
    "request-too-expensive": RequestTooExpensive,
    "unsupported-media-type": UnsupportedMediaType,
    "store-unavailable": StoreUnavailable,
    "not-found": NotFound,
    "unauthorized": Unauthorized,
    "version-not-found": VersionNotFound,
    "history-trimmed": HistoryTrimmed,
    "evaluation-unavailable": EvaluationUnavailable,
}

BY_STATUS: dict[int, type[FeatureStreamError]] = {
    401: Unauthorized,
    404: NotFound,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    503: StoreUnavailable,
}


def type_suffix(problem_type: str | None) -> str:
    """The last path segment of a problem ``type`` (``/problems/x`` -> ``x``)."""
    if not problem_type:
        return ""
    return problem_type.rstrip("/").rsplit("/", 1)[-1]


def error_from_problem(status: int, problem: dict[str, Any]) -> FeatureStreamError:
    """The typed exception for a problem document received with ``status``."""
    suffix = type_suffix(problem.get("type"))
    cls = BY_TYPE.get(suffix) or BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else FeatureStreamError
    detail = problem.get("detail") or problem.get("title") or f"HTTP {status}"
    errors = problem.get("errors")
    return cls(
        str(detail),
        status=int(problem.get("status") or status),
        type=problem.get("type"),
        title=problem.get("title"),
        errors=errors if isinstance(errors, list) else None,
        problem=problem,
    )


__all__ = [
    "BY_TYPE",
    "ConcurrentUpdate",
    "ConnectionFailed",
    "EvaluationUnavailable",
    "FeatureStreamError",
    "HistoryTrimmed",
    "InvalidInput",
    "InvalidParameter",
    "MalformedBody",
    "NotFound",
    "PayloadTooLarge",
    "RequestTooExpensive",
    "SeqReused",
    "SequenceConflict",
    "ServerError",
    "StoreUnavailable",
    "StreamExists",
    "StreamNotFound",
    "Unauthorized",
    "UnsupportedMediaType",
    "VersionNotFound",
    "WebSocketClosed",
    "WrongStreamKind",
    "error_from_problem",
    "type_suffix",
]
