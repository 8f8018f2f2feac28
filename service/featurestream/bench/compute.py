"""``featurestream bench compute``: what compute workers buy, as ratios of one run.

* **cores**: 8 FSDS streams (d = 1,000, sketch 20, k 10) written at once in
  frames of 100 rows (``.npy`` over HTTP, one writer thread per stream):
  instances per second with 2 compute workers over the same with 1;
* **reads**: ``GET /selected`` of another stream at a steady rate, while the
  same writes run, against the same reads on the idle server: p99 busy over
  p99 idle, on the default compute workers and on ``--compute-workers 0``.

Each configuration has a fresh server; ``--repeat`` runs give min, median and
max. The writes are prepared before the clock starts, so the writers cost
little of the machine the server runs on.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

from featurestream.bench.server import spawn_server

NPY = {"content-type": "application/x-npy"}
FSDS = {"num_features": 10, "sketch_size": 20, "k": 10}


def _frames(count: int, rows: int, d: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        buf = io.BytesIO()
        np.save(buf, rng.normal(size=(rows, d)))
        out.append(buf.getvalue())
    return out


def _create(c: Any, sid: str, d: int) -> None:
    body = {
        "id": sid,
        "algorithm": "fsds",
        "params": FSDS,
        "feature_names": [f"f{i}" for i in range(d)],
    }
    r = c.post("/v1/streams", json=body)
    r.raise_for_status()


def _write_all(url: str, streams: list[str], frames: list[bytes]) -> float:
    """Every stream gets every frame, one writer thread per stream; the seconds it took."""
    import httpx

    errors: list[str] = []

    def writer(sid: str) -> None:
        with httpx.Client(base_url=url, timeout=120) as c:
            for body in frames:
                r = c.post(f"/v1/streams/{sid}/instances", content=body, headers=NPY)
                if r.status_code != 200:
                    errors.append(r.text[:200])
                    return

    threads = [threading.Thread(target=writer, args=(sid,)) for sid in streams]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"featurestream bench compute: a write failed: {errors[0]}")
    return time.perf_counter() - start


def _reads(url: str, sid: str, rate: float, stop: threading.Event, out: list[float]) -> None:
    """``GET /selected`` at ``rate`` per second until ``stop``; latencies into ``out``."""
    import httpx

    with httpx.Client(base_url=url, timeout=30) as c:
        due = time.perf_counter()
        while not stop.is_set():
            due += 1.0 / rate
            t = time.perf_counter()
            c.get(f"/v1/streams/{sid}/selected").raise_for_status()
            out.append(time.perf_counter() - t)
            time.sleep(max(0.0, due - time.perf_counter()))


def _p99(values: list[float]) -> float:
    return float(np.percentile(values, 99)) if values else float("nan")


def run_once(
    store: str, workers: int, *, streams: int, frames: int, d: int, read_rate: float
) -> dict[str, float]:
    """One server with ``workers`` compute workers: write rate, idle and busy read p99."""
    import httpx

    data = _frames(frames, 100, d, seed=workers)
    env = {"FEATURESTREAM_COMPUTE_WORKERS": str(workers)}
    with spawn_server(store, env=env) as server, httpx.Client(base_url=server.url) as c:
        tag = uuid.uuid4().hex[:8]
        ids = [f"cores-{tag}-{i}" for i in range(streams)]
        for sid in [*ids, f"read-{tag}"]:
            _create(c, sid, d)
        # Every worker has started and holds its streams' states before the clock starts.
        for sid in ids:
            c.post(f"/v1/streams/{sid}/instances", content=data[0], headers=NPY).raise_for_status()
        idle: list[float] = []
        stop = threading.Event()
        reader = threading.Thread(
            target=_reads, args=(server.url, f"read-{tag}", read_rate, stop, idle)
        )
        reader.start()
        time.sleep(3.0)
        stop.set()
        reader.join()
        busy: list[float] = []
        stop = threading.Event()
        reader = threading.Thread(
            target=_reads, args=(server.url, f"read-{tag}", read_rate, stop, busy)
        )
        reader.start()
        seconds = _write_all(server.url, ids, data)
        stop.set()
        reader.join()
    return {
        "instances_per_second": streams * frames * 100 / seconds,
        "idle_p99_ms": 1000 * _p99(idle),
        "busy_p99_ms": 1000 * _p99(busy),
    }


def _spread(values: Sequence[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="featurestream bench compute", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--store", default="memory://", help="memory:// (default) or redis://...")
    p.add_argument("--repeat", type=int, default=3, help="runs of each configuration")
    p.add_argument("--streams", type=int, default=8)
    p.add_argument("--frames", type=int, default=40, help="frames of 100 rows per stream")
    p.add_argument("--dim", type=int, default=1000)
    p.add_argument("--read-rate", type=float, default=200.0, help="GET /selected per second")
    p.add_argument("--json", action="store_true", help="print the runs as JSON")
    args = p.parse_args(argv)
    if args.repeat < 1 or args.streams < 1 or args.frames < 2:
        p.error("--repeat and --streams must be at least 1, --frames at least 2")
    runs: dict[int, list[dict[str, float]]] = {0: [], 1: [], 2: []}
    for _ in range(args.repeat):
        for workers in runs:
            runs[workers].append(
                run_once(
                    args.store, workers, streams=args.streams, frames=args.frames,
                    d=args.dim, read_rate=args.read_rate,
                )
            )  # fmt: skip
    cores = [
        b["instances_per_second"] / a["instances_per_second"]
        for a, b in zip(runs[1], runs[2], strict=True)
    ]
    rows = {
        "instances/s, 2 workers over 1": cores,
        **{
            f"read p99 busy over idle, {w} workers": [
                r["busy_p99_ms"] / r["idle_p99_ms"] for r in runs[w]
            ]
            for w in runs
        },
    }
    if args.json:
        print(json.dumps({"runs": {str(w): r for w, r in runs.items()}, "ratios": rows}, indent=2))
        return 0
    print(f"{args.streams} FSDS streams, d = {args.dim}, {args.frames} frames of 100 rows each, "
          f"store {args.store}; min / median / max of {args.repeat} runs")  # fmt: skip
    for name, values in rows.items():
        print(f"  {name:<40} {_spread(values)}")
    for w, rs in runs.items():
        rate = [r["instances_per_second"] for r in rs]
        idle = [r["idle_p99_ms"] for r in rs]
        busy = [r["busy_p99_ms"] for r in rs]
        print(
            f"  {w} workers: instances/s {_spread(rate)}; read p99 ms idle "
            f"{_spread(idle)}, busy {_spread(busy)}"
        )
    return 0


__all__ = ["main", "run_once"]
