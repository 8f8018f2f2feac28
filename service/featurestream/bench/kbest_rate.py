"""``featurestream bench kbest``: k-best's feature-updates per second, in process and served.

One data set of dense instances (``stream-d1000``'s rows: d = 1,000, frames
of 100 rows), applied ``--repeat`` times in process and ``--repeat`` times
through the SDK's ``stream_instances`` to one spawned server (or ``--url``),
side by side. A feature-update is one value of one instance learnt: the rate is
instances per second times d. Prints the min, median and max of each and the
ratio of the medians (served / in process).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from typing import Any

from featurestream.bench.datasets import instance_spec, make_instances
from featurestream.bench.instance_runs import instances_in_process
from featurestream.bench.sdk import instances_sdk
from featurestream.bench.server import spawn_server

ALGORITHM = "kbest"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="featurestream bench kbest", description=__doc__)
    p.add_argument("--instances", type=int, default=20_000, help="instances per run")
    p.add_argument("--dim", type=int, default=1_000, help="features d")
    p.add_argument("--frame", type=int, default=100, help="instances per frame")
    p.add_argument("--repeat", type=int, default=3, help="runs of each kind")
    p.add_argument("--params", default='{"num_features": 20}', help="k-best's JSON params")
    p.add_argument("--store", default="memory://", help="store of the spawned server")
    p.add_argument("--url", help="an already running server (no server is spawned)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    return p


def spread(rates: Sequence[float]) -> dict[str, float]:
    """min, median and max of some rates.

    >>> spread([3.0, 1.0, 2.0])
    {'min': 1.0, 'median': 2.0, 'max': 3.0}
    """
    return {"min": min(rates), "median": statistics.median(rates), "max": max(rates)}


def measure(args: argparse.Namespace, url: str) -> dict[str, Any]:
    params = json.loads(args.params)
    spec = instance_spec("stream-d1000").scaled(args.instances, args.dim, args.frame)
    data = make_instances(spec)
    rates: dict[str, list[float]] = {"in-process": [], "service/sdk": []}
    selections = set()
    for _ in range(args.repeat):
        local = instances_in_process(data, ALGORITHM, params)
        served = instances_sdk(url, data, ALGORITHM, params)
        rates["in-process"].append(local.rate * args.dim)
        rates["service/sdk"].append(served.rate * args.dim)
        selections.add((tuple(local.selection), tuple(served.selection)))
    out: dict[str, Any] = {k: spread(v) for k, v in rates.items()}
    out["ratio"] = out["service/sdk"]["median"] / out["in-process"]["median"]
    out["identical"] = all(a == b for a, b in selections)
    out["instances"], out["d"], out["frame"] = args.instances, args.dim, args.frame
    return out


def render(result: dict[str, Any]) -> str:
    lines = [
        f"k-best, {result['instances']:,} dense instances, d = {result['d']:,}, "
        f"frames of {result['frame']}: feature-updates per second",
        "| path | min | median | max |",
        "|---|---|---|---|",
    ]
    for path in ("in-process", "service/sdk"):
        r = result[path]
        lines.append(f"| {path} | {r['min']:,.0f} | {r['median']:,.0f} | {r['max']:,.0f} |")
    lines.append(
        f"service / in-process (medians): {result['ratio']:.2f}; "
        f"identical selections: {result['identical']}"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.repeat < 1 or args.instances < 1 or args.dim < 1 or args.frame < 1:
        build_parser().error("--repeat, --instances, --dim and --frame must be at least 1")
    if args.url:
        result = measure(args, args.url)
    else:
        with spawn_server(args.store) as server:
            result = measure(args, server.url)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


__all__ = ["build_parser", "main", "measure", "render", "spread"]
