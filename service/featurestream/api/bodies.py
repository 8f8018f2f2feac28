"""Reading request bodies: media types and headers.

Arrays are read by ``arrays.py`` (.npy) and ``npz.py`` (.npz), JSON by
``jsonbodies.py``.

Everything here validates before anything is applied, so a bad request
changes nothing.
"""

from __future__ import annotations

from fastapi import Request

from featurestream.api.producers import DEFAULT_PRODUCER, producer_name
from featurestream.errors import InvalidInput

NPY_MEDIA_TYPE = "application/x-npy"
NPZ_MEDIA_TYPE = "application/x-npz"


def media_type(request: Request) -> str:
    """The body's media type ("" without a Content-Type: no route reads it)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


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


def write_ids(
    request: Request, producer: str | None = None, seq: int | None = None
) -> tuple[str, int | None]:
    """The producer and seq of a write: headers ``X-Producer``/``X-Seq``, or the body's fields.

    Both may be given (for a JSON body) only with the same values. A request
    that names no producer writes as ``"default"``.
    """
    header = request.headers.get("X-Producer")
    if header is not None:
        header = producer_name(header, "X-Producer")
        if producer is not None and producer != header:
            raise InvalidInput(
                f"X-Producer {header[:40]!r} differs from the body's producer "
                f"{producer[:40]!r}; give one, or the same in both.",
                field="X-Producer",
            )
    header_seq = header_int(request, "X-Seq")
    if header_seq is not None and seq is not None and header_seq != seq:
        raise InvalidInput(
            f"X-Seq {header_seq} differs from the body's seq {seq}; give one, or the same in both.",
            field="X-Seq",
        )
    return header or producer or DEFAULT_PRODUCER, header_seq if header_seq is not None else seq


__all__ = [
    "NPY_MEDIA_TYPE",
    "NPZ_MEDIA_TYPE",
    "header_int",
    "header_list",
    "media_type",
    "write_ids",
]
