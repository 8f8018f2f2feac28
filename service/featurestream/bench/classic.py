"""The first ``featurestream bench`` modes: one selector, one synthetic set, repeated.

Feature streams (``--mode features``, the default): generates a synthetic
dataset with planted relevant and redundant features, then times (1) the
selector in process and (2) the same stream posted to a server (one it spawns
on the embedded or a Redis store, or ``--url``), and prints a table (or JSON
with ``--json``). Decisions of both runs are compared.

Instance streams (``--mode instances``, OFS or FSDS): streams ``--instances``
rows of dimension ``--dim`` over one WebSocket as binary .npy frames of
``--frame`` instances (labels in the last column for OFS), pipelined (the
client sends without waiting for acks; the server's in-flight bound applies),
and times from the first frame sent to the last ack received: every ack means
the frame is committed to the store. The in-process run applies the same
frames to the selector. ``--server-blas-threads`` limits the BLAS threads of
the spawned server (FSDS's SVD is much slower with OpenBLAS threads competing
for two cores).
"""

from __future__ import annotations

import argparse
import io
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream.bench.instance_runs import stream_frames
from featurestream.bench.server import spawn_server
from featurestream.selectors import REGISTRY
from featurestream.selectors.base import FeatureSelector, InstanceSelector


@dataclass
class Dataset:
    X: npt.NDArray[np.float64]  # feature-major (b, n)
    y: npt.NDArray[np.float64]
    names: list[str]
    relevant: list[str]


def synthetic_features(columns: int, rows: int, seed: int = 0, relevant: int = 10) -> Dataset:
    """Continuous columns: ``relevant`` planted signals, a noisy copy of each, noise."""
    rng = np.random.default_rng(seed)
    signals = rng.normal(size=(relevant, rows))
    y = signals.sum(axis=0) + 0.5 * rng.normal(size=rows)
    X = rng.normal(size=(columns, rows))
    slots = rng.choice(columns, size=2 * relevant, replace=False)
    for k in range(relevant):
        X[slots[k]] = signals[k]
        X[slots[relevant + k]] = signals[k] + 0.3 * rng.normal(size=rows)
    names = [f"f{i}" for i in range(columns)]
    return Dataset(X, y, names, [names[s] for s in slots[:relevant]])


@dataclass
class Result:
    algorithm: str
    mode: str
    columns: int
    rows: int
    seconds: float
    columns_per_second: float
    selected: int
    recall: float
    bytes_sent: int = 0


def _recall(selected: Sequence[str], relevant: Sequence[str], data: Dataset) -> float:
    # A planted signal counts as found when it or its noisy copy is selected.
    index = {n: i for i, n in enumerate(data.names)}
    found = 0
    for r in relevant:
        copy_corr = [abs(np.corrcoef(data.X[index[r]], data.X[index[s]])[0, 1]) for s in selected]
        found += any(c > 0.9 for c in copy_corr)
    return found / max(1, len(relevant))


def run_in_process(algorithm: str, params: dict[str, Any], data: Dataset) -> Result:
    cls = REGISTRY[algorithm]
    assert issubclass(cls, FeatureSelector)
    sel = cls.start(cls.params_type.from_mapping(params), data.y)
    t0 = time.perf_counter()
    sel.learn_features(data.names, data.X)
    dt = time.perf_counter() - t0
    chosen = sel.selected()
    b, n = data.X.shape
    return Result(
        algorithm, "in-process", b, n, dt, b / dt, len(chosen), _recall(chosen, data.relevant, data)
    )


