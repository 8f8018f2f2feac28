"""One selector on one data set, in process or end to end through a server.

Feature streams go to the server in chunks of columns: ``application/x-npz``
bodies (``scipy.sparse.save_npz`` of an ``(n, chunk)`` CSC matrix, rows =
instances) for sparse sets and ``application/x-npy`` for dense ones, names in
``X-Feature-Names``; group-SAOLA posts JSON groups (sparse JSON columns) to
``/groups``. Instance streams go over one WebSocket as pipelined binary
frames, labels in the last column for supervised selectors: float32 .npy for
dense sets, .npz (``scipy.sparse.save_npz``, the non-zeros only) for sparse
ones.

The in-process run applies the same chunks or frames to the selector directly.
Times cover the data only (stream creation, encoding of the bodies and
deletion are outside), from the first chunk or frame sent to the last answer.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse

from featurestream.bench.datasets import FeatureData, InstanceData
from featurestream.bench.server import SpawnedServer
from featurestream.selectors import REGISTRY
from featurestream.selectors.base import FeatureSelector

GROUP_SIZE = 10  # group-SAOLA: consecutive columns form a group
# group-SAOLA selectors take their chunks dense: keep a chunk within this many values.
GROUP_DENSE_VALUES = 1 << 24
# Frames a WebSocket run keeps unanswered at most (the server reads as many ahead).
FRAME_WINDOW = 64
# Seconds of work a run may queue at the server: a pong waits behind the frames the
# server has not read yet, and its keepalive (ws_ping_timeout, 60 s) must not expire.
QUEUED_SECONDS = 15.0


def window_for(frames_per_second: float | None) -> int:
    """Frames to keep unanswered, given how fast the selector applies frames.

    >>> window_for(1000.0), window_for(0.25), window_for(None)
    (64, 3, 64)
    """
    if not frames_per_second:
        return FRAME_WINDOW
    return max(1, min(FRAME_WINDOW, int(frames_per_second * QUEUED_SECONDS)))


# Dense feature sets are sent as .npy chunks of at most this many bytes.
DENSE_CHUNK_BYTES = 32 << 20
# NRFS in the suite: instances in its window, and most recomputations after the first
# (one computation on a full window of d = 1,000 is costly).
NRFS_WINDOW = 1_000
NRFS_COMPUTATIONS = 4
# FSDS in the suite: rows of its sketch and singular vectors of its scores.
FSDS_SKETCH = 20
FSDS_K = 10


@dataclass
class RunResult:
    """What one run measured. ``items`` are columns (features) or instances."""

    dataset: str
    algorithm: str
    mode: str  # "in-process" or "service"
    kind: str  # "features" or "instances"
    n: int  # rows of a feature stream; instances of an instance stream
    width: int  # columns of a feature stream; d of an instance stream
    items: int  # columns or instances applied (fewer than planned when the budget ran out)
    planned: int
    seconds: float
    rate: float  # items per second
    selected: int
    recall: float
    params: dict[str, Any]
    complete: bool = True
    bytes_sent: int | None = None
    peak_rss_bytes: int | None = None
    rss_note: str | None = None
    ratio: float | None = None  # service seconds / in-process seconds (same items)
    identical: bool | None = None  # service selection == in-process selection
    selection: list[str] = field(default_factory=list)
    error: str | None = None
    target: str | None = None  # the bound a full-size run is held to, e.g. "<= 2 s"
    met: bool | None = None
    # How a service run's data travelled: "sdk" (the Python SDK, from the user's own
    # objects, encoding timed), "raw" (bodies or frames encoded beforehand, binary),
    # "json" (JSON bodies or frames encoded beforehand); None in process.
    path: str | None = None


def run_result(
    data: FeatureData | InstanceData,
    algorithm: str,
    mode: str,
    params: dict[str, Any],
    done: int,
    seconds: float,
    chosen: list[str],
    **extra: Any,
) -> RunResult:
    """A RunResult of ``done`` items in ``seconds``; shape, rate and recall from the data."""
    if isinstance(data, FeatureData):
        kind, n, width, planned = "features", data.n, data.b, data.b
    else:
        kind, n, width, planned = "instances", data.spec.n, data.spec.d, data.spec.n
    return RunResult(
        data.spec.name,
        algorithm,
        mode,
        kind,
        n,
        width,
        done,
        planned,
        seconds,
        done / seconds if seconds > 0 else (0.0 if done == 0 else float("inf")),
        len(chosen),
        data.recall(chosen) if chosen else 0.0,
        params,
        complete=done == planned,
        selection=chosen,
        **extra,
    )


class Deadline:
    """A time budget checked between chunks or frames."""

    def __init__(self, seconds: float | None) -> None:
        self.end = None if seconds is None else time.perf_counter() + seconds

    def passed(self) -> bool:
        return self.end is not None and time.perf_counter() > self.end


# --------------------------------------------------------------------------- feature streams


def default_params(algorithm: str, data: FeatureData | InstanceData) -> dict[str, Any]:
    """Parameters a run uses unless told otherwise (the algorithm's own defaults mostly).

    Instance selectors keep twice as many features as there are planted ones.
    FSDS keeps a sketch of :data:`FSDS_SKETCH` rows and scores on :data:`FSDS_K`
    singular vectors (its own defaults, ceil(sqrt(d)) rows and 2 vectors, find a
    quarter as many of the planted features on ``stream-d1000``).
    OFS and FIRES standardise dense instances but not sparse ones (standardising
    densifies a sparse instance). NRFS keeps a window of :data:`NRFS_WINDOW`
    instances and recomputes every ``refresh`` of them, at least a window and
    at most :data:`NRFS_COMPUTATIONS` times after its first computation.

    >>> from featurestream.bench.datasets import instance_spec, make_instances
    >>> full_length = make_instances(instance_spec("stream-d1000").scaled(20_000, 50))
    >>> default_params("nrfs", full_length)
    {'num_features': 20, 'window': 1000, 'refresh': 5000}
    >>> default_params("fires", make_instances(instance_spec("stream-d100000", quick=True)))
    {'num_features': 20, 'scale': 'none'}
    >>> default_params("fsds", full_length)
    {'num_features': 20, 'sketch_size': 20, 'k': 10}
    """
    if algorithm == "fsds":
        return {"num_features": 2 * len(data.relevant), "sketch_size": FSDS_SKETCH, "k": FSDS_K}
    if algorithm == "kbest":
        return {"num_features": 2 * len(data.relevant)}
    if algorithm in ("ofs", "fires"):
        sparse = isinstance(data, InstanceData) and data.spec.sparse
        return {"num_features": 2 * len(data.relevant), "scale": "none" if sparse else "standard"}
    if algorithm == "nrfs" and isinstance(data, InstanceData):
        refresh = max(NRFS_WINDOW, -(-data.spec.n // NRFS_COMPUTATIONS))
        return {
            "num_features": min(2 * len(data.relevant), data.spec.d),
            "window": NRFS_WINDOW,
            "refresh": refresh,
        }
    if algorithm == "grafting" and isinstance(data, FeatureData) and not data.spec.sparse:
        return {"loss": "squared"}  # the dense set has a continuous target
    return {}


def chunk_bounds(data: FeatureData, algorithm: str, chunk: int) -> list[tuple[int, int]]:
    """Column ranges of the requests; group-SAOLA chunks hold whole groups."""
    size = chunk
    if not data.spec.sparse:
        size = min(size, max(1, DENSE_CHUNK_BYTES // (8 * data.n)))
    if algorithm == "group_saola":
        size = min(size, max(1, GROUP_DENSE_VALUES // data.n))
        size = max(GROUP_SIZE, size - size % GROUP_SIZE)
    return [(lo, min(data.b, lo + size)) for lo in range(0, data.b, size)]


def _groups(lo: int, hi: int) -> list[str | None]:
    return [f"g{j // GROUP_SIZE}" for j in range(lo, hi)]


def features_in_process(
    data: FeatureData,
    algorithm: str,
    params: dict[str, Any],
    chunk: int,
    budget: float | None = None,
) -> RunResult:
    cls = REGISTRY[algorithm]
    assert issubclass(cls, FeatureSelector)
    sel = cls.start(cls.params_type.from_mapping(params), data.y)
    bounds = chunk_bounds(data, algorithm, chunk)
    deadline = Deadline(budget)
    done = 0
    t0 = time.perf_counter()
    for lo, hi in bounds:
        groups = _groups(lo, hi) if cls.uses_groups else None
        sel.learn_features(data.names[lo:hi], data.columns(lo, hi), groups)
        done = hi
        if deadline.passed():
            break
    dt = time.perf_counter() - t0
    chosen = list(sel.selected())
    return run_result(data, algorithm, "in-process", params, done, dt, chosen)


def _npz(data: FeatureData, lo: int, hi: int) -> bytes:
    buf = io.BytesIO()
    # Uncompressed: zlib would cost both ends more time than the bytes it saves on loopback.
    scipy.sparse.save_npz(buf, data.X[:, lo:hi].tocsc(), compressed=False)
    return buf.getvalue()


def _npy(data: FeatureData, lo: int, hi: int) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(data.X[:, lo:hi]))
    return buf.getvalue()


def _column_json(data: FeatureData, cols: Any, k: int, name: str) -> dict[str, Any]:
    if data.spec.sparse:
        a, b = cols.indptr[k], cols.indptr[k + 1]
        return {
            "name": name,
            "indices": cols.indices[a:b].tolist(),
            "data": cols.data[a:b].tolist(),
        }
    return {"name": name, "values": cols[k].tolist()}


def _features_json(data: FeatureData, lo: int, hi: int) -> bytes:
    cols = data.columns(lo, hi)
    features = [_column_json(data, cols, k, n) for k, n in enumerate(data.names[lo:hi])]
    return json.dumps({"features": features}, separators=(",", ":")).encode()


def _groups_json(data: FeatureData, lo: int, hi: int) -> bytes:
    cols = data.columns(lo, hi)
    groups: dict[str, list[dict[str, Any]]] = {}
    for k, name in enumerate(data.names[lo:hi]):
        column = _column_json(data, cols, k, name)
        groups.setdefault(f"g{(lo + k) // GROUP_SIZE}", []).append(column)
    body = {"groups": [{"name": g, "features": fs} for g, fs in groups.items()]}
    return json.dumps(body, separators=(",", ":")).encode()


@dataclass
class _Request:
    path: str
    body: bytes
    headers: dict[str, str]
    items: int

    @property
    def size(self) -> int:
        return len(self.body) + sum(len(v) for v in self.headers.values())


def _feature_requests(
    data: FeatureData, algorithm: str, sid: str, chunk: int, path: str = "raw"
) -> Iterator[_Request]:
    for lo, hi in chunk_bounds(data, algorithm, chunk):
        if path == "json" and algorithm != "group_saola":
            yield _Request(
                f"/v1/streams/{sid}/features",
                _features_json(data, lo, hi),
                {"content-type": "application/json"},
                hi - lo,
            )
            continue
        if algorithm == "group_saola":
            yield _Request(
                f"/v1/streams/{sid}/groups",
                _groups_json(data, lo, hi),
                {"content-type": "application/json"},
                hi - lo,
            )
            continue
        body, media = (
            (_npz(data, lo, hi), "application/x-npz")
            if data.spec.sparse
            else (_npy(data, lo, hi), "application/x-npy")
        )
        headers = {"content-type": media, "X-Feature-Names": ",".join(data.names[lo:hi])}
        yield _Request(f"/v1/streams/{sid}/features", body, headers, hi - lo)


def check(response: Any) -> Any:
    if response.status_code >= 400:
        raise RuntimeError(
            f"{response.request.method} {response.request.url.path} -> "
            f"{response.status_code}: {response.text[:300]}"
        )
    return response


def features_service(
    url: str,
    data: FeatureData,
    algorithm: str,
    params: dict[str, Any],
    chunk: int,
    budget: float | None = None,
    server: SpawnedServer | None = None,
    path: str = "raw",
) -> RunResult:
    """Bodies encoded beforehand (``raw``: .npz/.npy; ``json``: JSON columns), then timed."""
    import httpx

    sid = f"bench-{uuid.uuid4().hex[:10]}"
    requests = list(_feature_requests(data, algorithm, sid, chunk, path))
    deadline = Deadline(budget)
    with httpx.Client(base_url=url, timeout=3600) as c:
        check(
            c.post(
                "/v1/streams",
                json={
                    "id": sid,
                    "algorithm": algorithm,
                    "params": params,
                    "target": data.y.tolist(),
                },
            )
        )
        try:
            note = start_rss(server)
            sent = 0
            done = 0
            chosen: list[str] = []
            t0 = time.perf_counter()
            for req in requests:
                r = check(c.post(req.path, content=req.body, headers=req.headers))
                sent += req.size
                done += req.items
                chosen = list(r.json()["selected"])
                if deadline.passed():
                    break
            dt = time.perf_counter() - t0
            peak = peak_rss(server)
        finally:
            c.delete(f"/v1/streams/{sid}")
    return service_result(
        data, algorithm, params, done, dt, chosen, sent=sent, peak=peak, note=note, path=path
    )


def start_rss(server: SpawnedServer | None) -> str | None:
    if server is None:
        return "server not spawned: its memory is not measured"
    if not server.reset_peak():
        return "peak RSS since the server started (clear_refs refused)"
    return None


def peak_rss(server: SpawnedServer | None) -> int | None:
    """The spawned server's peak RSS so far (None when no server was spawned)."""
    return server.peak_rss_bytes() if server is not None else None


def service_result(
    data: FeatureData | InstanceData,
    algorithm: str,
    params: dict[str, Any],
    done: int,
    seconds: float,
    chosen: list[str],
    *,
    sent: int,
    peak: int | None,
    note: str | None,
    path: str,
) -> RunResult:
    """A run through the service: ``run_result`` with what the server side measured."""
    return run_result(
        data,
        algorithm,
        "service",
        params,
        done,
        seconds,
        chosen,
        bytes_sent=sent,
        peak_rss_bytes=peak,
        rss_note=note,
        path=path,
    )


def compare(service: RunResult, reference: RunResult) -> None:
    """Fill in the service run's ratio and identity against the in-process run."""
    if service.items == reference.items and reference.seconds > 0:
        service.ratio = service.seconds / reference.seconds
        service.identical = service.selection == reference.selection
    elif reference.rate > 0 and service.rate > 0:
        # Different amounts (a budget ran out): compare costs per item, not selections.
        service.ratio = reference.rate / service.rate


Runner = Callable[[], RunResult]

__all__ = [
    "DENSE_CHUNK_BYTES",
    "FRAME_WINDOW",
    "FSDS_K",
    "FSDS_SKETCH",
    "GROUP_SIZE",
    "NRFS_COMPUTATIONS",
    "NRFS_WINDOW",
    "Deadline",
    "RunResult",
    "check",
    "chunk_bounds",
    "compare",
    "default_params",
    "features_in_process",
    "features_service",
    "run_result",
    "start_rss",
    "window_for",
]
