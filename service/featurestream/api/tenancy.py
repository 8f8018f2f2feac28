"""Tenants: who is calling, and the stream ids they may reach.

With API keys configured, every ``/v1`` route and the WebSocket need a key;
the key names a tenant, and a tenant's stream ``churn`` is stored as
``<tenant>~churn``. ``~`` is in neither alphabet, so scoped ids cannot
collide with each other or with unscoped ones, and one tenant's ids are simply
not found from another tenant: 404, never 403, so ids do not leak. Without
keys there are no tenants and ids are stored as given.
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Depends, Path, Request
from starlette.requests import HTTPConnection

from featurestream.api.auth import Credential, KeyRing, bearer_token
from featurestream.errors import Unauthorized

SEPARATOR = "~"
STREAM_ID_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"
_STREAM_ID = re.compile(STREAM_ID_PATTERN)
# Path segments a URL cannot carry as themselves: such a stream could not be reached.
_UNREACHABLE = frozenset({".", ".."})


def reachable_stream_id(stream_id: str) -> str:
    """``stream_id`` when a URL can name it (not ``.`` nor ``..``); else ValueError.

    >>> reachable_stream_id("churn")
    'churn'
    """
    if stream_id in _UNREACHABLE:
        raise ValueError(f"{stream_id!r} cannot be a stream id: URLs cannot name it")
    return stream_id


def valid_stream_id(stream_id: str) -> bool:
    """Whether ``stream_id`` is one a stream may have (the whole value matched).

    >>> valid_stream_id("a.b"), valid_stream_id("a\\n"), valid_stream_id("..")
    (True, False, False)
    """
    return _STREAM_ID.fullmatch(stream_id) is not None and stream_id not in _UNREACHABLE


def scoped_id(tenant: str | None, stream_id: str) -> str:
    """The stored id of a tenant's stream.

    >>> scoped_id("acme", "churn"), scoped_id(None, "churn")
    ('acme~churn', 'churn')
    """
    return stream_id if tenant is None else f"{tenant}{SEPARATOR}{stream_id}"


def public_id(stored: str) -> str:
    """The id a tenant knows its stream by.

    >>> public_id("acme~churn"), public_id("churn")
    ('churn', 'churn')
    """
    return stored.split(SEPARATOR, 1)[-1]


def credential_of(conn: HTTPConnection, token: str | None = None) -> Credential | None:
    """The caller's tenant and key hash; None when keys are off. Raises Unauthorized."""
    ring: KeyRing = conn.app.state.keys
    if not ring.enabled:
        return None
    ring.maybe_reload()
    presented = token or bearer_token(conn.headers.get("authorization"))
    found = ring.credential(presented)
    if found is None:
        raise Unauthorized(
            "Missing API key: send Authorization: Bearer <key>."
            if not presented
            else "The API key is not valid."
        )
    return found


def tenant_of(conn: HTTPConnection, token: str | None = None) -> str | None:
    """The caller's tenant; None when keys are off. Raises Unauthorized."""
    found = credential_of(conn, token)
    return None if found is None else found.tenant


async def current_tenant(request: Request) -> str | None:
    # async (like every dependency here): FastAPI runs a plain def dependency in its
    # thread pool, a hop per request that queues behind the selectors' worker threads.
    return tenant_of(request)


TenantDep = Annotated[str | None, Depends(current_tenant)]


async def stream_ref(
    tenant: TenantDep,
    stream_id: Annotated[str, Path(pattern=STREAM_ID_PATTERN, description="Stream id.")],
) -> str:
    return scoped_id(tenant, stream_id)


StreamRef = Annotated[str, Depends(stream_ref)]

__all__ = [
    "STREAM_ID_PATTERN",
    "StreamRef",
    "TenantDep",
    "credential_of",
    "current_tenant",
    "public_id",
    "reachable_stream_id",
    "scoped_id",
    "tenant_of",
    "valid_stream_id",
]
