"""``featurestream bench ofs-kernel``: OFS in process against a plain numpy loop.

OFS's per-instance update is sequential, so ``OFS`` runs it as compiled code.
This measures, in one run and with one BLAS thread, the wall time of

* OFS in process: ``OFS.start(...).learn_instances(X, y)`` on the whole stream;
* a plain per-instance numpy loop of the same update, ``plain_ofs``, written
  straight from docs/algorithms/ofs.md ("Exact rules", full input, ``scale: "none"``): a BLAS
  dot product, a vector step, a norm and, with truncation, a stable argsort;

on n instances of d dense features, with ``num_features`` = d (no truncation)
and a small budget (truncation at every step), and prints min / median / max
over the repeats. The compile (or the load of the cached compiled code)
happens in a warm-up run before the timed ones. OFS runs at every budget
before the plain loop runs at any; at each budget an implementation runs
``WARM_RUNS`` untimed times, then its timed runs back to back.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TextIO

import numpy as np
import numpy.typing as npt

from featurestream.selectors.ofs import OFS, OFSParams

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float64]

IMPLEMENTATIONS = ("ofs in process", "plain numpy loop")
# Untimed runs of an implementation before its timed ones.
WARM_RUNS = 2


def plain_ofs(
    X: Matrix,
    y: Vector,
    num_features: int,
    eta: float = 0.2,
    lam: float = 0.01,
    margin: float = 1.0,
    decay: float = 0.0,
) -> tuple[Vector, int]:
    """OFS (full input, no scaling) as a plain numpy loop; returns (w, mistakes).

    Labels in {-1, +1}. Truncate keeps the B largest |w| (ties: lower index).

    >>> w, mistakes = plain_ofs(
    ...     np.array([[1.0, 0.0, 2.0], [0.0, 3.0, -1.0]]), np.array([1.0, -1.0]), 2, eta=0.5
    ... )
    >>> w.tolist(), mistakes
    ([0.0, -1.5, 1.5], 0)
    """
    d = X.shape[1]
    w = np.zeros(d)
    radius = 1.0 / math.sqrt(lam)
    mistakes = 0
    for x, yt in zip(X, y, strict=True):
        f = float(w @ x)
        mistakes += int((1.0 if f >= 0.0 else -1.0) != yt)  # sign(0) = +1
        if yt * f <= margin:
            w = (1.0 - decay) * w + (eta * yt) * x
            norm = float(np.linalg.norm(w))
            if norm > radius:  # min(1, 1 / (sqrt(lam) ||w||)) < 1
                w *= radius / norm
            if num_features < d:
                # Stable order of -|w|: the B largest first, ties by lower index.
                order = np.argsort(-np.abs(w), kind="stable")
                w[order[num_features:]] = 0.0
        elif decay:
            w = (1.0 - decay) * w
    return w, mistakes


def make_stream(n: int, d: int, seed: int = 0) -> tuple[Matrix, Vector]:
    """n dense instances over d features, labels in {-1, +1} from the first 10."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, : min(10, d)].sum(axis=1) >= 0.0, 1.0, -1.0)
    return X, y


@dataclass(frozen=True)
class Timing:
    """Wall times in seconds of one implementation on one (d, num_features)."""

    implementation: str
    d: int
    num_features: int
    times: tuple[float, ...]
    mistakes: int


def _one(implementation: str, X: Matrix, y: Vector, B: int) -> int:
    """One run of an implementation on the whole stream; returns its mistakes."""
    if implementation == IMPLEMENTATIONS[0]:
        names = [f"f{i}" for i in range(X.shape[1])]
        params = OFSParams(num_features=B, scale="none")  # the published OFS, as plain_ofs
        return OFS.start(params, names).learn_instances(X, y).mistakes
    return plain_ofs(X, y, B)[1]


