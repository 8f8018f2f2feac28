"""How the cost of a selector grows: per column with n and |S|, per instance with d.

All in process, on dense Gaussian data built for the purpose:

* **per column vs n** (|S| held near 10): the cost of a typical arriving
  column, pure noise, which every selector rejects after its relevance step
  (Alpha-investing: after projecting it on the span of the selected set);
* **per column vs |S|** (n fixed): the cost of an arriving column that is
  relevant and not redundant, the expensive path: SAOLA compares it with every
  member, OSFS and Fast-OSFS search conditioning sets drawn from the selected
  set, Alpha-investing projects it, Grafting re-fits. The selected set is
  first grown to the size by feeding such columns: with u ~ N(0, 1), y =
  sign(u), each column is u + 2 e (e fresh noise), correlated about 0.36 with y
  and about 0.2 with each other, so SAOLA keeps all of them and OSFS finds no
  conditioning set that separates one from y (its worst case). Then
  ``probes`` more such columns are timed, each applied alone to the grown
  state, so every probe meets exactly that |S|.
* **per instance vs d**: OFS, FSDS and FIRES on frames of dense Gaussian
  instances, and OFS on sparse ones (1% non-zeros, ``ofs-sparse``);
* **NRFS, one computation** on a full window of n instances of m features
  (Gaussian clusters): against n at m fixed (axis ``window``) and against m
  at n fixed (axis ``m``). NRFS's per-instance cost is this divided by its
  ``refresh``.

A curve stops growing once a point takes longer than the per-point budget
(OSFS's search grows like |S|^3 per test set size, so its curve is short).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from featurestream.selectors import REGISTRY
from featurestream.selectors.base import FeatureSelector, InstanceSelector

FEATURE_ALGORITHMS = ("saola", "osfs", "fast_osfs", "alpha_investing", "grafting")
INSTANCE_ALGORITHMS = ("ofs", "fsds", "fires")
# Selectors recomputed on a window: timed one computation at a time.
WINDOW_ALGORITHMS = ("nrfs",)
# Share of non-zeros of the sparse OFS series (ofs-sparse).
SPARSE_DENSITY = 0.01


@dataclass(frozen=True)
class Grid:
    ns: tuple[int, ...]
    sizes: tuple[int, ...]
    dims: tuple[int, ...]
    n_for_sizes: int
    size_for_ns: int
    probes: int
    noise_probes: int
    budget: float  # seconds one point may take before its curve stops
    windows: tuple[int, ...] = ()  # NRFS: window sizes n, at m = m_for_windows
    ms: tuple[int, ...] = ()  # NRFS: features m, at n = window_for_ms
    m_for_windows: int = 100
    window_for_ms: int = 500

    @classmethod
    def full(cls) -> Grid:
        return cls(
            ns=(250, 500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000),
            sizes=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1_024),
            dims=(100, 300, 1_000, 3_000, 10_000, 30_000, 100_000),
            n_for_sizes=2_000,
            size_for_ns=10,
            probes=16,
            noise_probes=2_000,
            budget=15.0,
            windows=(250, 500, 1_000, 2_000),
            ms=(50, 200, 1_000),
            m_for_windows=100,
            window_for_ms=500,
        )

    @classmethod
    def quick(cls) -> Grid:
        return cls(
            ns=(200, 800),
            sizes=(1, 4),
            dims=(50, 200),
            n_for_sizes=400,
            size_for_ns=4,
            probes=4,
            noise_probes=50,
            budget=2.0,
            windows=(60, 120),
            ms=(20, 60),
            m_for_windows=20,
            window_for_ms=60,
        )


@dataclass
class ScalingPoint:
    algorithm: str
    axis: str  # "n", "size" (|S|) or "d"; NRFS: "window" or "m"
    x: int  # n, |S| before the probes, or d; NRFS: the window n or m
    n: int  # rows; NRFS: the window n
    size: int  # |S|; NRFS: m
    seconds_per_item: float  # NRFS: seconds per computation
    items: int  # NRFS: computations timed


def _relevant_columns(rng: np.random.Generator, u: np.ndarray[Any, Any], m: int) -> Any:
    return u[None, :] + 2.0 * rng.normal(size=(m, u.shape[0]))


def _feature_selector(algorithm: str, y: Any) -> FeatureSelector[Any, Any]:
    cls = REGISTRY[algorithm]
    assert issubclass(cls, FeatureSelector)
    return cls.start(cls.params_type.from_mapping({}), y)


def _grow(
    sel: FeatureSelector[Any, Any],
    rng: np.random.Generator,
    u: Any,
    size: int,
    deadline: float,
    counter: list[int],
) -> bool:
    """Feed relevant columns until |S| reaches ``size``; False when out of time.

    A selector may stop accepting such columns before (Alpha-investing's wealth
    runs out as the fit improves): after a bounded number of tries the point
    is measured at the size reached.
    """
    tries = 0
    while len(sel.selected()) < size:
        if time.perf_counter() > deadline:
            return False
        if tries > 20 * size + 50:
            return True
        # Small batches: the deadline is looked at between them.
        need = min(8, size - len(sel.selected()))
        cols = _relevant_columns(rng, u, need)
        names = [f"s{counter[0] + k}" for k in range(need)]
        counter[0] += need
        tries += need
        sel.learn_features(names, cols)
    return True


def feature_point(
    algorithm: str, n: int, size: int, probes: int, noise: bool, budget: float, seed: int = 0
) -> ScalingPoint | None:
    """One point: grow |S| to ``size`` at ``n`` rows, then time ``probes`` columns."""
    rng = np.random.default_rng([seed, n, size])
    u = rng.normal(size=n)
    y = np.where(u > 0, 1.0, 0.0)
    sel = _feature_selector(algorithm, y)
    deadline = time.perf_counter() + budget
    counter = [0]
    if not _grow(sel, rng, u, size, deadline, counter):
        return None
    before = len(sel.selected())
    if noise:
        cols = rng.normal(size=(probes, n))
        t0 = time.perf_counter()
        sel.learn_features([f"p{k}" for k in range(probes)], cols)
        dt = time.perf_counter() - t0
    else:
        # Every probe meets the same selected set: it is applied to a selector resumed
        # from the grown state (resuming, which rebuilds caches, is not timed).
        cls = type(sel)
        grown = sel.snapshot()
        dt = 0.0
        for k in range(probes):
            col = _relevant_columns(rng, u, 1)
            fresh = cls.resume(sel.params, grown)
            t0 = time.perf_counter()
            fresh.learn_features([f"p{k}"], col)
            dt += time.perf_counter() - t0
            if time.perf_counter() > deadline + budget:
                probes = k + 1
                break
    axis = "n" if noise else "size"
    return ScalingPoint(algorithm, axis, n if noise else before, n, before, dt / probes, probes)


def instance_point(
    algorithm: str,
    d: int,
    budget: float,
    frame: int = 100,
    seed: int = 0,
    density: float | None = None,
) -> ScalingPoint:
    """Time frames of instances at dimension d until about a second is spent.

    Dense Gaussian instances, or with ``density`` sparse CSR ones holding about
    that share of non-zeros (at least 2: the two that decide the label). The
    point is named ``<algorithm>-sparse`` then.
    """
    import scipy.sparse

    rng = np.random.default_rng([seed, d])
    cls = REGISTRY[algorithm]
    assert issubclass(cls, InstanceSelector)
    params: dict[str, Any] = {"num_features": 10}
    if density is not None:
        # Standardising densifies a sparse instance: sparse streams learn from the
        # values as sent (docs/algorithms/ofs.md, "Scaling").
        params["scale"] = "none"
    sel = cls.start(cls.params_type.from_mapping(params), [f"x{j}" for j in range(d)])
    spent = 0.0
    items = 0
    target = min(1.0, budget / 4)
    while spent < target and items < 20_000:
        X: Any
        if density is None:
            X = rng.normal(size=(frame, d))
            y = np.where(X[:, 0] + X[:, 1] > 0, 1.0, -1.0)
        else:
            X = scipy.sparse.random(frame, d, density=density, format="lil", random_state=rng)
            X[:, :2] = rng.normal(size=(frame, 2))
            X = X.tocsr()
            y = np.where(X[:, 0].toarray().ravel() + X[:, 1].toarray().ravel() > 0, 1.0, -1.0)
        t0 = time.perf_counter()
        if cls.supervised:
            sel.learn_instances(X, y)
        else:
            sel.learn_instances(X)
        spent += time.perf_counter() - t0
        items += frame
    name = algorithm if density is None else f"{algorithm}-sparse"
    return ScalingPoint(name, "d", d, 0, 0, spent / items, items)


def window_point(algorithm: str, n: int, m: int, seed: int = 0) -> ScalingPoint:
    """Time one computation of a window selector (NRFS) on n instances of m features.

    The instances form four Gaussian clusters told apart by 10 of the m
    features (all of them when m <= 10); the rest are noise. The selector's
    window is n and its first computation waits for n instances, so one
    ``learn_instances`` of the n rows computes once; that call is timed.
    """
    rng = np.random.default_rng([seed, n, m])
    informative = min(10, m)
    centres = 3.0 * rng.normal(size=(4, informative))
    X = rng.normal(size=(n, m))
    X[:, :informative] += centres[rng.integers(0, 4, size=n)]
    cls = REGISTRY[algorithm]
    assert issubclass(cls, InstanceSelector)
    params = {"num_features": min(10, m), "window": n, "min_instances": n}
    sel = cls.start(cls.params_type.from_mapping(params), [f"x{j}" for j in range(m)])
    t0 = time.perf_counter()
    sel.learn_instances(X)
    dt = time.perf_counter() - t0
    return ScalingPoint(algorithm, "window", n, n, m, dt, 1)


def run_scaling(
    grid: Grid,
    feature_algorithms: Sequence[str] = FEATURE_ALGORITHMS,
    instance_algorithms: Sequence[str] = INSTANCE_ALGORITHMS,
    log: Any = None,
    window_algorithms: Sequence[str] = WINDOW_ALGORITHMS,
) -> list[ScalingPoint]:
    """Every curve of the grid; a curve ends at its first point over the budget."""
    points: list[ScalingPoint] = []

    def note(p: ScalingPoint | None, what: str) -> None:
        if log is not None:
            shown = "over budget" if p is None else f"{p.seconds_per_item * 1e3:.3f} ms"
            print(f"  {what}: {shown}", file=log, flush=True)

    for algorithm in feature_algorithms:
        for n in grid.ns:
            p = feature_point(algorithm, n, grid.size_for_ns, grid.noise_probes, True, grid.budget)
            note(p, f"{algorithm} n={n}")
            if p is None:
                break
            points.append(p)
            if p.seconds_per_item * p.items > grid.budget:
                break
        reached = -1
        for size in grid.sizes:
            p = feature_point(algorithm, grid.n_for_sizes, size, grid.probes, False, grid.budget)
            note(p, f"{algorithm} |S|={size}")
            if p is None or p.x <= reached:
                break  # over the budget, or the selector accepts no more such columns
            reached = p.x
            points.append(p)
            if p.seconds_per_item * p.items > grid.budget:
                break
            if p.seconds_per_item * p.items > grid.budget:
                break
    for algorithm in instance_algorithms:
        for d in grid.dims:
            p2 = instance_point(algorithm, d, grid.budget)
            note(p2, f"{algorithm} d={d}")
            points.append(p2)
    if "ofs" in instance_algorithms:
        # OFS reads a sparse instance in O(B + nnz): 1% non-zeros, d from 1,000 up.
        for d in grid.dims:
            if d >= 1_000 or d == grid.dims[-1]:
                p3 = instance_point("ofs", d, grid.budget, density=SPARSE_DENSITY)
                note(p3, f"ofs-sparse d={d}")
                points.append(p3)
    for algorithm in window_algorithms:
        # A first computation pays for lazy imports and BLAS start-up: not timed.
        window_point(algorithm, 20, 5)
        # One computation vs the window n at m fixed, then vs m at n fixed.
        for n in grid.windows:
            p4 = window_point(algorithm, n, grid.m_for_windows)
            note(p4, f"{algorithm} window={n} m={grid.m_for_windows}")
            points.append(p4)
            if p4.seconds_per_item > grid.budget:
                break
        for m in grid.ms:
            p4 = window_point(algorithm, grid.window_for_ms, m)
            p4.axis, p4.x = "m", m
            note(p4, f"{algorithm} m={m} window={grid.window_for_ms}")
            points.append(p4)
            if p4.seconds_per_item > grid.budget:
                break
    return points


def plot(points: Sequence[ScalingPoint], path: Path) -> bool:
    """Log-log panels into ``path`` (PNG); False when matplotlib is missing.

    Three panels (per column vs n and |S|, per instance vs d), and a fourth
    for NRFS's computations when there are any.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    windowed = any(p.axis in ("window", "m") for p in points)
    fig, axes = plt.subplots(
        1, 4 if windowed else 3, figsize=(20 if windowed else 15, 4.6), constrained_layout=True
    )
    sizes = sorted(p.size for p in points if p.axis == "n")
    typical = sizes[len(sizes) // 2] if sizes else 0
    panels = [
        ("n", "rows n", "seconds per column", f"Noise column vs n (|S| ~ {typical})"),
        ("size", "selected features |S|", "seconds per column", "Relevant column vs |S|"),
        ("d", "features d", "seconds per instance", "Instance vs d (dense; ofs-sparse: 1%)"),
    ]
    if windowed:
        panels.append(
            (
                "window m",
                "window n, or features m",
                "seconds per computation",
                "NRFS: one computation",
            )
        )
    every = (*FEATURE_ALGORITHMS, *INSTANCE_ALGORITHMS, "ofs-sparse", *WINDOW_ALGORITHMS)
    markers = dict(zip(every, "osD^vosP*X", strict=True))
    # One colour per algorithm across the panels.
    colours = {name: f"C{i}" for i, name in enumerate(every)}
    for ax, (axis, xlabel, ylabel, title) in zip(axes, panels, strict=True):
        names = sorted({p.algorithm for p in points if p.axis in axis.split()})
        for name in names:
            for sub in axis.split():
                pts = sorted((p for p in points if p.axis == sub and p.algorithm == name), key=_x)
                if not pts:
                    continue
                ax.plot(
                    [p.x for p in pts],
                    [p.seconds_per_item for p in pts],
                    marker=markers.get(name, "o"),
                    color=colours.get(name),
                    linestyle="--" if sub == "m" else "-",
                    label=_series(name, sub, pts[0]),
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if names:
            ax.legend(fontsize="small")
    fig.suptitle("featurestream selectors in process: cost per column and per instance")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _x(p: ScalingPoint) -> int:
    return p.x


def _series(name: str, axis: str, p: ScalingPoint) -> str:
    """A curve's legend: the algorithm, and for NRFS what is held fixed."""
    if axis == "window":
        return f"{name} vs n (m = {p.size})"
    if axis == "m":
        return f"{name} vs m (n = {p.n})"
    return name


def slope(points: Sequence[ScalingPoint], algorithm: str, axis: str) -> float | None:
    """The log-log slope of a curve (least squares): the exponent of its growth."""
    pts = [p for p in points if p.algorithm == algorithm and p.axis == axis and p.x > 0]
    if len(pts) < 2:
        return None
    xs = np.log([p.x for p in pts])
    ys = np.log([max(p.seconds_per_item, 1e-12) for p in pts])
    if np.ptp(xs) == 0:
        return None
    return float(np.polyfit(xs, ys, 1)[0])


def table(points: Sequence[ScalingPoint]) -> str:
    lines = [f"{'algorithm':<16}{'axis':<7}{'x':>8}{'n':>8}{'|S|':>6}{'ms/item':>12}{'items':>7}"]
    for p in points:
        lines.append(
            f"{p.algorithm:<16}{p.axis:<7}{p.x:>8}{p.n:>8}{p.size:>6}"
            f"{p.seconds_per_item * 1e3:>12.4f}{p.items:>7}"
        )
    exps = []
    for name in (*FEATURE_ALGORITHMS, *INSTANCE_ALGORITHMS, *WINDOW_ALGORITHMS):
        for axis in ("n", "size", "d", "window", "m"):
            s = slope(points, name, axis)
            if s is not None and not math.isnan(s):
                exps.append(f"{name} vs {axis}: {s:.2f}")
    if any(p.axis in ("window", "m") for p in points):
        lines.append("NRFS rows: |S| is m, and an item is one computation on a full window")
    if exps:
        lines.append("log-log slopes: " + "; ".join(exps))
    return "\n".join(lines)


__all__ = [
    "FEATURE_ALGORITHMS",
    "INSTANCE_ALGORITHMS",
    "WINDOW_ALGORITHMS",
    "Grid",
    "ScalingPoint",
    "feature_point",
    "instance_point",
    "plot",
    "run_scaling",
    "slope",
    "table",
    "window_point",
]
