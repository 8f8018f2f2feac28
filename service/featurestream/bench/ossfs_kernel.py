"""``featurestream bench ossfs-dd``: OSSFS-DD in process against a plain numpy transcription.

Measures, in one run and with one BLAS thread, the wall time of

* OSSFS-DD in process (``measure: "z"``, default parameters): ``start`` and
  one ``learn_features`` call per block of 100 columns, then the selection
  (which includes the look-ahead flush of the pool);
* ``plain_ossfs_dd``, a plain transcription of docs/algorithms/ossfs_dd.md
  ("Exact rules") in numpy: every relevance from ``np.corrcoef`` of the raw
  column and the target, every conditional relevance from the inverse of the
  3 x 3 correlation matrix of (a, y, g) (the paper's equation 4), and mu and
  sigma recomputed from all relevances at each step: one evaluation from
  scratch per step;

on two data sets shaped like the paper's: madelon (2,600 instances x 500
features: 5 informative, 15 combinations of them, the rest noise) and
leukemia (72 instances x 7,000 features, 50 shifted by the class). It prints
min / median / max over the repeats (interleaved, so a slower stretch of a
shared machine hits both alike), and checks that both end on the same
selection with scores within 1e-9 relative; the command exits with 1 if not.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from featurestream.bench.ofs_kernel import _blas_threads
from featurestream.selectors.ossfs_dd import OSSFSDD, OSSFSDDParams
from featurestream.stats.special import normal_quantile

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float64]

RTOL = 1e-9
BLOCK = 100
R_MAX = float(np.nextafter(1.0, 0.0))


def madelon_like(seed: int = 0) -> tuple[Matrix, Vector]:
    """(500, 2600) columns and a binary target: 5 informative, 15 mixtures, 480 noise."""
    rng = np.random.default_rng(seed)
    n = 2600
    info = rng.normal(size=(5, n))
    y = ((info[0] + info[1] > 0) ^ (info[2] * info[3] > 0)).astype(float)
    X = rng.normal(size=(500, n))
    X[:5] = info + 0.5 * y
    X[5:20] = rng.normal(size=(15, 5)) @ info + 0.1 * rng.normal(size=(15, n))
    return X[rng.permutation(500)], y


def leukemia_like(seed: int = 0) -> tuple[Matrix, Vector]:
    """(7000, 72) columns and a binary target: 50 columns shifted by the class."""
    rng = np.random.default_rng(seed)
    n = 72
    y = (np.arange(n) % 3 == 0).astype(float)[rng.permutation(n)]
    X = rng.normal(size=(7000, n))
    X[:50] += rng.uniform(0.5, 2.0, size=(50, 1)) * y
    return X[rng.permutation(7000)], y


def _gamma(x: Vector, y: Vector) -> float:
    r = float(np.corrcoef(x, y)[0, 1])
    if math.isnan(r):
        return 0.0
    r = max(-R_MAX, min(R_MAX, r))
    return abs(math.sqrt(x.shape[0] - 3) * math.atanh(r))


def _given(a: Vector, y: Vector, g: Vector, crit: float) -> tuple[float, bool]:
    """gamma(a | g) and whether a is independent of y given g, from scratch."""
    C = np.corrcoef(np.vstack([a, y, g]))
    try:
        P = np.linalg.inv(C)
    except np.linalg.LinAlgError:
        return float("nan"), True
    den = P[0, 0] * P[1, 1]
    if not (den > 0 and np.isfinite(den)) or np.linalg.cond(C) > 1e12:
        return float("nan"), True
    r = max(-R_MAX, min(R_MAX, float(-P[0, 1] / math.sqrt(den))))
    w = abs(math.sqrt(a.shape[0] - 4) * math.atanh(r))
    return w, not w >= crit


def _plain_flush(
    X: Matrix,
    y: Vector,
    sc: list[tuple[int, float]],
    su: list[tuple[int, float]],
    beta: float,
    crit: float,
) -> list[tuple[int, float]]:
    """What a flush of the pool su adds to sc."""
    added: list[tuple[int, float]] = []
    have = {i for i, _ in sc}
    for a, (i, gi) in enumerate(su):
        for j, gj in su[a + 1 :]:
            _, independent = _given(X[j], y, X[i], crit)
            if not independent and gi + _given(X[i], y, X[j], crit)[0] > 2 * beta:
                for m in ((i, gi), (j, gj)):
                    if m[0] not in have:
                        have.add(m[0])
                        added.append(m)
                break
    return added


def plain_ossfs_dd(
    X: Matrix, y: Vector, k1: float = 1.0, k2: float = 2.0, pool: int = 100, alpha: float = 0.05
) -> list[tuple[int, float]]:
    """OSSFS-DD (``z``, one target column) over the columns X (b, n): the selection."""
    crit = normal_quantile(1.0 - alpha / 2.0)
    gammas: list[float] = []
    sc: list[tuple[int, float]] = []
    su: list[tuple[int, float]] = []
    beta = 0.0
    for f in range(X.shape[0]):
        x = X[f]
        if x.max() == x.min():
            continue
        g = _gamma(x, y)
        gammas.append(g)
        if len(gammas) <= 2:
            sc.append((f, g))
            continue
        mu, sigma = float(np.mean(gammas)), float(np.std(gammas, ddof=1))
        low, beta = mu + k1 * sigma, mu + k2 * sigma
        if g <= low:
            continue
        if g >= beta:
            kept: list[tuple[int, float]] = []
            for at, (h, gh) in enumerate(sc):
                w, independent = _given(X[h], y, x, crit)
                if not independent and gh + w < 2 * beta:
                    if g < gh:  # f leaves; h and the rest stay
                        kept += sc[at:]
                        break
                    continue  # h leaves
                kept.append((h, gh))
            else:
                kept.append((f, g))
            sc = kept
            continue
        su.append((f, g))
        if len(su) >= pool:
            sc += _plain_flush(X, y, sc, su, beta, crit)
            su = []
    return sc + (_plain_flush(X, y, sc, su, beta, crit) if su and len(gammas) > 2 else [])


@dataclass(frozen=True)
class Timing:
    dataset: str
    implementation: str
    seconds: list[float]


def in_process(X: Matrix, y: Vector) -> list[tuple[str, float]]:
    """OSSFS-DD through its selector, in blocks of BLOCK columns: the selection."""
    sel = OSSFSDD.start(OSSFSDDParams(), y)
    names = [str(i) for i in range(X.shape[0])]
    for lo in range(0, X.shape[0], BLOCK):
        sel.learn_features(names[lo : lo + BLOCK], X[lo : lo + BLOCK])
    return [(f.name, float(f.score or 0.0)) for f in sel.selected_features()]


def agree(ours: list[tuple[str, float]], plain: list[tuple[int, float]]) -> bool:
    """The same selection in the same order, scores within RTOL."""
    if [name for name, _ in ours] != [str(i) for i, _ in plain]:
        return False
    return all(math.isclose(a, b, rel_tol=RTOL) for (_, a), (_, b) in zip(ours, plain, strict=True))


DATASETS = {"madelon-like 2600x500": madelon_like, "leukemia-like 72x7000": leukemia_like}


def run(repeat: int, seed: int = 0) -> tuple[list[Timing], dict[str, bool], dict[str, int]]:
    """Interleaved timed runs of both on every data set; agreement; selection sizes."""
    timings: list[Timing] = []
    agreed: dict[str, bool] = {}
    sizes: dict[str, int] = {}
    for name, make in DATASETS.items():
        X, y = make(seed)
        ours_t: list[float] = []
        plain_t: list[float] = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            ours = in_process(X, y)
            ours_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            plain = plain_ossfs_dd(X, y)
            plain_t.append(time.perf_counter() - t0)
        agreed[name] = agree(ours, plain)
        sizes[name] = len(ours)
        timings += [Timing(name, "ossfs_dd in process", ours_t)]
        timings += [Timing(name, "plain numpy", plain_t)]
    return timings, agreed, sizes


def table(timings: list[Timing], agreed: dict[str, bool], sizes: dict[str, int]) -> str:
    """Markdown: min / median / max seconds per implementation, and the ratio of the medians."""
    return timing_table(timings, agreed, sizes, "ossfs_dd in process")


def timing_table(
    timings: list[Timing],
    agreed: dict[str, bool],
    sizes: dict[str, int],
    ours: str,
    label: str = "data set",
) -> str:
    """The table of :func:`table`, ``ours`` naming the implementation the ratio is of."""
    lines = [
        f"| {label} | implementation | min s | median s | max s | plain / ours (median) |"
        " selected | same selection |",
        "|---|---|---|---|---|---|---|---|",
    ]
    by = {(t.dataset, t.implementation): t.seconds for t in timings}
    for t in timings:
        med = statistics.median(t.seconds)
        ratio = ""
        if t.implementation == ours:
            ratio = f"{statistics.median(by[t.dataset, 'plain numpy']) / med:.1f}x"
        lines.append(
            f"| {t.dataset} | {t.implementation} | {min(t.seconds):.3f} | {med:.3f} | "
            f"{max(t.seconds):.3f} | {ratio} | {sizes[t.dataset]} | "
            f"{'yes' if agreed[t.dataset] else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``featurestream bench ossfs-dd [--repeat R] [--seed S]``."""
    p = argparse.ArgumentParser(
        prog="featurestream bench ossfs-dd",
        description="OSSFS-DD in process against a plain numpy transcription of its rule.",
    )
    p.add_argument("--repeat", type=int, default=3, help="timed runs of each (default 3)")
    p.add_argument("--seed", type=int, default=0, help="data seed")
    p.add_argument("--blas-threads", type=int, default=1, help="BLAS threads (0: leave as is)")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    with _blas_threads(args.blas_threads) as note:
        if note:
            print(note, file=sys.stderr)
        timings, agreed, sizes = run(args.repeat, args.seed)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(table(timings, agreed, sizes))
    print(f"load average (1 min) at the end: {load:.2f} on {os.cpu_count()} CPUs")
    return 0 if all(agreed.values()) else 1


__all__ = [
    "leukemia_like",
    "madelon_like",
    "main",
    "plain_ossfs_dd",
    "run",
    "table",
    "timing_table",
]
