"""``featurestream bench``: argument parsing, and which run each subcommand starts."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from featurestream.bench import classic, scaling
from featurestream.bench.server import server_env, spawn_server
from featurestream.bench.suite import (
    DATASETS,
    DEFAULT_REDIS,
    TARGETS,
    blas_limit,
    main_suite,
    render_table,
)
from featurestream.bench.suite import judge as suite_judge
from featurestream.selectors import REGISTRY
from featurestream.selectors.base import FeatureSelector, InstanceSelector

DESCRIPTION = """\
Measure selectors in process and through the service.

Suite (--dataset / --quick): synthetic data sets shaped like those of the SAOLA
paper (dorothea, thrombin, news20, dense; instance streams stream-d1000 and
stream-d100000), with planted relevant and redundant features. Each selected
algorithm runs on each data set of its kind, in process and end to end through
a server (spawned on --store, by default Redis at redis://127.0.0.1:6379/0
with a fresh key prefix, unless --url names one). Service runs go the way a
user's data goes (--path sdk, the default): the Python SDK gets the data set's
own scipy.sparse or numpy objects (add_features in requests of --chunk
columns, stream_instances over a WebSocket), encoding timed. --path raw sends
bodies and frames encoded beforehand (application/x-npz for sparse sets,
.npy otherwise; encoding not timed), --path json JSON columns (indices/data)
or frames encoded beforehand. Reports wall time, columns or
instances per second, peak server RSS, bytes sent, the service / in-process
ratio, the selected count, the planted recall, and whether both selections are
identical.

Scaling (`featurestream bench scaling` or --scaling): cost per column against
n and |S| (SAOLA, OSFS, Fast-OSFS, Alpha-investing, Grafting), per instance
against d (OFS, FSDS, FIRES), and the time of one NRFS computation against
its window n and against m, in process; plots to --plot when matplotlib is
installed.

Latency (`featurestream bench latency`): GET /selected at --rate requests per
second for --seconds while another process writes into the same stream (OFS
frames, or with --ingest features SAOLA columns of a dorothea-like set) by
--writer raw, sdk, json or websockets; prints the read latency percentiles
(measured from each read's scheduled time) and the write rate, then those of
the same reads once the writer has stopped (--idle-seconds), the floor without
the load.

In-process kernels: `featurestream bench ofs-kernel` times OFS beside a plain
per-instance numpy loop of its update; `featurestream bench fires-kernel`
times FIRES (and its core update) beside a plain numpy transcription of its
batch update, and checks that both end on the same weights and top m;
`featurestream bench roughset` times K-OFSD, OFS-A3M and OFS-Density beside
plain numpy transcriptions of their rules (one dependency from scratch per
step) and checks that both end on the same selection. Each takes --help.

Compute workers (`featurestream bench compute`): 8 FSDS streams written at once
with 2 compute workers against 1 (instances/s), and GET /selected p99 during
those writes against idle, with and without workers; `featurestream bench
compute --help` for its options.

`featurestream bench kbest` gives k-best's feature-updates per second
(instances per second x d) in process and through `stream_instances`,
min/median/max of --repeat runs.

Drift (`featurestream bench drift`): selectors with and without forgetting on
generated instance streams whose relevant features switch at known times,
through the service: selection F1 against the truth over time, instances to
F1 >= 0.9 after a switch, F1 on a stationary stream, cost per instance;
`featurestream bench drift --help` for its options.

Tenants (`featurestream bench tenants`): create and list latency (p50, p99) in
a tenant holding one stream while --others streams (10,000) of other tenants
exist; `featurestream bench tenants --help` for its options.

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
        "--path",
        choices=["sdk", "raw", "json"],
        default="sdk",
        help="suite: how service runs send the data: sdk (the Python SDK from the data "
        "set's own scipy.sparse/numpy objects, encoding timed), raw (binary .npz/.npy bodies "
        "and frames encoded beforehand, not timed) or json (JSON columns or frames, encoded "
        "beforehand)",
    )
    p.add_argument(
        "--writer",
        choices=["raw", "sdk", "json", "websockets"],
        default="raw",
        help="latency: how the writer sends: raw (float32 .npy frames / .npz bodies encoded "
        "beforehand), sdk (the Python SDK), json (JSON requests encoded beforehand) or "
        "websockets (a plain websockets client, default connect options, float64 .npy frames)",
    )
    p.add_argument(
        "--ingest",
        choices=["instances", "features"],
        default="instances",
        help="latency: the writer streams OFS instances (d = 1,000, frames of 100), or "
        "ingests dorothea-like feature columns into SAOLA (--quick: a small set)",
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
        "--idle-seconds",
        type=float,
        default=None,
        help="latency: seconds of the same reads once the writer has stopped, the floor "
        "without the load (default --seconds, at most 3; 0: none)",
    )
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
        "--compute-workers",
        type=int,
        default=None,
        help="compute workers of the spawned server (default: its own, the number of cores)",
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
    if args_in[:1] == ["fires-kernel"]:
        from featurestream.bench import fires_kernel

        return fires_kernel.main(args_in[1:])
    if args_in[:1] == ["ossfs-dd"]:
        from featurestream.bench import ossfs_kernel

        return ossfs_kernel.main(args_in[1:])
    if args_in[:1] == ["roughset"]:
        from featurestream.bench import roughset_kernel

        return roughset_kernel.main(args_in[1:])
    if args_in[:1] == ["compute"]:
        from featurestream.bench import compute

        return compute.main(args_in[1:])
    if args_in[:1] == ["kbest"]:
        from featurestream.bench import kbest_rate

        return kbest_rate.main(args_in[1:])
    if args_in[:1] == ["drift"]:
        from featurestream.bench import drift

        return drift.main(args_in[1:])
    if args_in[:1] == ["tenants"]:
        from featurestream.bench import tenants

        return tenants.main(args_in[1:])
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
        if args.ingest == "features" and args.writer == "websockets":
            parser.error("--ingest features takes --writer raw, sdk or json")
        if args.idle_seconds is not None and not 0 <= args.idle_seconds <= 3600:
            parser.error("--idle-seconds must be between 0 and 3600")
        return _main_latency(args)
    if scaling_cmd or args.scaling:
        with blas_limit(args.blas_threads):
            return _main_scaling(args)
    if args.dataset or args.quick:
        return main_suite(args, params)
    return _main_classic(parser, args, params)


