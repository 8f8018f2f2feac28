"""The client's operations, written once for the sync and the async client.

Each operation is a generator that yields the HTTP :class:`Call` it needs and
receives the :class:`Reply` (or has the typed error thrown into it); the sync
and async clients only run these generators against their transports, with
retries. This module holds the calls and replies, the reads and the stream
lifecycle (catalogue, create, delete); a stream's numbered writes are in
:mod:`featurestream_client._writes`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote

import numpy as np

from featurestream_client.errors import (
    InvalidInput,
    StreamExists,
    StreamNotFound,
)
from featurestream_client.models import (
    Algorithm,
    EventPage,
    Selection,
    StreamInfo,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One HTTP request an operation needs."""

    method: str
    path: str
    json: Any = None
    content: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    accept: frozenset[int] = frozenset()  # statuses >= 300 handed back instead of raised


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    content: bytes
    attempts: int = 1

    def json(self) -> Any:
        return parse_json(self.content)

    @property
    def replayed(self) -> bool:
        return self.headers.get("idempotent-replay", "").lower() == "true"


Op = Generator[Call, Reply, T]

_loads: Callable[[bytes], Any]
try:  # orjson, when installed (the server's environment has it), parses large answers faster
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - exercised where orjson is absent
    _loads = json.loads


def parse_json(content: bytes) -> Any:
    """JSON of an answer."""
    return _loads(content)


def stream_path(stream_id: str, tail: str = "") -> str:
    return f"/v1/streams/{quote(stream_id, safe='')}{tail}"


def attempts_of(exc: BaseException) -> int:
    return int(getattr(exc, "attempts", 1))


# ---------------------------------------------------------------- catalogue and streams


def algorithms_op() -> Op[list[Algorithm]]:
    reply = yield Call("GET", "/v1/algorithms")
    return [Algorithm.from_json(a) for a in reply.json()["algorithms"]]


@dataclass
class Catalogue:
    """The server's algorithms as a client last read them.

    A client reads the catalogue once (a stream's algorithm never changes) and
    again only when asked for an algorithm it did not list.
    """

    by_name: dict[str, Algorithm] | None = None

    def load_op(self) -> Op[list[Algorithm]]:
        """Read the catalogue from the server, and keep it."""
        listed = yield from algorithms_op()
        self.by_name = {a.name: a for a in listed}
        return listed

    def supervised_op(self, algorithm: str) -> Op[bool]:
        """Whether streams of ``algorithm`` learn from labels (True if the server does not say)."""
        if self.by_name is None or algorithm not in self.by_name:
            yield from self.load_op()
        assert self.by_name is not None
        entry = self.by_name.get(algorithm)
        return True if entry is None else entry.supervised


def list_streams_op(labels: Mapping[str, str] | None = None) -> Op[list[StreamInfo]]:
    params = {"label": [f"{k}:{v}" for k, v in labels.items()]} if labels else {}
    reply = yield Call("GET", "/v1/streams", params=params)
    return [StreamInfo.from_json(s) for s in reply.json()["streams"]]


def get_info_op(stream_id: str) -> Op[StreamInfo]:
    reply = yield Call("GET", stream_path(stream_id))
    return StreamInfo.from_json(reply.json())


def target_list(target: Any) -> list[float] | list[str]:
    """The target vector as JSON takes it: numbers, or class labels as strings.

    Labels that are not numbers (``"yes"``/``"no"``, class names) travel as
    strings: the server keeps them as given, and no result depends on how they
    sort (docs/algorithms.md, "Targets").
    """
    values = target.to_numpy() if hasattr(target, "to_numpy") else np.asarray(target)
    values = np.asarray(values).reshape(-1)
    if values.dtype.kind == "b":
        values = values.astype(np.float64)
    if values.dtype.kind not in "fiu":
        if values.size == 0:
            raise InvalidInput("The target is empty.")
        labels = [str(v) for v in values.tolist()]
        if any(v in ("nan", "None", "") for v in labels):
            raise InvalidInput("The target contains missing labels (NaN, None or empty).")
        return labels
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        raise InvalidInput("The target is empty.")
    if not np.isfinite(values).all():
        raise InvalidInput("The target contains NaN or infinite values.")
    return [float(v) for v in values.tolist()]


