"""``featurestream bench fires-kernel``: FIRES in process against a plain numpy transcription.

FIRES updates its probit model once per batch with a few vectorised numpy
operations. This measures, in one run and with one BLAS thread, the wall time
of

* FIRES in process: ``FIRES.start(...)`` and one ``learn_instances`` call per
  batch, ``scale: "none"``, binary labels: everything a stream does per batch
  (the checks of the input and the labels, the update, the weights and the
  selection before and after it);
* the core update alone, ``stats.fires.fires_update`` once per batch (no
  checks, no selection), to show what the selector adds;
* ``plain_fires``, a plain numpy transcription of the update written straight
  from docs/algorithms/fires.md ("Exact rules") the way the published
  reference implementation computes it: per batch, the d x n_b gradient
  matrices, ``scipy.stats.norm`` for the densities, the mean along the
  instances; then the weights and the top m;

on n instances of d dense Gaussian features in batches of 100, and prints min
/ median / max over the repeats (interleaved, so a slower stretch of a shared
machine hits all alike). Every run also checks that FIRES and the
transcription end on the same mu, sigma and weights (within 1e-9 relative)
and the same top m in the same order; the command exits with 1 if not.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

import numpy as np
import numpy.typing as npt

from featurestream.bench.ofs_kernel import _blas_threads, make_stream
from featurestream.selectors.fires import FIRES, FIRESParams
from featurestream.stats.fires import fires_update

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float64]
IntVector = npt.NDArray[np.intp]

IMPLEMENTATIONS = ("fires in process", "core update alone", "plain numpy")
# Agreement asked of FIRES and the transcription: relative, on mu, sigma and the raw weights.
RTOL = 1e-9


@dataclass(frozen=True)
class PlainResult:
    """What ``plain_fires`` ends on."""

    mu: Vector
    sigma: Vector
    raw_weights: Vector  # (mu^2 - penalty_s sigma^2) / (2 penalty_r)
    weights: Vector  # min-max scaled
    top: IntVector


def plain_fires(
    X: Matrix,
    y: Vector,
    num_features: int,
    batch: int = 100,
    *,
    mu_init: float = 0.0,
    sigma_init: float = 1.0,
    penalty_s: float = 0.01,
    penalty_r: float = 0.01,
    lr_mu: float = 0.01,
    lr_sigma: float = 0.01,
    epochs: int = 1,
) -> PlainResult:
    """FIRES (probit, ``scale: "none"``) over the stream in batches, as plain numpy.

    Labels in {-1, +1}. For each batch, ``epochs`` times: dot = X mu,
    rho = sqrt(1 + X^2 sigma^2), t = y dot / rho; r = phi(t) / Phi(t) as
    exp(log phi(t) - log Phi(t)); the gradients of every feature and instance
    as d x n_b matrices, averaged over the instances; mu and sigma step, and
    sigma is clipped at 0. Then w = (mu^2 - penalty_s sigma^2) / (2 penalty_r),
    min-max scaled (all equal: 0), and the m largest (ties: lower index).

    >>> r = plain_fires(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([1.0, -1.0]), 1)
    >>> r.mu.round(6).tolist(), r.sigma.tolist(), r.top.tolist()
    ([0.002821, -0.002821], [1.0, 1.0], [0])
    """
    from scipy.stats import norm

    d = X.shape[1]
    mu = np.full(d, mu_init, dtype=np.float64)
    sigma = np.full(d, sigma_init, dtype=np.float64)
    for lo in range(0, X.shape[0], batch):
        Xb = X[lo : lo + batch]
        yb = y[lo : lo + batch]
        for _ in range(epochs):
            dot = np.dot(Xb, mu)
            rho = np.sqrt(1 + np.dot(Xb**2, sigma**2))
            t = yb / rho * dot
            ratio = np.exp(norm.logpdf(t) - norm.logcdf(t))
            nabla_mu = ratio * (yb / rho * Xb.T)
            nabla_sigma = ratio * (-yb / rho**3 * (Xb**2 * sigma).T * dot)
            mu = mu + lr_mu * np.mean(nabla_mu, axis=1)
            sigma = sigma + lr_sigma * np.mean(nabla_sigma, axis=1)
            sigma[sigma < 0] = 0.0
    raw = (mu**2 - penalty_s * sigma**2) / (2 * penalty_r)
    spread = raw.max() - raw.min()
    weights = (raw - raw.min()) / spread if spread > 0 else np.zeros(d)
    top = np.argsort(-weights, kind="stable")[:num_features]
    return PlainResult(mu, sigma, raw, weights, np.asarray(top, dtype=np.intp))


@dataclass(frozen=True)
class Timing:
    """Wall times in seconds of one implementation at one d."""

    implementation: str
    d: int
    times: tuple[float, ...]


@dataclass(frozen=True)
class Agreement:
    """How closely FIRES in process and the transcription agree at one d."""

    d: int
    max_rel_mu: float
    max_rel_sigma: float
    max_rel_weights: float
    same_top: bool

    @property
    def holds(self) -> bool:
        worst = max(self.max_rel_mu, self.max_rel_sigma, self.max_rel_weights)
        return self.same_top and worst <= RTOL


def _max_rel(a: Vector, b: Vector) -> float:
    """max_j |a_j - b_j| / max(|a_j|, |b_j|), 0 where both are 0."""
    scale = np.maximum(np.abs(a), np.abs(b))
    diff = np.abs(a - b)
    return float(np.max(np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), 0.0)))


def _selector(X: Matrix, y: Vector, m: int, batch: int) -> FIRES:
    names = [f"f{i}" for i in range(X.shape[1])]
    sel = FIRES.start(FIRESParams(num_features=m, scale="none"), names)  # as the reference
    for lo in range(0, X.shape[0], batch):
        sel.learn_instances(X[lo : lo + batch], y[lo : lo + batch])
    return sel


def _core(X: Matrix, y: Vector, batch: int) -> tuple[Vector, Vector]:
    d = X.shape[1]
    mu, sigma = np.zeros(d), np.ones(d)
    for lo in range(0, X.shape[0], batch):
        mu, sigma = fires_update(mu, sigma, X[lo : lo + batch], y[lo : lo + batch])
    return mu, sigma


def _one(implementation: str, X: Matrix, y: Vector, m: int, batch: int) -> None:
    if implementation == IMPLEMENTATIONS[0]:
        _selector(X, y, m, batch)
    elif implementation == IMPLEMENTATIONS[1]:
        _core(X, y, batch)
    else:
        plain_fires(X, y, m, batch)


def agreement(X: Matrix, y: Vector, m: int, batch: int) -> Agreement:
    """Run FIRES in process and the transcription once and compare what they end on."""
    sel = _selector(X, y, m, batch)
    ref = plain_fires(X, y, m, batch)
    p = sel.params
    mu, sigma = sel.state.mu[0], sel.state.sigma[0]
    raw = (mu * mu - p.penalty_s * sigma * sigma) / (2.0 * p.penalty_r)
    top = [sel.state.feature_names.index(name) for name in sel.selected()]
    return Agreement(
        X.shape[1],
        _max_rel(mu, ref.mu),
        _max_rel(sigma, ref.sigma),
        _max_rel(raw, ref.raw_weights),
        top == ref.top.tolist(),
    )


def run(
    n: int = 10_000,
    dims: Sequence[int] = (500, 1000),
    num_features: int = 20,
    batch: int = 100,
    repeat: int = 5,
    seed: int = 0,
    log: TextIO | None = None,
) -> tuple[list[Timing], list[Agreement]]:
    """Time the three implementations at each d, and check FIRES against the transcription."""
    timings: list[Timing] = []
    checks: list[Agreement] = []
    for d in dims:
        X, y = make_stream(n, d, seed)
        checks.append(agreement(X, y, num_features, batch))  # also the warm-up of all three
        _core(X[:batch], y[:batch], batch)
        times: dict[str, list[float]] = {name: [] for name in IMPLEMENTATIONS}
        for _ in range(repeat):
            for name in IMPLEMENTATIONS:
                t = time.perf_counter()
                _one(name, X, y, num_features, batch)
                times[name].append(time.perf_counter() - t)
        for name in IMPLEMENTATIONS:
            timings.append(Timing(name, d, tuple(times[name])))
            if log is not None:
                print(f"d={d} {name}: {min(times[name]):.4f} s", file=log)
    return timings, checks


def table(timings: Sequence[Timing], checks: Sequence[Agreement], n: int, batch: int) -> str:
    """A text table: seconds min / median / max; then the agreement at each d."""
    runs = len(timings[0].times) if timings else 0
    lines = [
        f"n = {n} instances in batches of {batch}, scale none, seconds over {runs} runs",
        f"{'d':>6}  {'implementation':<18} {'min':>8} {'median':>8} {'max':>8}",
    ]
    fires_median: dict[int, float] = {}
    for t in timings:
        med = statistics.median(t.times)
        row = (
            f"{t.d:>6}  {t.implementation:<18} "
            f"{min(t.times):>8.4f} {med:>8.4f} {max(t.times):>8.4f}"
        )
        if t.implementation == IMPLEMENTATIONS[0]:
            fires_median[t.d] = med
        elif t.d in fires_median and fires_median[t.d] > 0:
            row += f"  ({med / fires_median[t.d]:.2f}x FIRES)"
        lines.append(row)
    for c in checks:
        lines.append(
            f"d = {c.d}: FIRES against the transcription, max relative difference "
            f"mu {c.max_rel_mu:.1e}, sigma {c.max_rel_sigma:.1e}, raw weights "
            f"{c.max_rel_weights:.1e}; top m {'equal' if c.same_top else 'DIFFERENT'}: "
            f"{'agree' if c.holds else 'DISAGREE'} (within {RTOL:g})"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``featurestream bench fires-kernel [--instances N] [--dim D ...] [--repeat R]``."""
    p = argparse.ArgumentParser(
        prog="featurestream bench fires-kernel",
        description="FIRES in process against a plain numpy transcription of its update.",
    )
    p.add_argument("--instances", type=int, default=10_000, help="instances n (default 10,000)")
    p.add_argument(
        "--dim", type=int, action="append", help="features d, repeatable (default 500 and 1,000)"
    )
    p.add_argument("--batch", type=int, default=100, help="instances per batch (default 100)")
    p.add_argument("--top", type=int, default=20, help="num_features m (default 20)")
    p.add_argument("--repeat", type=int, default=5, help="timed runs of each (default 5)")
    p.add_argument("--blas-threads", type=int, default=1, help="BLAS threads (0: leave as is)")
    args = p.parse_args(argv)
    if min(args.instances, args.batch, args.top, args.repeat) < 1:
        p.error("--instances, --batch, --top and --repeat must be at least 1")
    dims = args.dim or [500, 1000]
    if min(dims) < 1:
        p.error("--dim must be at least 1")
    with _blas_threads(args.blas_threads) as note:
        if note:
            print(note, file=sys.stderr)
        timings, checks = run(
            args.instances, dims, args.top, args.batch, args.repeat, log=sys.stderr
        )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(table(timings, checks, args.instances, args.batch))
    print(f"load average (1 min) at the end: {load:.2f} on {os.cpu_count()} CPUs")
    return 0 if all(c.holds for c in checks) else 1


__all__ = ["Agreement", "PlainResult", "Timing", "agreement", "main", "plain_fires", "run", "table"]
