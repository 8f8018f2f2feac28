"""The compiled OFS kernel against the rules written out plainly in numpy.

``_plain`` is docs/algorithms/ofs.md, "Exact rules" (and "Scaling", OFS-P),
one numpy call after another per instance, with correctly rounded dot
products (``math.fsum``) and a full sort for Truncate. The kernel must make
the same decisions (predictions, mistakes, the selected features) with
weights within 1e-9 relative, dense and sparse, in any framing; dense and
sparse rows give the same bits.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from featurestream.selectors import _ofs_kernel
from featurestream.selectors.ofs import OFS, OFSParams
from tests.unit.selectors.common import blob


def _plain_scaled(X: np.ndarray, scale: str) -> np.ndarray:
    """The instances as OFS learns from them: standardised, max-abs scaled or as sent."""
    m, d = X.shape
    Z = np.zeros((m, d))
    mean, M2, top = np.zeros(d), np.zeros(d), np.zeros(d)
    for t in range(1, m + 1):
        x = X[t - 1]
        if scale == "standard":
            delta = x - mean
            mean = mean + delta / t
            M2 = M2 + delta * (x - mean)
            var = M2 / t
            for j in range(d):
                Z[t - 1, j] = (x[j] - mean[j]) / math.sqrt(var[j]) if var[j] > 0 else 0.0
        elif scale == "maxabs":
            top = np.maximum(top, np.abs(x))
            for j in range(d):
                Z[t - 1, j] = x[j] / top[j] if top[j] > 0 else 0.0
        else:
            Z[t - 1] = x
    return Z


def _plain(X: np.ndarray, y: np.ndarray, p: OFSParams) -> tuple[np.ndarray, list[int], int, bool]:
    """(w, predictions, mistakes, ill-conditioned) of OFS / OFS-P by the written rules.

    A decision is ill-conditioned when w . x lies within rounding (1e-9 of the
    sum of |w_j x_j|) of 0 or of the margin: another order of summation may
    decide it the other way. ||w~|| is summed in the kernel's order, so that
    the projection rounds the same way and ties at the cut stay ties.
    """
    X = _plain_scaled(X, p.scale)
    m, d = X.shape
    B = min(p.num_features, d)
    keep = (1.0 - p.decay) * (1.0 if p.half_life is None else 2.0 ** (-1.0 / p.half_life))
    w = np.zeros(d)
    preds: list[int] = []
    ill = False
    for t in range(m):
        yt = -1.0 if y[t] == 0 else 1.0
        x, step = X[t], X[t]
        if p.mode == "partial":
            rng = np.random.default_rng([p.seed, t])
            idx = (
                rng.choice(d, size=B, replace=False)
                if rng.random() < p.epsilon
                else np.flatnonzero(w)
            )
            x, step = np.zeros(d), np.zeros(d)
            x[idx] = X[t, idx]
            step[idx] = X[t, idx] / (B / d * p.epsilon + (w[idx] != 0) * (1 - p.epsilon))
        f = math.fsum(w * x)  # correctly rounded: exact cancellations give 0
        size = 1e-9 * float(np.abs(w * x).sum())
        terms = np.count_nonzero(w * x)  # two or fewer add up correctly rounded in any order
        ill = ill or (terms > 2 and min(abs(f), abs(yt * f - p.margin)) <= size)
        preds.append(1 if f >= 0 else -1)
        if yt * f <= p.margin:
            w = keep * w + p.eta * yt * step
            # ||w~||: the squares of its non-zeros added in index order.
            norm = math.sqrt(functools.reduce(operator.add, (v * v for v in w[w != 0]), 0.0))
            if math.sqrt(p.lam) * norm > 1.0:
                w = (1.0 / (math.sqrt(p.lam) * norm)) * w
            order = np.lexsort((np.arange(d), -np.abs(w)))  # |w| descending, then index
            w[order[p.num_features :]] = 0.0
        else:
            w = keep * w
    mistakes = sum(int(pr != (-1 if yt == 0 else 1)) for pr, yt in zip(preds, y, strict=True))
    return w, preds, mistakes, ill


def _check(
    params: dict[str, Any], X: np.ndarray, y: np.ndarray, frames: int = 1, drawn: bool = False
) -> OFS:
    """Learn X in ``frames`` frames, dense and sparse; both must follow ``_plain``.

    The data must be well-conditioned; ``drawn`` data (hypothesis) that is not
    is drawn again.
    """
    p = OFSParams.from_mapping({"scale": "none", **params})
    m, d = X.shape
    names = [f"x{i}" for i in range(d)]
    w_ref, preds, mistakes, ill = _plain(X, y, p)
    if drawn:
        assume(not ill)
    assert not ill
    runs = []
    for to_input in (np.asarray, sp.csr_matrix):
        sel = OFS.start(p, names)
        got: list[int] = []
        wrong = 0
        bounds = np.linspace(0, m, frames + 1).astype(int).tolist()
        for a, b in itertools.pairwise(bounds):
            u = sel.learn_instances(to_input(X[a:b]), y[a:b])
            got += u.predictions
            wrong += u.mistakes
        assert got == preds
        assert wrong == mistakes
        assert np.flatnonzero(sel.state.w).tolist() == np.flatnonzero(w_ref).tolist()
        np.testing.assert_allclose(sel.state.w, w_ref, rtol=1e-9, atol=0)
        runs.append(sel)
    dense, sparse = runs
    assert blob(dense) == blob(sparse)
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
    {"half_life": 20.0},
    {"scale": "maxabs"},
    {"scale": "maxabs", "margin": 0.0, "decay": 0.002},
    {"half_life": 5.0, "decay": 0.01, "scale": "standard"},
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mode", ["full", "partial"])
@pytest.mark.parametrize(("d", "B"), [(300, 300), (300, 10), (40, 7)])
@pytest.mark.parametrize("density", [1.0, 0.05])
def test_kernel_follows_the_plain_rules(
    variant: dict[str, Any], mode: str, d: int, B: int, density: float
) -> None:
    rng = np.random.default_rng(d + B + int(100 * density))
    X, y = _stream(rng, 150, d, density)
    params = {"num_features": B, "mode": mode, "epsilon": 0.3, "seed": 4, **variant}
    sel = _check(params, X, y, frames=3)
    assert 0 < np.count_nonzero(sel.state.w) <= B


def test_kernel_chunks_of_partial_draws_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch larger than one chunk of draws (16 features, 3 rows of 5 draws).
    monkeypatch.setattr(_ofs_kernel, "CHUNK_ELEMENTS", 16)
    rng = np.random.default_rng(3)
    X, y = _stream(rng, 60, 30, 0.5)
    _check({"num_features": 5, "mode": "partial", "epsilon": 0.5, "seed": 2}, X, y)


@pytest.mark.parametrize("mode", ["full", "partial"])
def test_kernel_chunks_of_standardised_rows_change_nothing(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setattr(_ofs_kernel, "CHUNK_ELEMENTS", 70)  # 2 rows of 30 features
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


def test_kernel_keeps_ties_by_lower_index() -> None:
    # Equal magnitudes everywhere: every truncation is decided by the tie rule.
    X = np.tile([[1.0, -1.0, 1.0, -1.0, 1.0, 1.0, -1.0, 1.0]], (6, 1))
    X[1::2] *= -1.0
    y = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    sel = _check({"num_features": 3, "eta": 0.3, "lam": 1.0}, X, y)
    assert np.flatnonzero(sel.state.w).tolist() == [0, 1, 2]


def test_kernel_truncates_by_hand() -> None:
    # w~ = 0.5 [4, -2, 2, 1] = [2, -1, 1, 0.5] (norm 2.5 < 10): B = 2 keeps 2 and the
    # tie |-1| = |1| goes to the lower index.
    w = np.zeros(4)
    preds, mistakes = _ofs_kernel.learn(
        w, np.array([[4.0, -2.0, 2.0, 1.0]]), np.ones(1), sparse=False, B=2, eta=0.5,
        lam=0.01, margin=1.0, keep=1.0,
    )  # fmt: skip
    # w . x = 0 before the step: a tie, written 0 (it counts as +1 among the mistakes).
    assert (preds.tolist(), mistakes, w.tolist()) == ([0], 0, [2.0, -1.0, 0.0, 0.0])


def test_kernel_projects_by_hand() -> None:
    # lam = 1: radius 1. w~ = [3, 4] has norm 5, so w = [0.6, 0.8].
    w = np.zeros(2)
    _ofs_kernel.learn(
        w, np.array([[3.0, 4.0]]), np.ones(1), sparse=False, B=2, eta=1.0, lam=1.0,
        margin=1.0, keep=1.0,
    )  # fmt: skip
    np.testing.assert_allclose(w, [0.6, 0.8], rtol=1e-15)


# Few distinct values: ties in |w| are common, and so are cancellations to 0.
VALUES = st.sampled_from([0.0, 0.5, -0.5, 1.0, -1.0, 2.0, 3.0, -0.25, 1e-3])


@given(d=st.integers(1, 40), m=st.integers(1, 30), data=st.data())
def test_kernel_follows_the_plain_rules_on_small_streams(
    d: int, m: int, data: st.DataObject
) -> None:
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
        "scale": data.draw(st.sampled_from(["none", "standard", "maxabs"])),
        "half_life": data.draw(st.sampled_from([None, 1.0, 30.0])),
    }
    _check(params, X, y, frames=data.draw(st.integers(1, 3)), drawn=True)


# --------------------------------------------------------------------------- building blocks


@given(
    a=arrays(np.float64, st.integers(1, 60), elements=st.sampled_from([0.0, 1.0, 2.0, 3.0])),
    data=st.data(),
)
def test_kth_largest_and_the_order_it_leaves(a: np.ndarray, data: st.DataObject) -> None:
    n = a.shape[0]
    k = data.draw(st.integers(1, n))
    b = a.copy()
    kth = _ofs_kernel._kth_largest(b, n, k)
    assert kth == np.sort(a)[n - k]
    assert sorted(b.tolist()) == sorted(a.tolist())
    assert (b[n - k :] >= kth).all() and (b[: n - k] <= kth).all()


def test_shape_mismatch_is_refused_before_the_kernel() -> None:
    with pytest.raises(ValueError, match="X must be"):
        _ofs_kernel.learn(
            np.zeros(3), np.zeros((2, 4)), np.ones(2),
            sparse=False, B=1, eta=0.2, lam=0.01, margin=1.0, keep=1.0,
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

    compiled = _ofs_kernel._jit(twice)
    assert compiled(np.arange(3.0)).tolist() == [0.0, 2.0, 4.0]


def test_every_kernel_releases_the_interpreter_lock() -> None:
    # A batch is learnt in a worker thread while the event loop serves reads: a
    # kernel holding the lock would stall the loop for the whole batch.
    from numba.core.registry import CPUDispatcher

    kernels = [obj for obj in vars(_ofs_kernel).values() if isinstance(obj, CPUDispatcher)]
    assert len(kernels) >= 8
    assert [k.py_func.__name__ for k in kernels if not k.targetoptions.get("nogil")] == []
