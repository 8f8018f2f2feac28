"""Producer names: the one rule every channel checks (JSON body, ``X-Producer``, WebSocket query).

A producer name is 1 to 256 characters, none of them a control character
(C0, DEL or C1), matched over the whole value: a trailing newline is refused
like any other control character.
"""

from __future__ import annotations

import re
import uuid
from typing import TypeGuard

from featurestream.errors import InvalidInput

PRODUCER_MAX_LENGTH = 256
# Anchored for the OpenAPI schema and pydantic; Python matches it with fullmatch.
PRODUCER_PATTERN = rf"^[^\x00-\x1f\x7f-\x9f]{{1,{PRODUCER_MAX_LENGTH}}}$"
_PRODUCER = re.compile(PRODUCER_PATTERN)
DEFAULT_PRODUCER = "default"


def is_producer(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a valid producer name.

    >>> is_producer("loader-1"), is_producer(""), is_producer("p\\n"), is_producer("x" * 257)
    (True, False, False, False)
    """
    return type(value) is str and _PRODUCER.fullmatch(value) is not None


def producer_name(value: str, field: str) -> str:
    """``value`` when it is a valid producer name; else InvalidInput naming ``field``."""
    if not is_producer(value):
        raise InvalidInput(
            f"{field} must be 1 to {PRODUCER_MAX_LENGTH} characters without control "
            f"characters; got {len(value)} characters{_shown(value)}.",
            field=field,
        )
    return value


def _shown(value: str) -> str:
    return f": {value[:40]!r}" if value else ""


def connection_producer() -> str:
    """The producer of a WebSocket that names none: its own, told to it on connect."""
    return f"ws-{uuid.uuid4().hex}"


__all__ = [
    "DEFAULT_PRODUCER",
    "PRODUCER_MAX_LENGTH",
    "PRODUCER_PATTERN",
    "connection_producer",
    "is_producer",
    "producer_name",
]
