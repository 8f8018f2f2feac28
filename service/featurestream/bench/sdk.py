"""Runs through the Python SDK: the path a user's data takes, encoding included.

The bench's one door to ``featurestream_client``: a feature stream gets the
user's own object (the scipy.sparse matrix, the numpy array) handed to
``Stream.add_features`` (``add_groups`` for group-SAOLA), an instance stream
to ``Stream.stream_instances`` (every frame acknowledged once durable, as
always). The time runs from the first call to its result, so reading the
input, checking it, cutting it into requests and encoding them all count.

A feature data set goes in at most :data:`CALLS` calls, so that ``--budget``
can stop a run between two of them; the SDK cuts each call into requests (of
``--chunk`` columns) itself. An instance data set goes in one
``stream_instances`` call, as a user streams it: the whole arrays, or with
``--budget`` a generator of frames that stops at the deadline (a call per
block would open a connection each time and drain its pipeline).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import httpx

from featurestream.bench.datasets import FeatureData, InstanceData
from featurestream.bench.runs import (
    DENSE_CHUNK_BYTES,
    GROUP_SIZE,
    Deadline,
    RunResult,
    chunk_bounds,
    peak_rss,
    service_result,
    start_rss,
)
from featurestream.bench.server import SpawnedServer
from featurestream.engine import catalogue
from featurestream.selectors import REGISTRY
from featurestream_client import Client

#: The most calls a data set is split into (``--budget`` is checked between them).
CALLS = 10


class _Counted:
    """A WebSocket connection that counts the bytes sent on it."""

    def __init__(self, conn: Any, sent: list[int]) -> None:
        self._conn = conn
        self._sent = sent

    def send(self, data: str | bytes | bytearray) -> None:
        self._sent[0] += len(data)
        self._conn.send(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class CountingClient(Client):
    """The SDK's client, counting the request and frame bytes it sends."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        self.bytes_sent = [0]
        http = httpx.Client(
            base_url=url.rstrip("/"), timeout=3600, event_hooks={"request": [self._count]}
        )
        super().__init__(url, timeout=3600, http_client=http, **kwargs)
        self._own_http = http

    def _count(self, request: httpx.Request) -> None:
        self.bytes_sent[0] += len(request.content) + sum(len(v) for v in request.headers.values())

    def _ws_connect(self, path: str, query: Any) -> Any:
        return _Counted(super()._ws_connect(path, query), self.bytes_sent)

    def close(self) -> None:
        super().close()
        self._own_http.close()


