"""``featurestream bench``: measure selectors in process and through the service.

Generates a synthetic dataset with planted relevant and redundant features,
then times (1) the selector in process and (2) the same stream posted to a
server (one it spawns on the embedded or a Redis store, or ``--url``), and
prints a table (or JSON with ``--json``). Decisions of both runs are compared.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream.selectors import REGISTRY
from featurestream.selectors.base import FeatureSelector


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def spawned_server(store: str) -> Iterator[str]:
    import httpx

    port = _free_port()
    env = {**os.environ, "FEATURESTREAM_KEY_PREFIX": f"fsbench-{uuid.uuid4().hex[:8]}"}
    cmd = [
        sys.executable,
        "-m",
        "featurestream",
        "serve",
        "--port",
        str(port),
        "--store",
        store,
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(cmd, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the benchmark server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(15)


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="featurestream bench", description=__doc__)
    parser.add_argument("--algorithm", default="saola", choices=sorted(REGISTRY))
    parser.add_argument("--params", default="{}", help="JSON params of the algorithm")
    parser.add_argument("--columns", type=int, default=5000)
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--store", default="memory://", help="store of the spawned server")
    parser.add_argument("--url", help="an already running server (no server is spawned)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    params = json.loads(args.params)
    data = synthetic_features(args.columns, args.rows)
    results = [run_in_process(args.algorithm, params, data) for _ in range(args.repeat)]
    if args.url:
        results += [run_service(args.url, args.algorithm, params, data) for _ in range(args.repeat)]
    else:
        with spawned_server(args.store) as url:
            results += [run_service(url, args.algorithm, params, data) for _ in range(args.repeat)]
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
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


if __name__ == "__main__":
    raise SystemExit(main())
