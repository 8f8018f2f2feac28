"""RFC 9457 problem documents: the one table from exception class to HTTP answer."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from featurestream.api.tenancy import public_id
from featurestream.codec import CodecError
from featurestream.errors import (
    ConcurrentUpdate,
    FeatureStreamError,
    InvalidInput,
    InvalidParameter,
    LimitExceeded,
    PayloadTooLarge,
    QuotaExceeded,
    RequestTimeout,
    SequenceConflict,
    StoreUnavailable,
    StreamExists,
    StreamNotFound,
    Unauthorized,
    UnsupportedMediaType,
    WrongStreamKind,
)

log = logging.getLogger("featurestream.api")

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "/problems/"

# class -> (status, type suffix, title). Looked up along the class's MRO.
PROBLEMS: dict[type[FeatureStreamError], tuple[int, str, str]] = {
    InvalidParameter: (422, "invalid-parameter", "Invalid parameter"),
    InvalidInput: (422, "invalid-input", "Invalid input"),
    WrongStreamKind: (409, "wrong-stream-kind", "Wrong stream kind"),
    StreamNotFound: (404, "stream-not-found", "Stream not found"),
    StreamExists: (409, "stream-exists", "Stream already exists"),
    SequenceConflict: (409, "sequence-conflict", "Out-of-order sequence number"),
    ConcurrentUpdate: (409, "concurrent-update", "Concurrent update"),
    Unauthorized: (401, "unauthorized", "Unauthorized"),
    PayloadTooLarge: (413, "payload-too-large", "Payload too large"),
    LimitExceeded: (413, "limit-exceeded", "Limit exceeded"),
    QuotaExceeded: (429, "quota-exceeded", "Quota exceeded"),
    RequestTimeout: (408, "request-timeout", "Request timeout"),
    UnsupportedMediaType: (415, "unsupported-media-type", "Unsupported media type"),
    StoreUnavailable: (503, "store-unavailable", "State store unavailable"),
    CodecError: (500, "corrupt-state", "Stored state cannot be decoded"),
}


def problem(
    status: int,
    suffix: str,
    title: str,
    detail: str,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    body = {"type": TYPE_BASE + suffix, "title": title, "status": status, "detail": detail}
    body.update(extra)
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def problem_for(exc: FeatureStreamError) -> JSONResponse:
    for cls in type(exc).__mro__:
        if cls in PROBLEMS:
            status, suffix, title = PROBLEMS[cls]
            break
    else:
        status, suffix, title = 500, "internal-error", "Internal error"
    headers = {"Retry-After": "1"} if isinstance(exc, StoreUnavailable) else None
    if isinstance(exc, Unauthorized):
        headers = {"WWW-Authenticate": 'Bearer realm="featurestream"'}
    fields = exc.fields()
    detail = exc.message
    if "stream_id" in fields:
        # Stream ids are stored scoped by tenant; a problem shows the caller's own id.
        shown = public_id(str(fields["stream_id"]))
        detail = detail.replace(repr(fields["stream_id"]), repr(shown))
        fields["stream_id"] = shown
    return problem(status, suffix, title, detail, headers, **fields)


MAX_ERRORS = 20


def validation_problem(errors: list[Any], *, detail: str | None = None) -> JSONResponse:
    items = []
    for e in errors[:MAX_ERRORS]:
        loc = [str(p) for p in e.get("loc", ()) if p not in ("body",)]
        items.append({"field": ".".join(loc) or "body", "message": e.get("msg", "invalid")})
    if any(e.get("type") == "json_invalid" for e in errors):
        return problem(
            400,
            "malformed-body",
            "Malformed body",
            detail or "The request body is not valid JSON.",
            errors=items,
        )
    text = detail or "; ".join(f"{i['field']}: {i['message']}" for i in items[:5])
    if len(errors) > MAX_ERRORS:
        text += f" ({len(errors)} errors in all; the first {MAX_ERRORS} are listed)"
    return problem(422, "invalid-input", "Invalid input", text, errors=items)


def install(app: FastAPI) -> None:
    @app.exception_handler(FeatureStreamError)
    async def _fs(request: Request, exc: FeatureStreamError) -> JSONResponse:
        return problem_for(exc)

    @app.exception_handler(RequestValidationError)
    async def _rv(request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_problem(list(exc.errors()))

    @app.exception_handler(ValidationError)
    async def _pv(request: Request, exc: ValidationError) -> JSONResponse:
        return validation_problem(list(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        suffix = {404: "not-found", 405: "method-not-allowed", 415: "unsupported-media-type"}.get(
            exc.status_code, "http-error"
        )
        return problem(
            exc.status_code,
            suffix,
            str(exc.detail),
            str(exc.detail),
            dict(exc.headers) if exc.headers else None,
        )

    @app.exception_handler(Exception)
    async def _any(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem(500, "internal-error", "Internal error", "An unexpected error occurred.")


__all__ = ["PROBLEMS", "PROBLEM_MEDIA_TYPE", "install", "problem", "problem_for"]
