"""``featurestream bench``: argument parsing and the paper-scale suite."""

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

from featurestream.bench import classic, scaling
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
from featurestream.bench.runs import (
    RunResult,
    compare,
    default_params,
    features_in_process,
    features_service,
    instances_in_process,
    instances_service,
    run_result,
    window_for,
)
from featurestream.bench.server import SpawnedServer, spawn_server
from featurestream.selectors import REGISTRY
from featurestream.selectors.base import FeatureSelector, InstanceSelector

DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
DATASETS = (*FEATURE_SPECS, *INSTANCE_SPECS)
FEATURE_ALGORITHMS = tuple(n for n, c in REGISTRY.items() if issubclass(c, FeatureSelector))
INSTANCE_ALGORITHMS = tuple(n for n, c in REGISTRY.items() if issubclass(c, InstanceSelector))

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


DESCRIPTION = """\
Measure selectors in process and through the service.

Suite (--dataset / --quick): synthetic data sets shaped like those of the SAOLA
paper (dorothea, thrombin, news20, dense; instance streams stream-d1000 and
stream-d100000), with planted relevant and redundant features. Each selected
algorithm runs on each data set of its kind, in process and end to end through
a server (spawned on --store, by default Redis at redis://127.0.0.1:6379/0
with a fresh key prefix, unless --url names one). Feature streams are posted
in chunks of --chunk columns (application/x-npz for sparse sets), instance
streams as pipelined .npy WebSocket frames. Reports wall time, columns or
instances per second, peak server RSS, bytes sent, the service / in-process
ratio, the selected count, the planted recall, and whether both selections are
identical.

Scaling (`featurestream bench scaling` or --scaling): cost per column against
n and |S| (SAOLA, OSFS, Fast-OSFS, Alpha-investing, Grafting) and per instance
against d (OFS, FSDS), in process; plots to --plot when matplotlib is
installed.

Latency (`featurestream bench latency`): GET /selected at --rate requests per
second for --seconds while another process streams OFS frames into the same
stream; prints the read latency percentiles (measured from each read's
scheduled time) and the write rate.

Without --dataset, --quick or --scaling: the original single-run modes
(--mode features|instances, --columns, --rows, --repeat, ...).
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="featurestream bench",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--mode",
        choices=["features", "instances"],
        default="features",
        help="single-run mode: feature streams (one npy request) or instance streams",
    )
    p.add_argument(
        "--algorithm",
        action="append",
        metavar="NAME",
        help=f"repeatable, or 'all' (suite); one of {', '.join(sorted(REGISTRY))}",
    )
    p.add_argument(
        "--dataset",
        action="append",
        metavar="NAME",
        help=f"suite: repeatable, or 'all'; one of {', '.join(DATASETS)}",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="suite: small versions of every data set and selector (under a minute)",
    )
    p.add_argument("--scaling", action="store_true", help="cost against n, |S| and d")
    p.add_argument(
        "--params",
        default="{}",
        help="JSON params, for every algorithm or keyed by algorithm name",
    )
    p.add_argument(
        "--chunk",
        type=int,
        default=None,
        help="suite: columns per request (default 20,000; 1,000 with --quick)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=600.0,
        help="suite: seconds per run; a run stops after the chunk that passes it",
    )
    p.add_argument("--seed", type=int, default=0, help="suite: data seed")
    p.add_argument("--skip-service", action="store_true", help="in-process runs only (no server)")
    p.add_argument(
        "--fresh-server",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="suite: spawn a server per run, so each peak RSS is that run's alone "
        "(default: yes, except with --quick)",
    )
    p.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="BLAS threads of in-process runs (needs threadpoolctl; 0: leave as is)",
    )
    p.add_argument("--plot", default="docs/img/scaling.png", help="scaling: PNG path")
    p.add_argument("--columns", type=int, default=5000, help="single-run features: columns")
    p.add_argument("--rows", type=int, default=400, help="single-run features: rows")
    p.add_argument(
        "--repeat",
        type=int,
        help="single-run modes: repetitions (default 3); latency: runs, one server "
        "(default 1; with more, the spread of p99 is printed too)",
    )
    p.add_argument(
        "--store",
        help=f"store of the spawned server (suite: {DEFAULT_REDIS}; single-run: memory://)",
    )
    p.add_argument("--url", help="an already running server (no server is spawned)")
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="write the results as JSON to PATH (alone: print JSON instead of the table)",
    )
    p.add_argument(
        "--rate", type=float, default=200.0, help="latency: GET /selected requests per second"
    )
    p.add_argument("--seconds", type=float, default=10.0, help="latency: seconds of reads")
    p.add_argument(
        "--write-rate",
        type=float,
        default=20_000.0,
        help="latency: instances per second the writer sends (0: as fast as acknowledged)",
    )
    p.add_argument("--instances", type=int, default=100_000, help="instances mode: rows")
    p.add_argument("--dim", type=int, default=1000, help="instances mode: features d")
    p.add_argument("--frame", type=int, default=100, help="instances mode: rows per frame")
    p.add_argument(
        "--dtype",
        choices=["float64", "float32"],
        default="float64",
        help="instances mode: dtype of the .npy frames (float32 data is float32-exact)",
    )
    p.add_argument(
        "--server-blas-threads",
        type=int,
        default=None,
        help="BLAS threads of the spawned server (suite default 1; 0: leave as is)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["ofs-kernel"]:
        from featurestream.bench import ofs_kernel

        return ofs_kernel.main(args_in[1:])
    scaling_cmd = args_in[:1] == ["scaling"]
    latency_cmd = args_in[:1] == ["latency"]
    parser = build_parser()
    args = parser.parse_args(args_in[1:] if scaling_cmd or latency_cmd else args_in)
    try:
        params = json.loads(args.params)
    except json.JSONDecodeError:
        parser.error("--params must be a JSON object")
    if not isinstance(params, dict):
        parser.error("--params must be a JSON object")
    algorithms = args.algorithm or []
    for name in algorithms:
        if name != "all" and name not in REGISTRY:
            parser.error(f"unknown algorithm {name!r}; expected one of {sorted(REGISTRY)}")
    for name in args.dataset or []:
        if name != "all" and name not in DATASETS:
            parser.error(f"unknown dataset {name!r}; expected one of {list(DATASETS)}")
    if args.repeat is None:
        args.repeat = 1 if latency_cmd else 3
    elif args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if latency_cmd:
        return _main_latency(args)
    if scaling_cmd or args.scaling:
        with _blas_limit(args.blas_threads):
            return _main_scaling(args)
    if args.dataset or args.quick:
        return _main_suite(args, params)
    return _main_classic(parser, args, params)


# --------------------------------------------------------------------------- read latency


def _main_latency(args: argparse.Namespace) -> int:
    from featurestream.bench import latency

    store = args.store or DEFAULT_REDIS

    def runs(url: str, label: str) -> list[latency.LatencyResult]:
        return [
            latency.measure(url, label, args.rate, args.seconds, args.write_rate)
            for _ in range(args.repeat)
        ]

    if args.url:
        results = runs(args.url, "given server")
    else:
        threads = args.server_blas_threads if args.server_blas_threads is not None else 1
        with spawn_server(store, blas_threads=threads if threads > 0 else None) as server:
            results = runs(server.url, store)
    print(latency.report_runs(results, args.json is not None))
    return 0


# --------------------------------------------------------------------------- single runs


def _main_classic(
    parser: argparse.ArgumentParser, args: argparse.Namespace, params: dict[str, Any]
) -> int:
    names = args.algorithm or ["saola"]
    if len(names) != 1 or names[0] == "all":
        parser.error("the single-run modes take one --algorithm (use --dataset for a suite)")
    args.algorithm = names[0]
    args.store = args.store or "memory://"
    if args.server_blas_threads == 0:
        args.server_blas_threads = None
    if args.mode == "instances":
        if args.algorithm == "saola":
            args.algorithm = "ofs"
        cls = REGISTRY[args.algorithm]
        if not issubclass(cls, InstanceSelector):
            parser.error(f"--mode instances needs an instance-stream algorithm, not {cls.name}")
        params = {"num_features": 10, **params}
        with _blas_limit(args.blas_threads):
            return classic.main_instances(args, params)
    if not issubclass(REGISTRY[args.algorithm], FeatureSelector):
        parser.error("--mode features needs a feature-stream algorithm")
    with _blas_limit(args.blas_threads):
        return classic.main_features(args, params)


# --------------------------------------------------------------------------- suite


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
def _blas_limit(threads: int) -> Iterator[str | None]:
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
            args.store or DEFAULT_REDIS, blas_threads=threads if threads > 0 else None
        ) as server:
            yield server.url, server


def _main_suite(args: argparse.Namespace, params: dict[str, Any]) -> int:
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
    with _blas_limit(args.blas_threads) as blas_note, _server(args, not fresh) as shared:
        if blas_note:
            print(blas_note, file=log)
        for name in datasets:
            feature_set = name in FEATURE_SPECS
            wanted = [
                a
                for a in algorithms
                if a in (FEATURE_ALGORITHMS if feature_set else INSTANCE_ALGORITHMS)
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
        _judge(r, args.quick)
    print(render_table(results))
    if args.url and not args.skip_service:
        print("peak RSS: the server was not spawned by the bench, so it is not measured")
    if args.json is not None:
        payload = {
            "meta": {
                "quick": args.quick,
                "seed": args.seed,
                "chunk": args.chunk,
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
    try:
        if isinstance(data, FeatureData):
            svc = features_service(url, data, algorithm, p, args.chunk, args.budget, server)
        else:
            frames_per_second = ref.rate / data.spec.frame if ref.error is None else None
            svc = instances_service(
                url, data, algorithm, p, args.budget, server, window_for(frames_per_second)
            )
        if ref.error is None:
            compare(svc, ref)
    except Exception as exc:
        svc = _failed(data, algorithm, "service", p, exc)
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


def _judge(r: RunResult, quick: bool) -> None:
    """Attach the target of a full-size run (as ``target`` and ``met`` in the JSON)."""
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


def _line(r: RunResult) -> str:
    if r.error:
        return f"  {r.dataset} {r.algorithm} {r.mode}: ERROR {r.error}"
    unit = "cols" if r.kind == "features" else "inst"
    done = "" if r.complete else f" (stopped at {r.items} of {r.planned})"
    return (
        f"  {r.dataset} {r.algorithm} {r.mode}: {r.seconds:.2f} s, {r.rate:,.0f} {unit}/s, "
        f"{r.selected} selected, recall {r.recall:.2f}{done}"
    )


def render_table(results: Sequence[RunResult]) -> str:
    head = (
        f"{'dataset':<15}{'algorithm':<16}{'mode':<11}{'items':>10}{'seconds':>9}"
        f"{'items/s':>11}{'peak RSS':>11}{'sent':>11}{'ratio':>7}{'sel':>6}{'recall':>7}"
        f"{'same':>6}  target"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        if r.error:
            lines.append(f"{r.dataset:<15}{r.algorithm:<16}{r.mode:<11}  ERROR {r.error[:80]}")
            continue
        items = f"{r.items}" + ("" if r.complete else "*")
        same = "" if r.identical is None else ("yes" if r.identical else "NO")
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}"
        verdict = "" if r.target is None else f"{r.target} {'met' if r.met else 'MISSED'}"
        lines.append(
            f"{r.dataset:<15}{r.algorithm:<16}{r.mode:<11}{items:>10}{r.seconds:>9.2f}"
            f"{r.rate:>11,.0f}{_fmt_bytes(r.peak_rss_bytes):>11}{_fmt_bytes(r.bytes_sent):>11}"
            f"{ratio:>7}{r.selected:>6}{r.recall:>7.2f}{same:>6}  {verdict}"
        )
    if any(not r.complete and not r.error for r in results):
        lines.append("* stopped when the --budget ran out (rates cover what was applied)")
    return "\n".join(lines)


# --------------------------------------------------------------------------- scaling


def _main_scaling(args: argparse.Namespace) -> int:
    grid = scaling.Grid.quick() if args.quick else scaling.Grid.full()
    feature = [a for a in scaling.FEATURE_ALGORITHMS if _wanted(args.algorithm, a)]
    instance = [a for a in scaling.INSTANCE_ALGORITHMS if _wanted(args.algorithm, a)]
    points = scaling.run_scaling(grid, feature, instance, log=sys.stderr)
    print(scaling.table(points))
    if scaling.plot(points, Path(args.plot)):
        print(f"plot written to {args.plot}")
    else:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
    if args.json is not None:
        text = json.dumps({"points": [asdict(p) for p in points]}, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0


def _wanted(chosen: list[str] | None, algorithm: str) -> bool:
    return not chosen or "all" in chosen or algorithm in chosen


__all__ = ["TARGETS", "build_parser", "main", "render_table"]
