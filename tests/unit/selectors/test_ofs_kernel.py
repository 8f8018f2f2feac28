"""The compiled OFS kernel against the numpy implementation it replaced.

``_numpy_learn`` is OFS's previous per-instance loop (numpy calls per
instance, sums by ``np.add.reduce`` over the support). The kernel must give
the same predictions, mistakes and weights bit for bit, dense and sparse, with
and without truncation, in both modes and for the decay and margin variants.
With ``scale: "standard"`` the numpy loop learns from the instances as
``_numpy_standardise`` (Welford's update, one numpy row at a time) maps them.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from featurestream.selectors import _ofs_kernel, _ofs_ops, _ofs_partial
from featurestream.selectors.checks import binary_labels
from featurestream.selectors.ofs import OFS, OFSParams, truncate_support


def _union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    c = np.concatenate((a, b))
    c.sort(kind="stable")
    first = np.empty(c.shape[0], dtype=bool)
    if c.shape[0]:
        first[0] = True
        np.not_equal(c[1:], c[:-1], out=first[1:])
    return c[first]


def _observe(p: OFSParams, x: np.ndarray, w: np.ndarray, t: int) -> tuple[np.ndarray, ...]:
    d = x.shape[0]
    B = min(int(p.num_features or 0), d)
    eps = p.epsilon
    rng = np.random.default_rng([p.seed, t])
    explore = rng.random() < eps
    idx = rng.choice(d, size=B, replace=False) if explore else np.flatnonzero(w)
    observed = np.zeros(d)
    observed[idx] = x[idx]
    prob = (B / d) * eps + (w[idx] != 0.0) * (1.0 - eps)
    step = np.zeros(d)
    step[idx] = x[idx] / prob
    return observed, step


def _numpy_learn(
    p: OFSParams, w: np.ndarray, X: Any, y: np.ndarray, t0: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """OFS's previous numpy loop: (w after, predictions, mistakes)."""
    labels = binary_labels(y)
    m, d = X.shape
    B = int(p.num_features or 0)
    w = w.copy()
    S = np.flatnonzero(w)
    keep = 1.0 - p.decay
    radius_inv = math.sqrt(p.lam)
    partial = p.mode == "partial"
    sparse = sp.issparse(X)
    if sparse:
        indptr, indices, values = X.indptr, X.indices, X.data
        x_at = np.zeros(d)
    preds = np.empty(m, dtype=np.int64)
    mistakes = 0
    for i in range(m):
        yi = float(labels[i])
        if sparse and not partial:
            lo, hi = indptr[i], indptr[i + 1]
            idx, vals = indices[lo:hi], values[lo:hi]
            x_at[idx] = vals
            f = float(np.add.reduce(w[S] * x_at[S]))
            x_at[idx] = 0.0
        else:
            x = X[i] if not sparse else X[i].toarray()[0]
            step = x
            if partial:
                x, step = _observe(p, x, w, t0 + i)
            f = float(np.add.reduce(w[S] * x[S]))
        pred = 1 if f >= 0.0 else -1
        preds[i] = pred
        mistakes += pred != yi
        if p.decay:
            w[S] *= keep
            S = S[w[S] != 0.0]
        if yi * f <= p.margin:
            if sparse and not partial:
                w[idx] += vals * (p.eta * yi)
                S = _union(S, idx)
                S = S[w[S] != 0.0]
            else:
                w += step * (p.eta * yi)
                S = w.nonzero()[0]
            S = _project_truncate(w, S, radius_inv, B)
    return w, preds, mistakes


def _project_truncate(w: np.ndarray, S: np.ndarray, radius_inv: float, B: int) -> np.ndarray:
    """The numpy loop's projection and truncation of w (non-zero on S), in place; the new S."""
    ws = w[S]
    norm = math.sqrt(float(np.add.reduce(ws * ws)))
    if radius_inv * norm > 1.0:
        w[S] = ws * (1.0 / (radius_inv * norm))
        S = S[w[S] != 0.0]
    return truncate_support(w, S, B)