def run_service(url: str, algorithm: str, params: dict[str, Any], data: Dataset) -> Result:
    import httpx

    sid = f"bench-{uuid.uuid4().hex[:8]}"
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(data.X.T))
    body = buf.getvalue()
    with httpx.Client(base_url=url, timeout=600) as c:
        r = c.post(
            "/v1/streams",
            json={"id": sid, "algorithm": algorithm, "params": params, "target": data.y.tolist()},
        )
        r.raise_for_status()
        t0 = time.perf_counter()
        r = c.post(
            f"/v1/streams/{sid}/features",
            content=body,
            headers={"content-type": "application/x-npy", "X-Feature-Names": ",".join(data.names)},
        )
        dt = time.perf_counter() - t0
        r.raise_for_status()
        chosen = r.json()["selected"]
        c.delete(f"/v1/streams/{sid}")
    b, n = data.X.shape
    return Result(
        algorithm,
        "service",
        b,
        n,
        dt,
        b / dt,
        len(chosen),
        _recall(chosen, data.relevant, data),
        len(body),
    )


# --------------------------------------------------------------------------- instance streams


@dataclass
class InstanceData:
    X: npt.NDArray[np.float64]  # (n, d)
    y: npt.NDArray[np.float64]  # labels in {-1, +1}
    names: list[str]
    relevant: list[str]


