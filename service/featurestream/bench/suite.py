"""``featurestream bench`` suite: each selector on each data set, in process and through a server.

A service run takes one of three paths (``--path``): ``sdk`` (the default: the
Python SDK, from the data set's own scipy.sparse or numpy objects, encoding
inside the timed span), ``raw`` (bodies and frames encoded beforehand, binary:
.npz/.npy) or ``json`` (JSON columns or frames, encoded beforehand).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from featurestream.bench.datasets import (
    FEATURE_SPECS,
    INSTANCE_SPECS,
    FeatureData,
    InstanceData,
    feature_spec,
    instance_spec,
    make_features,
    make_instances,
)
from featurestream.bench.instance_runs import instances_in_process, instances_service
from featurestream.bench.runs import (
    RunResult,
    compare,
    default_params,
    features_in_process,
    features_service,
    run_result,
    window_for,
)
from featurestream.bench.server import SpawnedServer, check_store, server_env, spawn_server
from featurestream.selectors import REGISTRY
from featurestream.selectors.base import FeatureSelector, InstanceSelector

DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
DATASETS = (*FEATURE_SPECS, *INSTANCE_SPECS)
FEATURE_ALGORITHMS = tuple(n for n, c in REGISTRY.items() if issubclass(c, FeatureSelector))
INSTANCE_ALGORITHMS = tuple(n for n, c in REGISTRY.items() if issubclass(c, InstanceSelector))
PATHS = ("sdk", "raw", "json")
# Selectors that run on some data sets of their kind only. NRFS keeps its window dense
# (window x d values) and one computation on it grows like n^2 d: not at d = 100,000.
# The rough-set selectors learn classes (not the dense set's continuous target) and
# sort n x n distances for every arrival: one binary set, the smallest. OFS-A3M keeps
# most sparse binary columns (its mean dep_set / |S| falls as S grows) and each of its
# passes costs |S| dependencies: `bench roughset` measures it on data of its kind.
ONLY_ON: dict[str, tuple[str, ...]] = {
    "nrfs": ("stream-d1000",),
    "k_ofsd": ("thrombin",),
    "ofs_a3m": (),
    "ofs_density": ("thrombin",),
}

# (dataset, algorithm, mode) -> (the bound, its unit): what the full-size runs are held to.
TARGETS: dict[tuple[str, str, str], tuple[float, str]] = {
    ("dorothea", "saola", "service"): (2.0, "s"),
    ("thrombin", "saola", "service"): (3.0, "s"),
    ("news20", "saola", "service"): (30.0, "s"),
    ("dorothea", "fast_osfs", "service"): (20.0, "s"),
    ("dorothea", "fast_osfs", "in-process"): (20.0, "s"),
    ("dorothea", "alpha_investing", "service"): (5.0, "s"),
    ("dorothea", "alpha_investing", "in-process"): (5.0, "s"),
    ("stream-d100000", "ofs", "service"): (5000.0, "inst/s"),
    ("stream-d100000", "ofs", "in-process"): (5000.0, "inst/s"),
}
RSS_TARGET = 2 << 30  # peak server RSS of SAOLA on news20 through the service
# (dataset, algorithm, path) -> (the bound, its unit): what a full-size service run on
# the user's own path is held to, in place of the service's bound in TARGETS. The SDK
# times its encoding; a feature stream's bounds are for requests of TARGET_CHUNK
# columns (the SDK's default request).
PATH_TARGETS: dict[tuple[str, str, str], tuple[float, str]] = {
    ("dorothea", "saola", "sdk"): (1.0, "s"),
    ("thrombin", "saola", "sdk"): (1.5, "s"),
    ("news20", "saola", "sdk"): (12.0, "s"),
    ("dorothea", "saola", "json"): (1.5, "s"),
    ("stream-d1000", "ofs", "sdk"): (60_000.0, "inst/s"),
    ("stream-d1000", "fsds", "sdk"): (15_000.0, "inst/s"),
}
TARGET_CHUNK = 20_000


def _selected(values: list[str] | None, everything: Sequence[str], quick: bool) -> list[str]:
    if not values:
        return list(everything) if quick else []
    if "all" in values:
        return list(everything)
    return list(dict.fromkeys(values))


def _params_for(params: dict[str, Any], algorithm: str, data: FeatureData | InstanceData) -> Any:
    base = default_params(algorithm, data)
    if params and set(params) <= set(REGISTRY):
        return {**base, **params.get(algorithm, {})}
    return {**base, **params}


@contextlib.contextmanager
def blas_limit(threads: int) -> Iterator[str | None]:
    """Cap this process's BLAS threads like the spawned server's (threadpoolctl, if present)."""
    if threads <= 0:
        yield None
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield "threadpoolctl is not installed: in-process BLAS threads are not capped"
        return
    with threadpool_limits(limits=threads, user_api="blas"):
        yield None


@contextlib.contextmanager
def _server(
    args: argparse.Namespace, wanted: bool = True
) -> Iterator[tuple[str | None, SpawnedServer | None]]:
    if args.skip_service or not wanted:
        yield None, None
    elif args.url:
        yield args.url, None
    else:
        threads = args.server_blas_threads if args.server_blas_threads is not None else 1
        with spawn_server(
            args.store or DEFAULT_REDIS,
            blas_threads=threads if threads > 0 else None,
            env=server_env(args),
        ) as server:
            yield server.url, server


def main_suite(args: argparse.Namespace, params: dict[str, Any]) -> int:
    if not args.skip_service and not args.url:
        check_store(args.store or DEFAULT_REDIS)  # before minutes of data generation
    if args.chunk is None:
        # Small chunks in quick runs, so that every stream spans several requests.
        args.chunk = 1_000 if args.quick else 20_000
    datasets = _selected(args.dataset, DATASETS, args.quick)
    algorithms = _selected(args.algorithm, list(REGISTRY), args.quick)
    if not args.dataset and not args.quick:
        datasets = list(DATASETS)
    if not algorithms:
        algorithms = ["saola", "ofs"]
    log = sys.stderr
    results: list[RunResult] = []
    spawned = False
    load_start = _load()
    if load_start is not None and load_start[0] > (os.cpu_count() or 1):
        print(
            f"warning: load average {load_start[0]:.1f} on {os.cpu_count()} CPUs: "
            "other processes compete with the measurements",
            file=log,
        )
    started = time.perf_counter()
    fresh = args.fresh_server if args.fresh_server is not None else not args.quick
    with blas_limit(args.blas_threads) as blas_note, _server(args, not fresh) as shared:
        if blas_note:
            print(blas_note, file=log)
        for name in datasets:
            feature_set = name in FEATURE_SPECS
            wanted = [
                a
                for a in algorithms
                if a in (FEATURE_ALGORITHMS if feature_set else INSTANCE_ALGORITHMS)
                and name in ONLY_ON.get(a, (name,))
            ]
            if not wanted:
                continue
            t0 = time.perf_counter()
            data: FeatureData | InstanceData = (
                make_features(feature_spec(name, args.quick), args.seed)
                if feature_set
                else make_instances(instance_spec(name, args.quick), args.seed)
            )
            print(f"{name}: generated in {time.perf_counter() - t0:.1f} s", file=log, flush=True)
            for algorithm in wanted:
                if fresh:
                    # A server of its own per run: its peak RSS is this run's alone.
                    with _server(args, True) as (url, server):
                        results += _run_pair(args, url, server, data, algorithm, params, log)
                        spawned = spawned or server is not None
                else:
                    url, server = shared
                    results += _run_pair(args, url, server, data, algorithm, params, log)
                    spawned = spawned or server is not None
    total = time.perf_counter() - started
    for r in results:
        judge(r, args.quick, args.chunk)
    print(render_table(results))
    if args.url and not args.skip_service:
        print("peak RSS: the server was not spawned by the bench, so it is not measured")
    if args.json is not None:
        payload = {
            "meta": {
                "quick": args.quick,
                "seed": args.seed,
                "chunk": args.chunk,
                "path": getattr(args, "path", None) or "sdk",
                "budget_seconds": args.budget,
                "store": None if (args.url or args.skip_service) else (args.store or DEFAULT_REDIS),
                "url_given": bool(args.url),
                "server_spawned": spawned,
                "fresh_server_per_run": fresh,
                "blas_threads": args.blas_threads,
                "python": platform.python_version(),
                "machine": platform.machine(),
                "cpus": os.cpu_count(),
                "total_seconds": total,
                "load_average_start": load_start,
                "load_average_end": _load(),
            },
            "results": [asdict(r) for r in results],
        }
        text = json.dumps(payload, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
    failed = [r for r in results if r.error]
    return 1 if failed else 0


def _load() -> tuple[float, float, float] | None:
    """The 1, 5 and 15 minute load averages (None where the platform has none)."""
    try:
        return os.getloadavg()
    except (AttributeError, OSError):
        return None


def _run_pair(
    args: argparse.Namespace,
    url: str | None,
    server: SpawnedServer | None,
    data: FeatureData | InstanceData,
    algorithm: str,
    params: dict[str, Any],
    log: Any,
) -> list[RunResult]:
    p = _params_for(params, algorithm, data)
    out: list[RunResult] = []
    try:
        if isinstance(data, FeatureData):
            ref = features_in_process(data, algorithm, p, args.chunk, args.budget)
        else:
            ref = instances_in_process(data, algorithm, p, args.budget)
    except Exception as exc:  # reported in the table; the suite goes on
        ref = _failed(data, algorithm, "in-process", p, exc)
    out.append(ref)
    print(_line(ref), file=log, flush=True)
    if url is None:
        return out
    path = getattr(args, "path", None) or "sdk"
    try:
        if isinstance(data, FeatureData):
            if path == "sdk":
                from featurestream.bench.sdk import features_sdk

                svc = features_sdk(url, data, algorithm, p, args.chunk, args.budget, server)
            else:
                svc = features_service(
                    url, data, algorithm, p, args.chunk, args.budget, server, path
                )
        else:
            frames_per_second = ref.rate / data.spec.frame if ref.error is None else None
            window = window_for(frames_per_second)
            if path == "sdk":
                from featurestream.bench.sdk import instances_sdk

                svc = instances_sdk(url, data, algorithm, p, args.budget, server, window)
            else:
                svc = instances_service(url, data, algorithm, p, args.budget, server, window, path)
        if ref.error is None:
            compare(svc, ref)
    except Exception as exc:
        svc = _failed(data, algorithm, "service", p, exc)
        svc.path = path
    out.append(svc)
    print(_line(svc), file=log, flush=True)
    return out


def _failed(
    data: FeatureData | InstanceData,
    algorithm: str,
    mode: str,
    params: dict[str, Any],
    exc: Exception,
) -> RunResult:
    result = run_result(data, algorithm, mode, params, 0, 0.0, [])
    result.complete = False
    result.error = f"{type(exc).__name__}: {exc}"[:500]
    return result


def judge(r: RunResult, quick: bool, chunk: int | None = None) -> None:
    """Attach the target of a full-size run (as ``target`` and ``met`` in the JSON).

    A service run on a path of ``PATH_TARGETS`` is held to that path's bound (a
    feature stream's only when its requests held ``chunk`` = ``TARGET_CHUNK``
    columns); any other run to the service's or the selector's bound in ``TARGETS``.
    """
    bound = None
    path = r.path if r.kind == "instances" or chunk == TARGET_CHUNK else None
    if r.mode == "service" and path is not None:
        bound = PATH_TARGETS.get((r.dataset, r.algorithm, path))
    if bound is None:
        bound = TARGETS.get((r.dataset, r.algorithm, r.mode))
    if quick or bound is None or r.error or not r.complete:
        return
    value, unit = bound
    met = r.seconds <= value if unit == "s" else r.rate >= value
    if r.dataset == "news20" and r.mode == "service" and r.peak_rss_bytes is not None:
        met = met and r.peak_rss_bytes < RSS_TARGET
    r.target = f"{'<=' if unit == 's' else '>='} {value:g} {unit}"
    r.met = met


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _mode(r: RunResult) -> str:
    """``in-process``, or ``service/<path>`` (sdk, raw or json)."""
    return r.mode if r.path is None else f"{r.mode}/{r.path}"


def _line(r: RunResult) -> str:
    if r.error:
        return f"  {r.dataset} {r.algorithm} {_mode(r)}: ERROR {r.error}"
    unit = "cols" if r.kind == "features" else "inst"
    done = "" if r.complete else f" (stopped at {r.items} of {r.planned})"
    return (
        f"  {r.dataset} {r.algorithm} {_mode(r)}: {r.seconds:.2f} s, {r.rate:,.0f} {unit}/s, "
        f"{r.selected} selected, recall {r.recall:.2f}{done}"
    )


def render_table(results: Sequence[RunResult]) -> str:
    head = (
        f"{'dataset':<15}{'algorithm':<16}{'mode':<13}{'items':>10}{'seconds':>9}"
        f"{'items/s':>11}{'peak RSS':>11}{'sent':>11}{'ratio':>7}{'sel':>6}{'recall':>7}"
        f"{'same':>6}  target"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        if r.error:
            lines.append(f"{r.dataset:<15}{r.algorithm:<16}{_mode(r):<13}  ERROR {r.error[:80]}")
            continue
        items = f"{r.items}" + ("" if r.complete else "*")
        same = "" if r.identical is None else ("yes" if r.identical else "NO")
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}"
        verdict = "" if r.target is None else f"{r.target} {'met' if r.met else 'MISSED'}"
        lines.append(
            f"{r.dataset:<15}{r.algorithm:<16}{_mode(r):<13}{items:>10}{r.seconds:>9.2f}"
            f"{r.rate:>11,.0f}{_fmt_bytes(r.peak_rss_bytes):>11}{_fmt_bytes(r.bytes_sent):>11}"
            f"{ratio:>7}{r.selected:>6}{r.recall:>7.2f}{same:>6}  {verdict}"
        )
    if any(not r.complete and not r.error for r in results):
        lines.append("* stopped when the --budget ran out (rates cover what was applied)")
    return "\n".join(lines)


__all__ = [
    "DATASETS",
    "DEFAULT_REDIS",
    "ONLY_ON",
    "PATHS",
    "PATH_TARGETS",
    "TARGETS",
    "TARGET_CHUNK",
    "blas_limit",
    "judge",
    "main_suite",
    "render_table",
]