def _numpy_standardise(
    X: np.ndarray, count: int, mean: np.ndarray, M2: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """docs/algorithms/ofs.md, "Scaling", with numpy row operations: (Z, mean, M2) after X."""
    Z = np.empty(X.shape)
    for i, x in enumerate(X):
        t = float(count + i + 1)
        delta = x - mean
        mean = mean + delta / t
        M2 = M2 + delta * (x - mean)
        var = M2 / t
        positive = var > 0.0
        Z[i] = np.where(positive, (x - mean) / np.sqrt(np.where(positive, var, 1.0)), 0.0)
    return Z, mean, M2


def _check(params: dict[str, Any], X: np.ndarray, y: np.ndarray, frames: int = 1) -> OFS:
    """Learn X in ``frames`` frames, dense and sparse; assert both equal the numpy loop."""
    p = OFSParams.from_mapping({"scale": "none", **params})
    m, d = X.shape
    names = [f"x{i}" for i in range(d)]
    dense = OFS.start(p, names)
    sparse = OFS.start(p, names)
    w_ref = np.zeros(d)
    mean, M2 = np.zeros(d), np.zeros(d)
    bounds = np.linspace(0, m, frames + 1).astype(int)
    for a, b in itertools.pairwise(bounds.tolist()):
        Xf, yf = X[a:b], y[a:b]
        Zf = Xf
        if p.scale == "standard":
            Zf, mean, M2 = _numpy_standardise(Xf, a, mean, M2)
        w_ref, preds, mistakes = _numpy_learn(p, w_ref, Zf, yf, a)
        for sel, Xin in ((dense, Xf), (sparse, sp.csr_matrix(Xf))):
            u = sel.learn_instances(Xin, yf)
            assert u.predictions == tuple(preds.tolist())
            assert u.mistakes == mistakes
            # Bit for bit, except that the kernel stores a weight that underflows
            # to 0 as +0.0 where the numpy loop could leave -0.0 (+ 0.0 maps -0.0
            # to +0.0 and leaves every other value alone).
            assert sel.state.w.tobytes() == (w_ref + 0.0).tobytes()
            assert not np.signbit(sel.state.w[sel.state.w == 0.0]).any()
            if p.scale == "standard":
                assert sel.state.scale_mean.tobytes() == mean.tobytes()
                assert sel.state.scale_M2.tobytes() == M2.tobytes()
    return dense


def _stream(rng: np.random.Generator, m: int, d: int, density: float) -> tuple[np.ndarray, ...]:
    X = rng.normal(size=(m, d)) * rng.choice([0.01, 1.0, 100.0], size=d)
    X = np.where(rng.random((m, d)) < density, X, 0.0)
    y = (X[:, : max(1, d // 10)].sum(axis=1) + 0.3 * rng.normal(size=m) > 0).astype(float)
    return X, y


VARIANTS = [
    {},
    {"margin": 0.0, "decay": 0.002},
    {"decay": 0.05, "lam": 1.0},
    {"eta": 1.0, "lam": 100.0},
    {"scale": "standard"},
    {"scale": "standard", "margin": 0.0, "decay": 0.002},
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mode", ["full", "partial"])
@pytest.mark.parametrize(("d", "B"), [(300, 300), (300, 10), (300, 100), (40, 7)])
@pytest.mark.parametrize("density", [1.0, 0.05])
def test_kernel_matches_numpy_loop(
    variant: dict[str, Any], mode: str, d: int, B: int, density: float
) -> None:
    rng = np.random.default_rng(d + B + int(100 * density))
    X, y = _stream(rng, 150, d, density)
    params = {
        "num_features": B,
        "mode": mode,
        "epsilon": 0.3,
        "seed": 4,
        "scale": "none",
        **variant,
    }
    sel = _check(params, X, y, frames=3)
    assert 0 < np.count_nonzero(sel.state.w) <= B


def test_kernel_partial_draws_chunked_batch_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch larger than one chunk of draws: chunking must not change anything.
    monkeypatch.setattr(_ofs_partial, "_DRAW_ELEMENTS", 16)
    rng = np.random.default_rng(3)
    X, y = _stream(rng, 60, 30, 0.5)
    _check({"num_features": 5, "mode": "partial", "epsilon": 0.5, "seed": 2}, X, y)


@pytest.mark.parametrize("mode", ["full", "partial"])
def test_kernel_standardised_chunks_match(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    # A batch larger than one chunk of standardised rows: chunking changes nothing.
    monkeypatch.setattr(_ofs_kernel, "_SCALE_ELEMENTS", 70)  # 2 rows of 30 features
    rng = np.random.default_rng(4)
    X, y = _stream(rng, 61, 30, 0.5)
    params = {"num_features": 5, "mode": mode, "epsilon": 0.5, "seed": 2, "scale": "standard"}
    _check(params, X, y, frames=2)


def test_kernel_standardises_with_welford() -> None:
    # Worked by hand: a feature that takes 1, 3, 3 has means 1, 2, 7/3 and
    # population variances 0, 1, 8/9, so it maps to 0, 1, (3 - 7/3) / sqrt(8/9);
    # a constant feature has variance 0 and maps to 0.
    X = np.array([[1.0, 5.0], [3.0, 5.0], [3.0, 5.0]])
    mean, M2 = np.zeros(2), np.zeros(2)
    (lo, Z), *rest = list(
        _ofs_kernel.standardised_chunks(X, sparse=False, count=0, mean=mean, M2=M2)
    )
    assert lo == 0 and not rest
    assert Z[:, 1].tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_allclose(Z[:, 0], [0.0, 1.0, (2 / 3) / math.sqrt(8 / 9)], rtol=1e-15)
    np.testing.assert_allclose(mean, [7 / 3, 5.0], rtol=1e-15)
    np.testing.assert_allclose(M2, [8 / 3, 0.0], atol=1e-15)


def test_kernel_keeps_ties_by_lower_index_after_rounding() -> None:
    # Equal magnitudes everywhere: every truncation is decided by the tie rule.
    X = np.tile([[1.0, -1.0, 1.0, -1.0, 1.0, 1.0, -1.0, 1.0]], (6, 1))
    X[1::2] *= -1.0
    y = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    sel = _check({"num_features": 3, "eta": 0.3, "lam": 1.0}, X, y)
    assert np.flatnonzero(sel.state.w).tolist() == [0, 1, 2]


def _kernel_vs_numpy(w0: np.ndarray, x: np.ndarray, B: int, lam: float) -> np.ndarray:
    """One step of the dense kernel from w0 on x (label +1, eta 1), checked bit for bit."""
    p = OFSParams.from_mapping({"num_features": B, "eta": 1.0, "lam": lam})
    X = x[None, :]
    w_ref, _, _ = _numpy_learn(p, w0, X, np.ones(1), 0)
    w = w0.copy()
    _ofs_kernel.learn_full(
        w, X, np.ones(1), sparse=False, B=B, eta=1.0, lam=lam, margin=1.0, decay=0.0
    )
    assert w.tobytes() == (w_ref + 0.0).tobytes()
    return w


def test_kernel_dense_truncation_sees_ties_the_projection_makes() -> None:
    # |w~| at index 10 is one step below the B-th largest, 1.5 at index 30, but
    # the projection can round both to one value: the tie goes to index 10.
    below = np.nextafter(1.5, 0.0)
    w0 = np.zeros(40)
    w0[[0, 30]] = [5.0, 1.5]
    x = np.zeros(40)
    x[10] = below
    tied = 0
    for lam in np.linspace(1.0, 2.0, 41):
        w = _kernel_vs_numpy(w0, x, 2, float(lam))
        tied += np.flatnonzero(w).tolist() == [0, 10]
    assert tied > 0


def test_kernel_dense_truncation_near_the_subnormals() -> None:
    # The kept magnitudes project below 2^-960: the step decides over every entry.
    w0 = np.zeros(40)
    w0[[0, 30]] = [1e10, 1e-300]
    x = np.zeros(40)
    x[10] = np.nextafter(1e-300, 0.0)
    x[20] = 3e-301
    w = _kernel_vs_numpy(w0, x, 2, 1.0)
    assert 0.0 < abs(w[np.flatnonzero(w)[-1]]) < 2.0**-960


def test_kernel_dense_truncation_at_the_edge_of_the_ball() -> None:
    # ||w~|| within a few units in the last place of 1 / sqrt(lam), on both
    # sides: the step skips the exact norm only where an estimate proves it
    # inside the ball, and agrees bit for bit with the loop either way.
    rng = np.random.default_rng(7)
    d = 1001
    w0 = np.zeros(d)
    w0[[3, 500, 999]] = [2.0, -1.0, 0.5]
    x = rng.normal(size=d)
    wt = w0 + x
    norm = float(np.sqrt(np.add.reduce(wt[wt != 0.0] ** 2)))
    lam = 1.0 / norm**2
    estimate = _ofs_ops._sum_squares_estimate(wt, d)
    shrunk = 0
    proved = 0
    ulps = [*range(-3000, -40, 37), *range(-40, 41)]
    for k in ulps:
        lam_k = lam * (1.0 + k * 2.0**-50)
        w = _kernel_vs_numpy(w0, x, 20, lam_k)
        kept = np.flatnonzero(w)
        shrunk += bool(np.any(w[kept] != wt[kept]))
        proved += _ofs_ops._inside_ball(estimate, math.sqrt(lam_k), d)
    # Both routes taken: proved inside by the estimate, and decided exactly.
    assert 0 < shrunk < len(ulps)
    assert 0 < proved < len(ulps) - shrunk


def test_kernel_dense_truncation_when_the_exact_norm_overflows() -> None:
    # ||w~||^2 within a few units of the largest double and lam subnormal: the
    # exact sum rounds to infinity and projects everything to 0, while a sum in
    # another order stays finite. The estimate must not decide that case.
    big = np.nextafter(np.sqrt(np.finfo(np.float64).max), 0.0)
    while big * big > np.nextafter(np.finfo(np.float64).max, 0.0) - 4 * np.spacing(2.0**1023):
        big = np.nextafter(big, 0.0)
    x = np.zeros(128)
    x[0] = big
    x[8:96:16] = 2.0**485 * (1.0 + 2.0**-20)
    with np.errstate(over="ignore"):  # the reference's sum overflows, as intended
        w = _kernel_vs_numpy(np.zeros(128), x, 3, 5.56268464626729e-309)
    assert not w.any()


def _boundary_radius(estimate: float, d: int) -> float:
    """The largest radius_inv that ``_inside_ball`` accepts for this estimate."""
    # The square root lands within a few units of the edge: a few steps each way.
    r = math.sqrt((1.0 - (d + 16) * 2.0**-50) / estimate)
    for _ in range(64):
        if _ofs_ops._inside_ball(estimate, r, d):
            break
        r = np.nextafter(r, 0.0)
    else:
        raise AssertionError("no accepted radius near the edge")
    for _ in range(64):
        if not _ofs_ops._inside_ball(estimate, np.nextafter(r, np.inf), d):
            return float(r)
        r = np.nextafter(r, np.inf)
    raise AssertionError("the accepted radii do not end near the edge")


@pytest.mark.parametrize("n", [7, 64, 300, 4096, 100_000])
@pytest.mark.parametrize("small", [0.49, 0.51, 1.49, 1.51])
def test_inside_ball_at_its_edge_with_sums_that_round_apart(n: int, small: float) -> None:
    # One large square and many just under or over half (or one and a half)
    # units of it: each addition to the large one rounds the same way, so
    # numpy's order and a vectorised one, which add them to it in different
    # numbers, differ by up to some 1,500 units at n = 100,000, either way. At
    # the largest radius the estimate accepts, the exact test must not project.
    rng = np.random.default_rng(n)
    a = np.full(n, math.sqrt(small * 2.0**-52))
    a *= 1.0 + rng.uniform(0.0, 2.0**-30, n)
    for big_at in (0, n // 2, n - 1):
        b = a.copy()
        b[big_at] = 1.0
        exact = float(np.sqrt(np.add.reduce(b[b != 0.0] ** 2)))
        estimate = _ofs_ops._sum_squares_estimate(b, n)
        r = _boundary_radius(estimate, n)
        assert not r * exact > 1.0


@given(
    arrays(np.float64, st.integers(1, 300), elements=st.floats(-1e6, 1e6, width=64)),
    st.integers(-64, 64),
)
def test_inside_ball_never_contradicts_the_exact_norm(a: np.ndarray, ulps: int) -> None:
    # Whenever the estimate says "inside", the exact test (numpy's sum of the
    # non-zero squares) does not project; radius near the norm, both sides.
    sq = a[a != 0.0] ** 2
    exact = float(np.sqrt(np.add.reduce(sq)))
    assume(exact > 1e-150)
    radius_inv = (1.0 / exact) * (1.0 + ulps * 2.0**-52)
    estimate = _ofs_ops._sum_squares_estimate(a, a.shape[0])
    if _ofs_ops._inside_ball(estimate, radius_inv, a.shape[0]):
        assert not radius_inv * exact > 1.0
    # Far inside is always proved.
    assert _ofs_ops._inside_ball(estimate, radius_inv / 2.0, a.shape[0])


@pytest.mark.parametrize(
    ("d", "B", "values"),
    [(1001, 20, None), (257, 3, None), (96, 24, None), (90, 24, None), (201, 12, (1.0, -1.0, 2.0))],
)
def test_kernel_dense_truncation_groups_and_candidates(
    d: int, B: int, values: tuple[float, ...] | None
) -> None:
    # d well above B (the groups fold several times), odd d (an entry in no pair),
    # d between 2B and 4B (no fold), and few distinct values (ties at the bound).
    rng = np.random.default_rng(d + B)
    if values is None:
        X, y = _stream(rng, 120, d, 1.0)
    else:
        X = rng.choice(values, size=(120, d))
        y = (X[:, :5].sum(axis=1) > 0).astype(float)
    for params in ({"num_features": B}, {"num_features": B, "decay": 0.01, "lam": 1.0}):
        sel = _check(params, X, y, frames=2)
        assert 0 < np.count_nonzero(sel.state.w) <= B


# Few distinct values: ties in |w| are common, and so are cancellations to 0.
VALUES = st.sampled_from([0.0, 0.5, -0.5, 1.0, -1.0, 2.0, 3.0, -0.25, 1e-3])


@given(
    d=st.integers(1, 40),
    m=st.integers(1, 30),
    data=st.data(),
)
def test_kernel_matches_numpy_loop_on_small_streams(d: int, m: int, data: st.DataObject) -> None:
    X = data.draw(arrays(np.float64, (m, d), elements=VALUES))
    y = np.array(data.draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=m, max_size=m)))
    params = {
        "num_features": data.draw(st.integers(1, d + 1)),
        "eta": data.draw(st.sampled_from([0.2, 0.5, 1.0])),
        "lam": data.draw(st.sampled_from([0.01, 1.0, 4.0])),
        "margin": data.draw(st.sampled_from([0.0, 1.0])),
        "decay": data.draw(st.sampled_from([0.0, 0.01])),
        "mode": data.draw(st.sampled_from(["full", "partial"])),
        "epsilon": data.draw(st.sampled_from([0.2, 1.0])),
        "seed": data.draw(st.integers(0, 3)),
        "scale": data.draw(st.sampled_from(["none", "standard"])),
    }
    _check(params, X, y, frames=data.draw(st.integers(1, 3)))


# --------------------------------------------------------------------------- building blocks


def test_sum_is_numpy_pairwise_summation() -> None:
    # Lengths around numpy's block of 128 and its splits at multiples of 8.
    rng = np.random.default_rng(0)
    for n in [*range(300), 1000, 1031, 4096, 10_007, 100_000]:
        a = rng.normal(size=n) * np.exp(rng.uniform(-30, 30, size=n))
        assert _ofs_ops._sum(a, n) == np.add.reduce(a), n


@given(
    a=arrays(np.float64, st.integers(1, 60), elements=st.sampled_from([0.0, 1.0, 2.0, 3.0])),
    data=st.data(),
)
def test_select_finds_the_kth_smallest(a: np.ndarray, data: st.DataObject) -> None:
    k = data.draw(st.integers(0, a.shape[0] - 1))
    assert _ofs_ops._select(a.copy(), a.shape[0], k) == np.sort(a)[k]


def test_shape_mismatch_is_refused_before_the_kernel() -> None:
    with pytest.raises(ValueError, match="X must be"):
        _ofs_kernel.learn_full(
            np.zeros(3), np.zeros((2, 4)), np.ones(2),
            sparse=False, B=1, eta=0.2, lam=0.01, margin=1.0, decay=0.0,
        )  # fmt: skip


# --------------------------------------------------------------------------- packaging


def test_selectors_import_without_numba() -> None:
    # numba is imported on OFS's first batch, not with the package.
    code = "import sys, featurestream.selectors; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_jit_compiles_without_a_writable_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    # A read-only install with no writable cache directory: numba refuses cache=True
    # (RuntimeError, no locator); the kernels must still compile, just uncached.
    import numba.core.caching

    def unwritable(self: object) -> None:
        raise PermissionError("read-only")

    monkeypatch.setattr(numba.core.caching._CacheLocator, "ensure_cache_path", unwritable)

    def twice(a: np.ndarray) -> np.ndarray:
        return a * 2.0

    compiled = _ofs_ops._jit(twice)
    assert compiled(np.arange(3.0)).tolist() == [0.0, 2.0, 4.0]


def test_every_kernel_releases_the_interpreter_lock() -> None:
    # A batch is learnt in a worker thread while the event loop serves reads: a
    # kernel holding the lock would stall the loop for the whole batch.
    from numba.core.registry import CPUDispatcher

    kernels = [
        obj
        for module in (_ofs_ops, _ofs_kernel, _ofs_partial)
        for obj in vars(module).values()
        if isinstance(obj, CPUDispatcher)
    ]
    assert len(kernels) >= 10
    assert [k.py_func.__name__ for k in kernels if not k.targetoptions.get("nogil")] == []


# --------------------------------------------------------------------------- one step


def _step(
    w0: np.ndarray, x: np.ndarray, c: float, B: int, radius_inv: float
) -> tuple[np.ndarray, list[int]]:
    """One truncating dense step of the kernel from w0, checked bit for bit against numpy.

    The reference is the numpy loop's step: w~ = w0 + x c, then
    ``_project_truncate``.
    """
    d = w0.shape[0]
    nS = int(np.count_nonzero(w0))
    S = np.zeros(d, dtype=np.int64)
    S[:nS] = np.flatnonzero(w0)
    w = w0.copy()
    scratch = [np.empty(d), np.empty(d, dtype=np.int64), np.empty(d, dtype=np.int64)]
    kept = _ofs_kernel._dense_step_truncate(
        w, x, c, S, nS, B, radius_inv, *scratch, np.empty(d), np.empty(d), np.empty(d + B)
    )
    ref = w0 + x * c
    with np.errstate(over="ignore", under="ignore"):
        _project_truncate(ref, np.flatnonzero(ref), radius_inv, B)
    assert w.tobytes() == (ref + 0.0).tobytes()
    assert S[:kept].tolist() == np.flatnonzero(w).tolist()
    return w, S[:kept].tolist()


MAGNITUDES = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 1e-3])
EXTREMES = st.sampled_from([1e-170, 1e150, 2.0**-1074, 1e-3])


@settings(max_examples=400)
@given(
    d=st.integers(2, 70),
    data=st.data(),
)
def test_a_truncating_step_is_the_numpy_step_bit_for_bit(d: int, data: st.DataObject) -> None:
    # Few distinct magnitudes (ties at the bound, entries of S paired with each other
    # or with ties), odd and even d, d from B + 1 up (below and above 2B), now and then
    # values whose squares underflow or overflow, and balls from far inside to outside.
    B = data.draw(st.integers(1, d - 1))
    signs = st.sampled_from([1.0, -1.0])
    extreme = data.draw(st.booleans())

    def magnitude() -> float:
        if extreme and data.draw(st.integers(0, 7)) == 0:
            return data.draw(EXTREMES)
        return data.draw(MAGNITUDES)

    x = np.array([magnitude() * data.draw(signs) for _ in range(d)])
    support = data.draw(st.lists(st.integers(0, d - 1), max_size=B, unique=True))
    w0 = np.zeros(d)
    for j in support:
        w0[j] = (magnitude() or 1.5) * data.draw(signs)
    c = data.draw(st.sampled_from([0.2, -0.2, 1.0, -3.0, 0.7, -0.05, 1e-160, 1e160]))
    with np.errstate(over="ignore", under="ignore"):
        # An infinite w~ makes the state non-finite, which OFS refuses (the numpy
        # step gives NaN there): not a step the kernel is asked to take.
        assume(bool(np.isfinite(w0 + x * c).all()))
        norm = float(np.sqrt(np.add.reduce((w0 + x * c) ** 2)))
    factor = data.draw(st.sampled_from([0.1, 0.5, 0.9, 1.0, 2.0]))
    radius_inv = (
        factor / norm
        if 0.0 < norm < math.inf and data.draw(st.booleans())
        else data.draw(st.sampled_from([1e-200, 1e-3, 1.0, 1e3, 1e200]))
    )
    _step(w0, x, c, B, radius_inv)


def test_a_truncating_step_inside_and_outside_the_ball() -> None:
    # Well inside (the bound proves it), near the edge on both sides (the bound
    # over-counts the squares of x c at S: the exact norm decides), and outside.
    rng = np.random.default_rng(11)
    d, B = 1001, 20
    w0 = np.zeros(d)
    w0[rng.choice(d, size=B, replace=False)] = rng.normal(size=B)
    x = rng.normal(size=d)
    c = -0.2
    wt = w0 + x * c
    norm = math.sqrt(float(np.add.reduce(wt[wt != 0.0] ** 2)))
    bound = _ofs_kernel._bound_outside(x, c, d) + float(np.sum(wt[w0 != 0.0] ** 2))
    proved = []
    for factor in (0.5, 0.9, 1.0 - 1e-3, 1.0 - 1e-12, 1.0, 1.0 + 1e-12, 2.0):
        radius_inv = factor / norm
        proved.append(_ofs_ops._inside_ball(bound, radius_inv, d))
        w, kept = _step(w0, x, c, B, radius_inv)
        assert len(kept) == B
        # Past the edge the kept values are projected, inside they are w~ itself.
        assert (w[kept] == wt[kept]).all() == (factor <= 1.0)
    assert proved == [True, True, False, False, False, False, False]


def test_the_bound_of_the_entries_outside_s_holds_where_squares_underflow() -> None:
    # x_j^2 underflows to 0 while (x_j c)^2 does not: the bound still covers the
    # step's squares; a c whose square is not normal proves nothing.
    x = np.full(64, 1e-170)
    exact = float(np.add.reduce((x * 1e10) ** 2))
    assert exact > 0.0 and float(np.add.reduce(x * x)) == 0.0
    assert _ofs_kernel._bound_outside(x, 1e10, 64) >= exact
    assert _ofs_kernel._bound_outside(x, 1e-160, 64) == math.inf
    assert _ofs_kernel._bound_outside(np.full(8, 1e200), 1.0, 8) == math.inf