def _blocks(total: int, unit: int) -> list[tuple[int, int]]:
    """At most CALLS consecutive ranges of ``total`` items, each a multiple of ``unit``."""
    units = -(-total // unit)
    per = max(1, -(-units // CALLS)) * unit
    return [(lo, min(total, lo + per)) for lo in range(0, total, per)]


def features_sdk(
    url: str,
    data: FeatureData,
    algorithm: str,
    params: dict[str, Any],
    chunk: int,
    budget: float | None = None,
    server: SpawnedServer | None = None,
) -> RunResult:
    """``add_features`` (``add_groups``) of the data set's own matrix, timed with encoding."""
    bounds = chunk_bounds(data, algorithm, chunk)
    per_request = bounds[0][1] - bounds[0][0]
    deadline = Deadline(budget)
    groups = REGISTRY[algorithm].uses_groups  # type: ignore[attr-defined]
    c = CountingClient(
        url, chunk_columns=per_request, chunk_bytes=DENSE_CHUNK_BYTES, max_header_bytes=1 << 20
    )
    with c:
        s = c.create_stream(algorithm, target=data.y, params=params, id=_sid())
        try:
            note = start_rss(server)
            c.bytes_sent[0] = 0
            done = 0
            result = None
            t0 = time.perf_counter()
            for lo, hi in _blocks(data.b, per_request):
                part, names = data.X[:, lo:hi], data.names[lo:hi]
                if groups:
                    result = s.add_groups(
                        {
                            f"g{(lo + k) // GROUP_SIZE}": (
                                part[:, k : k + GROUP_SIZE],
                                names[k : k + GROUP_SIZE],
                            )
                            for k in range(0, hi - lo, GROUP_SIZE)
                        }
                    )
                else:
                    result = s.add_features(part, names=names)
                done = hi
                if deadline.passed():
                    break
            dt = time.perf_counter() - t0
            peak = peak_rss(server)
            chosen = list(result.selected) if result is not None else []
            sent = c.bytes_sent[0]
        finally:
            s.delete()
    return service_result(
        data, algorithm, params, done, dt, chosen, sent=sent, peak=peak, note=note, path="sdk"
    )


def instances_sdk(
    url: str,
    data: InstanceData,
    algorithm: str,
    params: dict[str, Any],
    budget: float | None = None,
    server: SpawnedServer | None = None,
    window: int | None = None,
) -> RunResult:
    """``stream_instances`` of the data set's own rows (float64, or CSR), timed with encoding.

    The client has the SDK's defaults, its window of unanswered frames too,
    unless ``window`` is smaller (a slow selector: see ``runs.window_for``).
    """
    supervised = catalogue.supervised(algorithm)
    frame = data.spec.frame
    deadline = Deadline(budget)
    c = CountingClient(url)
    if window is not None:
        c.window = min(c.window, window)
    with c:
        # Untimed: the first frame of its kind loads the server's compiled kernels
        # (once per process; a server warms them at start-up unless told not to).
        scratch = c.create_stream(algorithm, feature_names=data.names, params=params, id=_sid())
        try:
            scratch.stream_instances(
                data.X[:frame], data.y[:frame] if supervised else None, batch_size=frame
            )
        finally:
            scratch.delete()
        s = c.create_stream(algorithm, feature_names=data.names, params=params, id=_sid())
        try:
            note = start_rss(server)
            c.bytes_sent[0] = 0
            done = 0
            t0 = time.perf_counter()
            if budget is None:
                # The user's call: the whole data set at once, one connection.
                s.stream_instances(data.X, data.y if supervised else None, batch_size=frame)
                done = data.spec.n
            else:
                # Still one call (one connection, its pipeline never drained), fed
                # frame by frame by a generator that stops at the deadline.
                sent_rows = [0]
                s.stream_instances(
                    _frames(data, frame, supervised, deadline, sent_rows), batch_size=frame
                )
                done = sent_rows[0]
            dt = time.perf_counter() - t0
            sent = c.bytes_sent[0]
            peak = peak_rss(server)
            chosen = list(s.selected().names)
        finally:
            s.delete()
    return service_result(
        data, algorithm, params, done, dt, chosen, sent=sent, peak=peak, note=note, path="sdk"
    )


class ReadBack(NamedTuple):
    """What ``instances_read_back`` saw of one stream."""

    #: (instances seen, selected names) after each call.
    selections: list[tuple[int, list[str]]]
    #: Seconds spent in ``stream_instances`` calls (the reads not counted).
    seconds: float
    #: The stream's log events of the type asked for, in log order; None if none was.
    events: list[dict[str, Any]] | None


def instances_read_back(
    url: str,
    X: Any,
    y: Any,
    names: Sequence[str],
    algorithm: str,
    params: dict[str, Any],
    *,
    every: int,
    frame: int,
    target_type: str | None = None,
    event_type: str | None = None,
) -> ReadBack:
    """``stream_instances`` of ``every`` rows at a time, the selection read after each.

    With ``event_type`` (``"drift"``), the stream's events of that type are
    read from its log (``GET /events``, page by page) after the last call.
    The stream is deleted at the end.
    """
    c = Client(url, timeout=3600)
    with c:
        s = c.create_stream(
            algorithm, feature_names=list(names), params=params, id=_sid(), target_type=target_type
        )
        try:
            selections, seconds = [], 0.0
            for lo in range(0, len(X), every):
                hi = min(len(X), lo + every)
                t0 = time.perf_counter()
                s.stream_instances(X[lo:hi], None if y is None else y[lo:hi], batch_size=frame)
                seconds += time.perf_counter() - t0
                selections.append((hi, list(s.selected().names)))
            events = None
            if event_type is not None:
                events = [e.raw for e in s.iter_events() if e.type == event_type]
        finally:
            s.delete()
    return ReadBack(selections, seconds, events)


def _frames(
    data: InstanceData, frame: int, supervised: bool, deadline: Deadline, sent: list[int]
) -> Iterator[Any]:
    """The data set's frames, ``(X, y)`` pairs or bare X, until the deadline passes."""
    for lo in range(0, data.spec.n, frame):
        hi = min(data.spec.n, lo + frame)
        yield (data.X[lo:hi], data.y[lo:hi]) if supervised else data.X[lo:hi]
        sent[0] = hi
        if deadline.passed():
            return


def _sid() -> str:
    return f"bench-{uuid.uuid4().hex[:10]}"


__all__ = [
    "CALLS",
    "CountingClient",
    "ReadBack",
    "features_sdk",
    "instances_read_back",
    "instances_sdk",
]