def synthetic_instances(
    n: int, d: int, seed: int = 0, relevant: int = 10, dtype: str = "float64"
) -> InstanceData:
    """Gaussian rows; the label is the sign of a sum over ``relevant`` planted features.

    With ``dtype="float32"`` the values are float32-exact, so frames sent as
    float32 carry exactly the data the in-process run sees.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype).astype(np.float64)
    slots = rng.choice(d, size=relevant, replace=False)
    y = np.where(X[:, slots].sum(axis=1) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    names = [f"x{i}" for i in range(d)]
    return InstanceData(X, y, names, [names[s] for s in slots])


@dataclass
class InstanceResult:
    algorithm: str
    mode: str
    instances: int
    dim: int
    frame: int
    seconds: float
    instances_per_second: float
    frames_per_second: float
    selected: int
    recall: float
    same_selection: bool | None = None


def _frames(
    data: InstanceData, frame: int, supervised: bool, dtype: str = "float64"
) -> list[npt.NDArray[Any]]:
    A = np.column_stack([data.X, data.y]) if supervised else data.X
    return [
        np.ascontiguousarray(A[i : i + frame], dtype=dtype) for i in range(0, A.shape[0], frame)
    ]


def _instance_recall(selected: Sequence[str], data: InstanceData) -> float:
    return len(set(selected) & set(data.relevant)) / max(1, len(data.relevant))


def run_instances_in_process(
    algorithm: str, params: dict[str, Any], data: InstanceData, frame: int
) -> tuple[InstanceResult, list[str]]:
    cls = REGISTRY[algorithm]
    assert issubclass(cls, InstanceSelector)
    sel = cls.start(cls.params_type.from_mapping(params), data.names)
    frames = _frames(data, frame, cls.supervised)
    t0 = time.perf_counter()
    for A in frames:
        if cls.supervised:
            sel.learn_instances(A[:, :-1], A[:, -1])
        else:
            sel.learn_instances(A)
    dt = time.perf_counter() - t0
    chosen = list(sel.selected())
    n, d = data.X.shape
    result = InstanceResult(
        algorithm,
        "in-process",
        n,
        d,
        frame,
        dt,
        n / dt,
        len(frames) / dt,
        len(chosen),
        _instance_recall(chosen, data),
    )
    return result, chosen


def run_instances_ws(
    url: str,
    algorithm: str,
    params: dict[str, Any],
    data: InstanceData,
    frame: int,
    reference: list[str] | None = None,
    dtype: str = "float64",
) -> InstanceResult:
    """Stream every frame over one WebSocket, pipelined; time until the last ack."""
    import httpx

    cls = REGISTRY[algorithm]
    assert issubclass(cls, InstanceSelector)
    sid = f"bench-{uuid.uuid4().hex[:8]}"
    payloads = []
    for A in _frames(data, frame, cls.supervised, dtype):
        buf = io.BytesIO()
        np.save(buf, A)
        payloads.append(buf.getvalue())
    with httpx.Client(base_url=url, timeout=600) as c:
        r = c.post(
            "/v1/streams",
            json={"id": sid, "algorithm": algorithm, "params": params, "feature_names": data.names},
        )
        r.raise_for_status()
        # One window of every frame: the whole stream pipelined, as before.
        _, dt, _ = stream_frames(url, sid, payloads, window=max(1, len(payloads)))
        chosen = [f["name"] for f in c.get(f"/v1/streams/{sid}/selected").json()["features"]]
        c.delete(f"/v1/streams/{sid}")
    n, d = data.X.shape
    return InstanceResult(
        algorithm,
        "websocket",
        n,
        d,
        frame,
        dt,
        n / dt,
        len(payloads) / dt,
        len(chosen),
        _instance_recall(chosen, data),
        None if reference is None else chosen == reference,
    )


def main_instances(args: argparse.Namespace, params: dict[str, Any]) -> int:
    """``--mode instances``: OFS or FSDS over one WebSocket, against in process."""
    data = synthetic_instances(args.instances, args.dim, dtype=args.dtype)
    runs = [
        run_instances_in_process(args.algorithm, params, data, args.frame)
        for _ in range(args.repeat)
    ]
    results = [r for r, _ in runs]
    reference = runs[0][1]

    def over(url: str) -> list[InstanceResult]:
        return [
            run_instances_ws(url, args.algorithm, params, data, args.frame, reference, args.dtype)
            for _ in range(args.repeat)
        ]

    if args.skip_service:
        pass
    elif args.url:
        results += over(args.url)
    else:
        with spawn_server(args.store, blas_threads=args.server_blas_threads) as server:
            results += over(server.url)
    if args.json is not None:
        _emit_json([asdict(r) for r in results], args.json)
        return 0
    print(
        f"{'algorithm':<10}{'mode':<12}{'instances':>10}{'dim':>6}{'frame':>6}{'seconds':>9}"
        f"{'inst/s':>10}{'frames/s':>10}{'selected':>9}{'recall':>7}{'same':>6}"
    )
    for r in results:
        same = "" if r.same_selection is None else ("yes" if r.same_selection else "no")
        print(
            f"{r.algorithm:<10}{r.mode:<12}{r.instances:>10}{r.dim:>6}{r.frame:>6}"
            f"{r.seconds:>9.3f}{r.instances_per_second:>10.0f}{r.frames_per_second:>10.1f}"
            f"{r.selected:>9}{r.recall:>7.2f}{same:>6}"
        )
    return 0


def main_features(args: argparse.Namespace, params: dict[str, Any]) -> int:
    """``--mode features``: one npy request of every column, against in process."""
    data = synthetic_features(args.columns, args.rows)
    results = [run_in_process(args.algorithm, params, data) for _ in range(args.repeat)]
    if args.skip_service:
        pass
    elif args.url:
        results += [run_service(args.url, args.algorithm, params, data) for _ in range(args.repeat)]
    else:
        with spawn_server(args.store, blas_threads=args.server_blas_threads) as server:
            results += [
                run_service(server.url, args.algorithm, params, data) for _ in range(args.repeat)
            ]
    if args.json is not None:
        _emit_json([asdict(r) for r in results], args.json)
        return 0
    print(
        f"{'algorithm':<16}{'mode':<12}{'columns':>8}{'rows':>6}{'seconds':>10}"
        f"{'cols/s':>12}{'selected':>9}{'recall':>8}"
    )
    for r in results:
        print(
            f"{r.algorithm:<16}{r.mode:<12}{r.columns:>8}{r.rows:>6}{r.seconds:>10.3f}"
            f"{r.columns_per_second:>12.0f}{r.selected:>9}{r.recall:>8.2f}"
        )
    return 0


def _emit_json(payload: Any, target: str) -> None:
    """``--json`` alone prints to stdout (as it always did); ``--json PATH`` writes a file."""
    text = json.dumps(payload, indent=2)
    if target == "-":
        print(text)
    else:
        with open(target, "w", encoding="utf-8") as f:
            f.write(text + "\n")


__all__ = ["main_features", "main_instances", "synthetic_features", "synthetic_instances"]
