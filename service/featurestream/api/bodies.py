"""Reading request bodies: media types and headers (arrays: ``arrays.py``; JSON: ``jsonbodies.py``).

Everything here validates before anything is applied, so a bad request
changes nothing.
"""

from __future__ import annotations

from fastapi import Request

from featurestream.errors import InvalidInput

NPY_MEDIA_TYPE = "application/x-npy"
NPZ_MEDIA_TYPE = "application/x-npz"


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "application/json").split(";")[0].strip().lower()


def header_list(request: Request, name: str) -> list[str] | None:
    raw = request.headers.get(name)
    if raw is None:
        return None
    return [part.strip() for part in raw.split(",")]


def header_int(request: Request, name: str) -> int | None:
    raw = request.headers.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"Header {name} must be an integer; got {raw!r}.", field=name) from None
    if value < 1:
        raise InvalidInput(f"Header {name} must be >= 1; got {value}.", field=name)
    return value


__all__ = [
    "NPY_MEDIA_TYPE",
    "NPZ_MEDIA_TYPE",
    "header_int",
    "header_list",
    "media_type",
]
