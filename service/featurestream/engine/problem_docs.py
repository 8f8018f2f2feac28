"""Problem documents (RFC 9457): every error featurestream answers, as the wire shows it.

Each :class:`~featurestream.errors.FeatureStreamError` maps to one problem
type (``PROBLEMS``: its status, title and the ``/problems/<slug>`` type); a
validation failure lists its errors with their field paths. The documents
are also stored (the refusal of a seq is replayed as it was answered), so
their layout is part of the stored data. ``engine/wire.py`` renders them
with every other document and re-exports these names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from featurestream.codec import CodecError
from featurestream.engine.results import (
    Problem,
)
from featurestream.errors import (
    ComputeUnavailable,
    ConcurrentUpdate,
    EvaluationUnavailable,
    FeatureStreamError,
    HistoryTrimmed,
    InvalidInput,
    InvalidParameter,
    LimitExceeded,
    NumericallyUnstable,
    PayloadTooLarge,
    QuotaExceeded,
    RequestTimeout,
    RequestTooExpensive,
    SeqReused,
    SequenceConflict,
    StoreFull,
    StoreUnavailable,
    StreamExists,
    StreamNotFound,
    Unauthorized,
    UnsupportedMediaType,
    VersionNotFound,
    WrongStreamKind,
)

Document = dict[str, Any]


TYPE_BASE = "/problems/"

# class -> (status, type suffix, title). Looked up along the class's MRO.
PROBLEMS: dict[type[FeatureStreamError], tuple[int, str, str]] = {
    InvalidParameter: (422, "invalid-parameter", "Invalid parameter"),
    InvalidInput: (422, "invalid-input", "Invalid input"),
    WrongStreamKind: (409, "wrong-stream-kind", "Wrong stream kind"),
    StreamNotFound: (404, "stream-not-found", "Stream not found"),
    VersionNotFound: (404, "version-not-found", "Version not reached"),
    StreamExists: (409, "stream-exists", "Stream already exists"),
    SeqReused: (409, "seq-reused", "Seq reused with different content"),
    SequenceConflict: (409, "sequence-conflict", "Out-of-order sequence number"),
    ConcurrentUpdate: (409, "concurrent-update", "Concurrent update"),
    Unauthorized: (401, "unauthorized", "Unauthorized"),
    PayloadTooLarge: (413, "payload-too-large", "Payload too large"),
    LimitExceeded: (413, "limit-exceeded", "Limit exceeded"),
    RequestTooExpensive: (413, "request-too-expensive", "Request too expensive"),
    QuotaExceeded: (429, "quota-exceeded", "Quota exceeded"),
    RequestTimeout: (408, "request-timeout", "Request timeout"),
    UnsupportedMediaType: (415, "unsupported-media-type", "Unsupported media type"),
    StoreUnavailable: (503, "store-unavailable", "State store unavailable"),
    ComputeUnavailable: (503, "compute-unavailable", "Compute worker unavailable"),
    NumericallyUnstable: (422, "numerically-unstable", "Numerically unstable"),
    StoreFull: (503, "store-full", "State store full"),
    HistoryTrimmed: (410, "history-trimmed", "History no longer kept"),
    EvaluationUnavailable: (422, "evaluation-unavailable", "Evaluation unavailable"),
    CodecError: (500, "corrupt-state", "Stored state cannot be decoded"),
}

MAX_ERRORS = 20


class Refused(FeatureStreamError):
    """A refusal that is already a problem document (input that failed validation)."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.detail)
        self.problem = problem


def _same(stream_id: str) -> str:
    return stream_id


def problem_of(exc: FeatureStreamError, public_id: Callable[[str], str] = _same) -> Problem:
    """The problem document of ``exc``; ``public_id`` maps a stored stream id to the
    id its caller knows (stored ids are scoped by tenant)."""
    if isinstance(exc, Refused):
        return exc.problem
    for cls in type(exc).__mro__:
        if cls in PROBLEMS:
            status_code, suffix, title = PROBLEMS[cls]
            break
    else:
        status_code, suffix, title = 500, "internal-error", "Internal error"
    fields = exc.fields()
    detail = exc.message
    if "stream_id" in fields:
        shown = public_id(str(fields["stream_id"]))
        detail = detail.replace(repr(fields["stream_id"]), repr(shown))
        fields["stream_id"] = shown
    return Problem(TYPE_BASE + suffix, title, status_code, detail, fields)


