"""``featurestream bench drift``: selectors against a known, switching truth, through the service.

Generates instance streams whose relevant features are known at every
instance and switch at known times (bench/drift_data.py: --d features, 5
relevant originals, 20 redundant copies, the rest noise; binary, 3-class or
unsupervised), streams each into a fresh stream of a server (spawned on
--store, memory by default, or --url) with the SDK's ``stream_instances``,
--every instances per call in frames of --frame, reads the selection after
each call and scores it against the truth (bench/drift_score.py: group F1, a
redundant copy counting for its original once). Each configuration runs on a
switching stream (--segments of --segment instances, --switch abrupt or
gradual) and on a stationary stream of --stationary instances. Each
selector runs without forgetting, with --half-life and (unless --drift is
none) with a drift watch by --drift that resets it (``on_drift: "reset"``).

Reports per configuration: F1 5,000 and 10,000 instances after each switch,
the instances until F1 >= 0.9, the stationary F1 (mean over its second half),
the drift events of a configuration with a watch (on the stationary stream
its false alarms, on the switching one its detections) and the cost per
instance (seconds in ``stream_instances`` calls / instances).
--plots DIR draws F1 over time with the switch points (needs matplotlib, the
``bench`` extra); --json the curves of every run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from featurestream.bench import drift_report
from featurestream.bench.drift_data import DriftSpec
from featurestream.bench.drift_runs import (
    DETECTORS,
    SELECTORS,
    RunResult,
    Streams,
    configurations,
    run,
)
from featurestream.bench.server import spawn_server


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="featurestream bench drift",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--selector",
        action="append",
        choices=sorted(SELECTORS),
        help="repeatable (default: all of them)",
    )
    p.add_argument(
        "--target",
        action="append",
        choices=["binary", "multiclass", "unsupervised"],
        help="repeatable (default: all three)",
    )
    p.add_argument(
        "--switch",
        action="append",
        choices=["abrupt", "gradual"],
        help="kind of switch of the switching stream, repeatable (default: abrupt)",
    )
    p.add_argument("--segment", type=int, default=20_000, help="instances per segment")
    p.add_argument("--segments", type=int, default=2, help="segments of the switching stream")
    p.add_argument(
        "--transition", type=int, default=2_000, help="gradual switch: instances of the mixing"
    )
    p.add_argument(
        "--stationary",
        type=int,
        default=100_000,
        help="instances of the stationary stream (0: none)",
    )
    p.add_argument("--d", type=int, default=100, help="features d")
    p.add_argument("--seeds", default="0", help="comma-separated data seeds")
    p.add_argument(
        "--half-life", type=float, default=1_000.0, help="half_life of the forgetting runs"
    )
    p.add_argument(
        "--drift",
        choices=DETECTORS,
        default="page_hinkley",
        help="detector of the reset configurations (none: no such configuration)",
    )
    p.add_argument("--every", type=int, default=500, help="instances between selection reads")
    p.add_argument("--frame", type=int, default=100, help="instances per WebSocket frame")
    p.add_argument("--store", default="memory://", help="store of the spawned server")
    p.add_argument("--url", help="an already running server (no server is spawned)")
    p.add_argument("--plots", metavar="DIR", help="write the F1 curves as PNG files into DIR")
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="write everything as JSON to PATH (alone: print JSON instead of the table)",
    )
    return p


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[int]:
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        parser.error("--seeds must be comma-separated integers")
    if not seeds:
        parser.error("--seeds must name at least one seed")
    if min(args.segment, args.segments, args.every, args.frame) < 1 or args.stationary < 0:
        parser.error("--segment, --segments, --every and --frame must be at least 1")
    if args.every % args.frame:
        parser.error("--every must be a multiple of --frame")
    if args.half_life <= 0:
        parser.error("--half-life must be positive")
    return seeds


def run_all(url: str, args: argparse.Namespace, seeds: list[int]) -> list[RunResult]:
    """Every configuration on every stream, target by target."""
    targets = args.target or ["binary", "multiclass", "unsupervised"]
    configs = configurations(
        args.selector or list(SELECTORS), targets, args.half_life, drift=args.drift
    )
    streams = Streams()
    results = []
    for config in configs:
        for seed in seeds:
            specs = [
                DriftSpec(
                    target=config.target,
                    switch=switch,
                    segments=args.segments,
                    segment=args.segment,
                    d=args.d,
                    transition=args.transition,
                    seed=seed,
                )
                for switch in args.switch or ["abrupt"]
            ]
            if args.stationary:
                specs.append(
                    DriftSpec(
                        target=config.target,
                        switch="stationary",
                        segment=args.stationary,
                        d=args.d,
                        seed=seed,
                    )
                )
            for spec in specs:
                result = run(url, config, streams.get(spec), args.every, args.frame)
                drifts = "" if result.drift_events is None else f", {result.drift_events} drifts"
                print(
                    f"{config.target} {spec.switch} seed {seed}: {config.label} "
                    f"({result.us_per_instance:.1f} us/instance{drifts})",
                    file=sys.stderr,
                )
                results.append(result)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    seeds = _check(parser, args)
    if args.url:
        results = run_all(args.url, args, seeds)
    else:
        with spawn_server(args.store) as server:
            results = run_all(server.url, args, seeds)
    rows = drift_report.summarise(results)
    header = (
        f"d = {args.d} (5 relevant, 20 copies), {args.segments} segments of "
        f"{args.segment:,} instances ({', '.join(args.switch or ['abrupt'])}), stationary "
        f"{args.stationary:,}, half_life {args.half_life:g}, drift {args.drift}, "
        f"seeds {args.seeds}, reads every {args.every}, frames of {args.frame}"
    )
    if args.plots:
        written = drift_report.plot(results, Path(args.plots))
        if not written:
            print("matplotlib is not installed: no plots (pip install matplotlib)", file=sys.stderr)
        for path in written:
            print(f"plot written to {path}", file=sys.stderr)
    meta: dict[str, Any] = {"options": {k: v for k, v in vars(args).items() if k != "json"}}
    if args.json is not None:
        text = json.dumps(drift_report.to_json(results, rows, **meta), indent=2)
        if args.json == "-":
            print(text)
            return 0
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    print(drift_report.render(rows, header))
    return 0


__all__ = ["build_parser", "main", "run_all"]