def plain(value: Any, where: str = "params") -> Any:
    """``value`` with numpy scalars and arrays made plain Python (JSON can then hold it).

    ``np.int64(5)`` becomes 5, ``np.float64(0.1)`` 0.1, ``np.bool_(True)`` True and
    an array a list, at any depth of dicts, lists and tuples.
    """
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{where}: keys must be strings; got {key!r}.")
            out[key] = plain(item, f"{where}.{key}")
        return out
    if isinstance(value, list | tuple):
        return [plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
    return value


def create_op(
    algorithm: str,
    *,
    target: Any = None,
    feature_names: Sequence[str] | None = None,
    params: Mapping[str, Any] | None = None,
    stream_id: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Op[StreamInfo]:
    # The id is chosen here when not given, so a retry of a create whose answer
    # was lost finds its own stream instead of creating a second one.
    sid = stream_id or f"s-{uuid.uuid4().hex[:16]}"
    body: dict[str, Any] = {"id": sid, "algorithm": algorithm, "params": plain(params or {})}
    if target is not None:
        body["target"] = target_list(target)
    if feature_names is not None:
        body["feature_names"] = [str(n) for n in feature_names]
    for key, value in (options or {}).items():
        if value is not None:
            body[key] = plain(value, key)
    try:
        reply = yield Call("POST", "/v1/streams", json=body)
    except StreamExists as exc:
        if attempts_of(exc) > 1:
            info = yield from get_info_op(sid)
            size_matches = (target is None or info.n_instances == len(body["target"])) and (
                feature_names is None or info.n_features == len(body["feature_names"])
            )
            if info.algorithm == algorithm and size_matches:
                return info
        raise
    return StreamInfo.from_json(reply.json())


def delete_op(stream_id: str) -> Op[None]:
    try:
        yield Call("DELETE", stream_path(stream_id))
    except StreamNotFound as exc:
        if attempts_of(exc) == 1:
            raise
        # An earlier attempt deleted it; its answer was lost.


# ---------------------------------------------------------------- reads


def selected_op(stream_id: str, etag: str | None = None) -> Op[tuple[Selection | None, str | None]]:
    headers = {"If-None-Match": etag} if etag else {}
    reply = yield Call(
        "GET", stream_path(stream_id, "/selected"), headers=headers, accept=frozenset({304})
    )
    tag = reply.headers.get("etag", etag)
    if reply.status == 304:
        return None, tag
    return Selection.from_json(reply.json()), tag


def events_op(stream_id: str, after: str | None, limit: int) -> Op[EventPage]:
    params: dict[str, Any] = {"limit": limit}
    if after is not None:
        params["after"] = after
    reply = yield Call("GET", stream_path(stream_id, "/events"), params=params)
    return EventPage.from_json(reply.json())


def status_op(stream_id: str) -> Op[dict[str, Any]]:
    reply = yield Call("GET", stream_path(stream_id, "/status"))
    return dict(reply.json())


def parse_problem(status: int, content: bytes) -> dict[str, Any]:
    """The problem document of an error answer (a minimal one when the body is not JSON)."""
    try:
        body = json.loads(content) if content else {}
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    if "detail" not in body:
        text = content.decode("utf-8", "replace").strip()[:200]
        body.setdefault("detail", text or f"HTTP {status}")
    body.setdefault("status", status)
    return body


__all__ = [
    "Call",
    "Catalogue",
    "Op",
    "Reply",
    "algorithms_op",
    "attempts_of",
    "create_op",
    "delete_op",
    "events_op",
    "get_info_op",
    "list_streams_op",
    "parse_json",
    "parse_problem",
    "selected_op",
    "status_op",
    "stream_path",
    "target_list",
]
