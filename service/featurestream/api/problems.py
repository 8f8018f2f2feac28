"""RFC 9457 problem documents as HTTP responses, and the app's exception handlers.

The documents themselves, and the one table from exception class to status
and problem type, are the wire module's (``engine/wire.py``): a WebSocket
``error`` message carries the same document an HTTP request would get.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Match

from featurestream.api.schemas import is_input_model
from featurestream.api.tenancy import public_id
from featurestream.engine import Problem, wire
from featurestream.errors import FeatureStreamError, Unauthorized, Unavailable

log = logging.getLogger("featurestream.api")

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_BASE = wire.TYPE_BASE
PROBLEMS = wire.PROBLEMS
MAX_ERRORS = wire.MAX_ERRORS
# "Client closed request" (nginx's): the status the access log and the metrics record
# for a client that left before its body was in; nothing is sent.
CLIENT_CLOSED = 499
# The scope key where BodyLimitMiddleware leaves the 408 or 413 it answers itself, after
# telling the route the client left (middleware.py).
BODY_REFUSED = "featurestream.body_refused"
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def respond(p: Problem, headers: dict[str, str] | None = None) -> JSONResponse:
    """The HTTP response carrying problem ``p``."""
    return JSONResponse(
        wire.problem(p), status_code=p.status, media_type=PROBLEM_MEDIA_TYPE, headers=headers
    )


def problem(
    status: int,
    suffix: str,
    title: str,
    detail: str,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    return respond(Problem(TYPE_BASE + suffix, title, status, detail, extra), headers)


def problem_of(exc: FeatureStreamError) -> Problem:
    """The problem document of ``exc``, showing stream ids as their caller knows them."""
    return wire.problem_of(exc, public_id)


def problem_for(exc: FeatureStreamError) -> JSONResponse:
    headers = {"Retry-After": "1"} if isinstance(exc, Unavailable) else None
    if isinstance(exc, Unauthorized):
        headers = {"WWW-Authenticate": 'Bearer realm="featurestream"'}
    return respond(problem_of(exc), headers)


def validation_problem(
    errors: list[Any], *, detail: str | None = None, body: Any = None
) -> JSONResponse:
    return respond(wire.validation_problem(errors, detail=detail, body=body))


def allowed_methods(request: Request) -> list[str]:
    """The methods some HTTP route serves at the request's path."""
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes
        )
    ]


def install(app: FastAPI) -> None:
    @app.exception_handler(FeatureStreamError)
    async def _fs(request: Request, exc: FeatureStreamError) -> JSONResponse:
        return problem_for(exc)

    @app.exception_handler(RequestValidationError)
    async def _rv(request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_problem(list(exc.errors()), body=getattr(exc, "body", None))

    @app.exception_handler(ValidationError)
    async def _pv(request: Request, exc: ValidationError) -> JSONResponse:
        if is_input_model(exc.title):
            return validation_problem(list(exc.errors()))
        # A document the server built itself does not validate: the server's fault.
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return problem(500, "internal-error", "Internal error", "An unexpected error occurred.")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        suffix = {404: "not-found", 405: "method-not-allowed", 415: "unsupported-media-type"}.get(
            exc.status_code, "http-error"
        )
        headers = dict(exc.headers) if exc.headers else {}
        if exc.status_code == 405:
            # The router names the methods of the one route it tried; the resource has
            # those of every route at its path (GET and DELETE of a stream).
            headers["Allow"] = ", ".join(allowed_methods(request))
        return problem(exc.status_code, suffix, str(exc.detail), str(exc.detail), headers or None)

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, exc: ClientDisconnect) -> Response:
        # Nothing was applied (the route had not its body yet) and nothing is sent: one
        # line, no traceback, not a 500. A body the middleware refused gets its 408 or 413.
        if BODY_REFUSED not in request.scope:
            log.info("client disconnected during %s %s", request.method, request.url.path)
        return Response(status_code=CLIENT_CLOSED)

    @app.exception_handler(Exception)
    async def _any(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem(500, "internal-error", "Internal error", "An unexpected error occurred.")


__all__ = [
    "PROBLEMS",
    "PROBLEM_MEDIA_TYPE",
    "TYPE_BASE",
    "install",
    "problem",
    "problem_for",
    "problem_of",
    "respond",
    "validation_problem",
]
