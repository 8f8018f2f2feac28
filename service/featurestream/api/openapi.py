"""The OpenAPI document: every error a route answers, as the problem document it is.

The routes name the problems of their own (``responses=`` built with
:func:`problem_responses`); :func:`complete` adds those every route of a kind
may answer: the key check, the store, validation, the stream in the path, and
the body's media type, size and deadline (the middleware's). Every 4xx and 5xx
response is documented as ``application/problem+json`` with the ``Problem``
schema.
"""

from __future__ import annotations

from typing import Any

from featurestream.api.problems import PROBLEM_MEDIA_TYPE

PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}

PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "type": "object",
    "description": "An RFC 9457 problem document. `type` names the problem "
    "(`/problems/<name>`, see Errors); further members carry its details "
    "(`errors`: the fields refused, `stream_id`, `limit`, ...).",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "minLength": 1},
        "title": {"type": "string"},
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["field", "message"],
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
    "additionalProperties": True,
}

_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "schema": {"type": "string"},
    }
}


def problem_response(description: str) -> dict[str, Any]:
    """One documented error response: ``description`` and a problem document."""
    return {"description": description, "content": {PROBLEM_MEDIA_TYPE: {"schema": PROBLEM_REF}}}


def problem_responses(described: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a route: status -> what it means (name its problem types)."""
    return {status: problem_response(text) for status, text in described.items()}


# Answered by any route of the kind, whatever the route does.
_V1 = {
    401: "No valid API key, when keys are configured (`unauthorized`).",
    503: "The state store does not answer (`store-unavailable`) or is full "
    "(`store-full`), or a compute worker is gone (`compute-unavailable`); retry.",
}
_VALIDATED = {422: "Invalid input (`invalid-input`): the fields refused are in `errors`."}
_IN_PATH = {404: "No such stream (`stream-not-found`)."}
_BODY = {
    400: "The body is not valid JSON (`malformed-body`).",
    408: "The body did not arrive in time (`request-timeout`).",
    413: "The body is over the size limit (`payload-too-large`).",
    415: "No Content-Type, or one the route does not read (`unsupported-media-type`).",
}


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema without its ``null`` branch: an absent parameter is the null.

    Keywords beside the ``anyOf`` (a route's ``json_schema_extra``) apply to the value.
    """
    branches = [b for b in schema.get("anyOf", ()) if b != {"type": "null"}]
    if "anyOf" not in schema or len(branches) != 1:
        return schema
    value: dict[str, Any] = branches[0]
    return value | {k: v for k, v in schema.items() if k != "anyOf"}


def complete(spec: dict[str, Any]) -> dict[str, Any]:
    """Add the errors every route of a kind answers, each a problem document."""
    spec.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
    for path, operations in spec.get("paths", {}).items():
        for operation in operations.values():
            common: dict[int, str] = {}
            if path.startswith("/v1/"):
                common |= _V1
            if operation.get("parameters") or "requestBody" in operation:
                common |= _VALIDATED
            if "{stream_id}" in path:
                common |= _IN_PATH
            if "requestBody" in operation:
                common |= _BODY
            for parameter in operation.get("parameters", ()):
                parameter["schema"] = _not_null(parameter["schema"])
            responses = operation.setdefault("responses", {})
            for status, text in common.items():
                responses.setdefault(str(status), problem_response(text))
            for status, response in list(responses.items()):
                if status[0] in "45":
                    # FastAPI's own 422 (its validation-error model) is not what is sent.
                    if response.get("description") == "Validation Error":
                        response = responses[status] = problem_response(_VALIDATED[422])
                    response["content"] = {PROBLEM_MEDIA_TYPE: {"schema": PROBLEM_REF}}
                    if status in ("503", "429"):
                        response.setdefault("headers", _RETRY_AFTER)
            operation["responses"] = dict(sorted(responses.items()))
    # FastAPI's validation-error models: no response refers to them any more.
    for name in ("HTTPValidationError", "ValidationError"):
        spec["components"]["schemas"].pop(name, None)
    return spec


__all__ = ["PROBLEM_SCHEMA", "complete", "problem_response", "problem_responses"]