def run(
    n: int = 5000,
    dims: Sequence[int] = (500, 1000),
    budgets: Sequence[int | None] = (None, 20),
    repeat: int = 3,
    seed: int = 0,
    log: TextIO | None = None,
) -> list[Timing]:
    """Time both implementations; a budget of None means num_features = d."""
    out: list[Timing] = []
    for d in dims:
        X, y = make_stream(n, d, seed)
        _one(IMPLEMENTATIONS[0], X[:10], y[:10], d)  # compile, or load the cached code
        Bs = [d if budget is None else budget for budget in budgets]
        # Keyed by the budget's position: two budgets may both mean num_features = d.
        times: dict[tuple[str, int], list[float]] = {}
        mistakes: dict[tuple[str, int], int] = {}
        # Each implementation at every budget before the other implementation, each
        # (implementation, budget) timed back to back after untimed runs of its own. The
        # first run after the other implementation's (or after an idle moment) took up to
        # a third longer than the next ones on a 2-core VM, and a run of OFS just after
        # the plain loop's still took ~3% longer after two untimed ones; the plain loop
        # at num_features = 20 runs ten times as long as OFS. Interleaving charged that
        # to whichever ran after it, and timing the budgets implementation by
        # implementation measures OFS at every budget under the same conditions.
        for name in IMPLEMENTATIONS:
            for i, B in enumerate(Bs):
                key = (name, i)
                times[key] = []
                for _ in range(WARM_RUNS):
                    _one(name, X, y, B)
                for _ in range(repeat):
                    t = time.perf_counter()
                    mistakes[key] = _one(name, X, y, B)
                    times[key].append(time.perf_counter() - t)
        for i, B in enumerate(Bs):
            for name in IMPLEMENTATIONS:
                key = (name, i)
                out.append(Timing(name, d, B, tuple(times[key]), mistakes[key]))
                if log is not None:
                    print(f"d={d} B={B} {name}: {min(times[key]):.4f} s", file=log)
    return out


def table(timings: Sequence[Timing], n: int) -> str:
    """A text table: seconds min / median / max, and the plain loop's time over OFS's."""
    head = f"{'d':>6} {'B':>6}  {'implementation':<18} {'min':>8} {'median':>8} {'max':>8}"
    lines = [f"n = {n}, seconds over {len(timings[0].times) if timings else 0} runs", head]
    ofs_median: dict[tuple[int, int], float] = {}
    for t in timings:
        med = statistics.median(t.times)
        row = (
            f"{t.d:>6} {t.num_features:>6}  {t.implementation:<18} "
            f"{min(t.times):>8.4f} {med:>8.4f} {max(t.times):>8.4f}"
        )
        key = (t.d, t.num_features)
        if t.implementation == IMPLEMENTATIONS[0]:
            ofs_median[key] = med
        elif key in ofs_median:
            row += f"  ({med / ofs_median[key]:.1f}x OFS)"
        lines.append(row)
    return "\n".join(lines)


@contextlib.contextmanager
def _blas_threads(threads: int) -> Iterator[str | None]:
    """One BLAS thread (threadpoolctl), so the plain loop's BLAS calls do not fan out."""
    if threads <= 0:
        yield None
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield "threadpoolctl is not installed: BLAS threads are not capped"
        return
    with threadpool_limits(limits=threads, user_api="blas"):
        yield None


def main(argv: Sequence[str] | None = None) -> int:
    """``featurestream bench ofs-kernel [--instances N] [--dim D ...] [--repeat R]``."""
    p = argparse.ArgumentParser(
        prog="featurestream bench ofs-kernel",
        description="OFS in process against a plain per-instance numpy loop of the same update.",
    )
    p.add_argument("--instances", type=int, default=5000, help="instances n (default 5,000)")
    p.add_argument(
        "--dim",
        type=int,
        action="append",
        help="features d, repeatable (default 500 and 1,000)",
    )
    p.add_argument(
        "--budget",
        type=int,
        default=20,
        help="the small num_features, besides num_features = d (default 20)",
    )
    p.add_argument("--repeat", type=int, default=3, help="timed runs of each (default 3)")
    p.add_argument("--blas-threads", type=int, default=1, help="BLAS threads (0: leave as is)")
    args = p.parse_args(argv)
    if args.instances < 1 or args.repeat < 1 or args.budget < 1:
        p.error("--instances, --repeat and --budget must be at least 1")
    dims = args.dim or [500, 1000]
    with _blas_threads(args.blas_threads) as note:
        if note:
            print(note, file=sys.stderr)
        timings = run(args.instances, dims, (None, args.budget), args.repeat, log=sys.stderr)
    print(table(timings, args.instances))
    return 0


__all__ = ["Timing", "main", "make_stream", "plain_ofs", "run", "table"]