# --------------------------------------------------------------------------- read latency


def _main_latency(args: argparse.Namespace) -> int:
    from featurestream.bench import latency

    store = args.store or DEFAULT_REDIS

    def runs(url: str, label: str) -> list[latency.LatencyResult]:
        return [
            latency.measure(
                url,
                label,
                args.rate,
                args.seconds,
                args.write_rate,
                writer=args.writer,
                ingest=args.ingest,
                chunk=args.chunk or (1_000 if args.quick else 20_000),
                quick=args.quick,
                idle_seconds=args.idle_seconds,
            )
            for _ in range(args.repeat)
        ]

    if args.url:
        results = runs(args.url, "given server")
    else:
        threads = args.server_blas_threads if args.server_blas_threads is not None else 1
        blas = threads if threads > 0 else None
        with spawn_server(store, blas_threads=blas, env=server_env(args)) as server:
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
        with blas_limit(args.blas_threads):
            return classic.main_instances(args, params)
    if not issubclass(REGISTRY[args.algorithm], FeatureSelector):
        parser.error("--mode features needs a feature-stream algorithm")
    with blas_limit(args.blas_threads):
        return classic.main_features(args, params)


# --------------------------------------------------------------------------- scaling


def _main_scaling(args: argparse.Namespace) -> int:
    grid = scaling.Grid.quick() if args.quick else scaling.Grid.full()
    feature = [a for a in scaling.FEATURE_ALGORITHMS if _wanted(args.algorithm, a)]
    instance = [a for a in scaling.INSTANCE_ALGORITHMS if _wanted(args.algorithm, a)]
    windowed = [a for a in scaling.WINDOW_ALGORITHMS if _wanted(args.algorithm, a)]
    points = scaling.run_scaling(
        grid, feature, instance, log=sys.stderr, window_algorithms=windowed
    )
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

# The suite's judge, for tests and callers of the command module.
_judge = suite_judge
