"""``featurestream bench roughset``: the rough-set selectors against a plain numpy transcription.

Measures, in one run and with one BLAS thread, the wall time of

* K-OFSD (default ``k``), OFS-A3M and OFS-Density in process: ``start`` and
  one ``learn_features`` call per block of 100 columns, then the selection;
* a plain transcription of each rule (docs/algorithms/k_ofsd.md,
  ofs_a3m.md, ofs_density.md, "Exact rules") in numpy, in which every
  dependency is one evaluation from scratch: the columns of the set
  standardized, the n x n distances summed over them, every row sorted
  whole, the neighbourhood rule applied;

on the madelon-like (2,600 x 500) and leukemia-like (72 x 7,000) sets of
``bench ossfs-dd``. It prints min / median / max over the repeats
(interleaved, so a slower stretch of a shared machine hits both alike), and
checks that both end on the same selection with the same scores; the command
exits with 1 if not. The transcription sorts without the tolerance for near
ties, which these continuous data sets do not have.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from featurestream.bench.ofs_kernel import _blas_threads
from featurestream.bench.ossfs_kernel import (
    Timing,
    agree,
    leukemia_like,
    madelon_like,
    timing_table,
)
from featurestream.selectors import REGISTRY

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Card = Callable[[Matrix, npt.NDArray[np.bool_], IntArray], Vector]

BLOCK = 100


def plain_gamma(cols: Sequence[Vector], codes: IntArray, card: Card) -> float:
    """gamma of the columns ``cols`` (arrival order), from scratch."""
    if not cols:
        return 0.0
    n = codes.shape[0]
    Q = np.zeros((n, n))
    for x in cols:
        z = x if x.max() == x.min() else x / np.std(x, ddof=1)
        Q += (z[:, None] - z[None, :]) ** 2
    D = np.sqrt(Q)
    order = np.argsort(D, axis=1, kind="stable")
    dist = np.take_along_axis(D, order, axis=1)
    c = card(dist, codes[order] == codes[:, None], codes)
    return float(np.cumsum(c)[-1]) / float(n)


def _leading(ok: npt.NDArray[np.bool_]) -> IntArray:
    length = np.full(ok.shape[0], ok.shape[1], dtype=np.int64)
    for i, row in enumerate(ok):
        stops = np.flatnonzero(~row)
        if stops.shape[0]:
            length[i] = stops[0]
    return length


def _prefix_share(same: npt.NDArray[np.bool_], length: IntArray) -> Vector:
    """The share of positions 2..length+1 in the instance's class."""
    return np.array([same[i, 1 : 1 + m].mean() for i, m in enumerate(length.tolist())])


def knn_card(k: int, majority: int) -> Card:
    def card(dist: Matrix, same: npt.NDArray[np.bool_], codes: IntArray) -> Vector:
        near = same[:, 1 : k + 1]
        return np.where(codes == majority, near.all(axis=1) * 1.0, near.sum(axis=1) / k)

    return card


def adapted_card(dist: Matrix, same: npt.NDArray[np.bool_], codes: IntArray) -> Vector:
    n = dist.shape[1]
    gap = 1.5 * (dist[:, n - 1] - dist[:, 1]) / (n - 2)
    return _prefix_share(same, 1 + _leading(np.diff(dist[:, 1:], axis=1) < gap[:, None]))


def density_card(dist: Matrix, same: npt.NDArray[np.bool_], codes: IntArray) -> Vector:
    dens = dist[:, 1:] / np.arange(1, dist.shape[1])
    ok = (dens[:, 1:] == 0) | (dens[:, 1:] <= dens[:, :-1])
    return _prefix_share(same, 1 + _leading(ok))


def plain_k_ofsd(X: Matrix, y: Vector, k: int = 5) -> list[tuple[int, float]]:
    """K-OFSD over the columns X (b, n): the selection, with single dependencies."""
    codes = np.unique(y, return_inverse=True)[1].astype(np.int64)
    ones = int(codes.sum())
    majority = int(codes[0]) if 2 * ones == codes.shape[0] else int(2 * ones > codes.shape[0])
    card = knn_card(k, majority)
    S: list[tuple[int, float]] = []
    singles: list[tuple[float, int]] = []
    dep_last = 0.0
    for f in range(X.shape[0]):
        if X[f].max() == X[f].min():
            continue
        g = plain_gamma([X[f]], codes, card)
        singles.append((g, f))
        if g <= 0.5:
            continue
        if g > dep_last:
            S, dep_last = [(f, g)], g
            continue
        d = plain_gamma([X[j] for j, _ in S] + [X[f]], codes, card)
        if d > dep_last:
            S.append((f, g))
            dep_last = d
    if S:
        return S
    best = sorted(singles, key=lambda t: (-t[0], t[1]))[: math.floor(math.sqrt(X.shape[0]) + 0.5)]
    return [(f, g) for g, f in best]


