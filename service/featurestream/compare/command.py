"""The ``featurestream compare`` command: options, and what it prints and writes."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

DEFAULT_ALGORITHMS = "saola,fast_osfs,alpha_investing,osfs,group_saola"

DESCRIPTION = """\
Compare feature-stream selectors on data sets.

Each DATA (a built-in set: breast_cancer, wine, digits, madelon; or a .csv,
.tsv, .npy or .parquet file with --target) is replayed into one stream per
algorithm on a featurestream server (one started on --store, the embedded
memory store by default, unless --url names a running one), in the data set's
column order and, with --shuffles N, in N shuffled orders too. Every selection
is scored by --model on the same 5x2cv folds (5 repetitions of stratified
2-fold cross-validation, fixed by --seed), as are all features. Per data set:
score mean and standard deviation, selected count, replay time, and for each
pair of methods the 5x2cv paired t test (Dietterich 1998) and the combined
5x2cv F test (Alpaydin 1999). Over data sets: the Friedman test and the
Nemenyi critical difference (Demsar 2006). Prints a table; --json writes
everything as JSON, --plots DIR writes cd.svg (critical-difference diagram)
and scores.svg (score against the number of selected features).
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``compare`` to the subparsers ``sub`` of the ``featurestream`` parser."""
    p: argparse.ArgumentParser = sub.add_parser(
        "compare",
        help="Compare feature-stream selectors on data sets (5x2cv tests, Friedman/Nemenyi).",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("data", nargs="+", metavar="DATA", help="built-in data set name or data file")
    p.add_argument(
        "--algorithms",
        default=DEFAULT_ALGORITHMS,
        help=f"comma-separated feature-stream algorithms (default {DEFAULT_ALGORITHMS})",
    )
    p.add_argument(
        "--model",
        default="knn",
        help="scoring model: knn (default), logistic, naive_bayes or linear",
    )
    p.add_argument(
        "--shuffles", type=int, default=0, help="shuffled column orders per algorithm (default 0)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the folds and orders (default 0)")
    p.add_argument(
        "--alpha", type=float, default=0.05, help="level of the tests and of CD (default 0.05)"
    )
    p.add_argument("--json", metavar="FILE", help="write the result as JSON ('-': stdout)")
    p.add_argument("--plots", metavar="DIR", help="write cd.svg and scores.svg into DIR")
    p.add_argument(
        "--url",
        default=os.environ.get("FEATURESTREAM_URL"),
        help="a running server (default $FEATURESTREAM_URL; unset: start one on --store)",
    )
    p.add_argument(
        "--api-key",
        default=os.environ.get("FEATURESTREAM_API_KEY"),
        help="bearer key for --url (default $FEATURESTREAM_API_KEY)",
    )
    p.add_argument(
        "--store",
        default="memory://",
        help="store of the server started without --url (default memory://)",
    )
    p.add_argument("--target", metavar="COL", help="target column of data files (name or index)")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="ALG.KEY=VALUE",
        help="an algorithm parameter, e.g. osfs.max_k=2 (VALUE read as JSON, else as text)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=60.0,
        help="seconds one stream may run before it stops between two calls, keeping its "
        "selection so far (default 60; 0: no limit)",
    )
    p.add_argument(
        "--group-size",
        type=int,
        default=10,
        help="consecutive columns per group for group-SAOLA (default 10)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=run)
    return p


def parse_params(items: list[str]) -> dict[str, dict[str, Any]]:
    """``["osfs.max_k=2", "saola.alpha=0.05"]`` -> ``{"osfs": {"max_k": 2}, ...}``.

    >>> parse_params(["osfs.max_k=2", "saola.test=fisher_z"])
    {'osfs': {'max_k': 2}, 'saola': {'test': 'fisher_z'}}
    """
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, eq, text = item.partition("=")
        algorithm, dot, name = key.partition(".")
        if not (eq and dot and algorithm and name):
            raise ValueError(f"--param {item!r}: expected ALG.KEY=VALUE, e.g. osfs.max_k=2")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        out.setdefault(algorithm.strip(), {})[name.strip()] = value
    return out


def run(args: argparse.Namespace) -> int:
    from featurestream.compare.run import compare
    from featurestream.errors import FeatureStreamError
    from featurestream_client.errors import FeatureStreamError as ClientError

    try:
        params = parse_params(args.param)
    except ValueError as exc:
        print(f"featurestream compare: {exc}", file=sys.stderr)
        return 2

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        result = compare(
            args.data,
            args.algorithms.split(","),
            model=args.model,
            shuffles=args.shuffles,
            seed=args.seed,
            alpha=args.alpha,
            url=args.url,
            api_key=args.api_key,
            params=params,
            target=args.target,
            budget=args.budget or None,
            group_size=args.group_size,
            store=args.store,
            progress=None if args.quiet else progress,
        )
    except FeatureStreamError as exc:
        print(f"featurestream compare: {exc}", file=sys.stderr)
        return 2
    except ClientError as exc:
        print(f"featurestream compare: {exc}", file=sys.stderr)
        return 1
    if args.json == "-":
        print(result.to_json())
    else:
        print(result.table(), end="")
        if args.json:
            with open(args.json, "w", encoding="utf-8") as fh:
                fh.write(result.to_json() + "\n")
    if args.plots:
        for path in result.write_plots(args.plots):
            print(f"wrote {path}", file=sys.stderr)
    return 0


__all__ = ["DEFAULT_ALGORITHMS", "add_parser", "parse_params", "run"]