def field_path(loc: Iterable[Any]) -> str:
    """One style of field path for every problem: ``features[0].values[2]``.

    >>> field_path(["body", "features", 0, "values", 2])
    'features[0].values[2]'
    >>> field_path(["body"])
    'body'
    """
    out = ""
    for part in loc:
        if part == "body" and not out:
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "body"


def _json_error(e: Mapping[str, Any], body: Any) -> dict[str, str]:
    """A malformed-JSON error: where it is (line, column, char), not a bare offset."""
    ctx = e.get("ctx") or {}
    reason = str(ctx.get("error") or e.get("msg") or "invalid JSON")
    where = [p for p in e.get("loc", ()) if isinstance(p, int)]
    if where:
        pos = where[-1]
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        if isinstance(text, str) and 0 <= pos <= len(text):
            line = text.count("\n", 0, pos) + 1
            column = pos - (text.rfind("\n", 0, pos) + 1) + 1
            reason += f" at line {line}, column {column} (char {pos})"
        else:
            reason += f" at char {pos}"
    return {"field": "body", "message": reason}


def validation_problem(
    errors: Iterable[Any], *, detail: str | None = None, body: Any = None
) -> Problem:
    """The problem of input that failed validation (pydantic's error list).

    ``body``, when given, is the request's text: a malformed-JSON error then
    names its line and column.
    """
    errors = list(errors)
    if any(e.get("type") == "json_invalid" for e in errors):
        items = [_json_error(e, body) for e in errors if e.get("type") == "json_invalid"][:1]
        text = detail or f"The request body is not valid JSON: {items[0]['message']}."
        return Problem(TYPE_BASE + "malformed-body", "Malformed body", 400, text, {"errors": items})
    items = []
    for e in errors[:MAX_ERRORS]:
        items.append({"field": field_path(e.get("loc", ())), "message": e.get("msg", "invalid")})
    text = detail or "; ".join(f"{i['field']}: {i['message']}" for i in items[:5])
    if len(errors) > MAX_ERRORS:
        text += f" ({len(errors)} errors in all; the first {MAX_ERRORS} are listed)"
    return Problem(TYPE_BASE + "invalid-input", "Invalid input", 422, text, {"errors": items})


def problem(p: Problem) -> Document:
    """The problem document: ``type``, ``title``, ``status``, ``detail``, then its fields.

    Its text may quote what a client sent, and a JSON string escape can carry a
    lone surrogate, which no UTF-8 encoder takes: such characters are written as
    their ``\\uXXXX`` escape, so every problem can be sent.

    >>> problem(Problem("/problems/x", "X", 422, "unknown 'a\\udcda'", {}))["detail"]
    "unknown 'a\\\\udcda'"
    """
    doc = {"type": p.type, "title": p.title, "status": p.status, "detail": p.detail, **p.extra}
    return {_encodable(k): _encodable(v) for k, v in doc.items()}


def _encodable(value: Any) -> Any:
    """``value`` with every string made encodable as UTF-8 (lone surrogates escaped)."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode()
        return value
    if isinstance(value, Mapping):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable(v) for v in value]
    return value


def parse_problem(doc: Mapping[str, Any]) -> Problem:
    extra = {k: v for k, v in doc.items() if k not in ("type", "title", "status", "detail")}
    return Problem(
        str(doc["type"]), str(doc["title"]), int(doc["status"]), str(doc["detail"]), extra
    )


def replayed_problem(p: Problem) -> bytes:
    """The body of an HTTP replay of a seq that a refused frame used up."""
    return json.dumps(problem(p)).encode()