def plain_mean_rule(X: Matrix, y: Vector, density: bool) -> list[tuple[int, float]]:
    """OFS-A3M (``density`` False) or OFS-Density over the columns X: the selection."""
    codes = np.unique(y, return_inverse=True)[1].astype(np.int64)
    card = density_card if density else adapted_card
    S: list[tuple[int, float]] = []
    dep_set = dep_mean = 0.0

    def gamma(members: list[tuple[int, float]]) -> float:
        return plain_gamma([X[j] for j, _ in members], codes, card)

    for f in range(X.shape[0]):
        if X[f].max() == X[f].min():
            continue
        g = plain_gamma([X[f]], codes, card)
        if (g < dep_mean) if density else not g > dep_mean:
            continue
        d = gamma([*S, (f, g)])
        about = density and dep_set > 0 and abs(d - dep_set) / dep_set <= 0.05
        if d > dep_set:
            S.append((f, g))
            dep_set = d
        elif about or (not density and d == dep_set):
            R, g_r = [*S, (f, g)], d
            for h in S:
                rest = [m for m in R if m[0] != h[0]]
                g_without = gamma(rest)
                gone = g_r - g_without <= 0 if density else g_r != 0 and (g_r - g_without) == 0
                if gone:
                    R, g_r = rest, g_without
            if not density or g_r >= dep_set:
                S, dep_set = R, g_r
            else:
                S.append((f, g))
                continue
        else:
            continue
        dep_mean = sum(m[1] for m in S) / len(S) if density else dep_set / len(S)
    return S


PLAIN: dict[str, Callable[[Matrix, Vector], list[tuple[int, float]]]] = {
    "k_ofsd": plain_k_ofsd,
    "ofs_a3m": lambda X, y: plain_mean_rule(X, y, False),
    "ofs_density": lambda X, y: plain_mean_rule(X, y, True),
}
DATASETS = {"madelon-like 2600x500": madelon_like, "leukemia-like 72x7000": leukemia_like}


def in_process(algorithm: str, X: Matrix, y: Vector) -> list[tuple[str, float]]:
    """The selector, in blocks of BLOCK columns: the selection."""
    cls: type = REGISTRY[algorithm]
    sel = cls.start(cls.params_type(), y)  # type: ignore[attr-defined]
    names = [str(i) for i in range(X.shape[0])]
    for lo in range(0, X.shape[0], BLOCK):
        sel.learn_features(names[lo : lo + BLOCK], X[lo : lo + BLOCK])
    return [(f.name, float(f.score or 0.0)) for f in sel.selected_features()]


def run(
    repeat: int, algorithms: Sequence[str], datasets: Sequence[str], seed: int = 0
) -> tuple[list[Timing], dict[str, bool], dict[str, int]]:
    """Interleaved timed runs of both, per algorithm and data set; agreement; sizes."""
    timings: list[Timing] = []
    agreed: dict[str, bool] = {}
    sizes: dict[str, int] = {}
    for name in datasets:
        X, y = DATASETS[name](seed)
        for algorithm in algorithms:
            ours_t: list[float] = []
            plain_t: list[float] = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                ours = in_process(algorithm, X, y)
                ours_t.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                plain = PLAIN[algorithm](X, y)
                plain_t.append(time.perf_counter() - t0)
            key = f"{name} {algorithm}"
            agreed[key], sizes[key] = agree(ours, plain), len(ours)
            timings += [Timing(key, "in process", ours_t), Timing(key, "plain numpy", plain_t)]
    return timings, agreed, sizes


def table(timings: list[Timing], agreed: dict[str, bool], sizes: dict[str, int]) -> str:
    """Markdown: min / median / max seconds per implementation, and the ratio of the medians."""
    return timing_table(timings, agreed, sizes, "in process", "data set, algorithm")


def main(argv: Sequence[str] | None = None) -> int:
    """``featurestream bench roughset [--repeat R] [--seed S] [--algorithm A] [--dataset D]``."""
    p = argparse.ArgumentParser(
        prog="featurestream bench roughset",
        description="K-OFSD, OFS-A3M and OFS-Density in process against plain numpy "
        "transcriptions of their rules.",
    )
    p.add_argument("--repeat", type=int, default=3, help="timed runs of each (default 3)")
    p.add_argument("--seed", type=int, default=0, help="data seed")
    p.add_argument("--blas-threads", type=int, default=1, help="BLAS threads (0: leave as is)")
    p.add_argument(
        "--algorithm", action="append", choices=sorted(PLAIN), help="only these (repeatable)"
    )
    p.add_argument(
        "--dataset", action="append", choices=sorted(DATASETS), help="only these (repeatable)"
    )
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    with _blas_threads(args.blas_threads) as note:
        if note:
            print(note, file=sys.stderr)
        timings, agreed, sizes = run(
            args.repeat, args.algorithm or list(PLAIN), args.dataset or list(DATASETS), args.seed
        )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(table(timings, agreed, sizes))
    print(f"load average (1 min) at the end: {load:.2f} on {os.cpu_count()} CPUs")
    return 0 if all(agreed.values()) else 1


__all__ = ["agree", "in_process", "main", "plain_k_ofsd", "plain_mean_rule", "run", "table"]
