"""Compiled per-instance updates of OFS-P, the partial-input mode of OFS.

OFS-P draws the features it observes from ``numpy.random.default_rng([seed,
t])``, which compiled code cannot reproduce: ``partial_draws`` makes the draws
in Python (they do not depend on w) and the kernels here apply them, a bounded
number of rows at a time. See ``_ofs_kernel`` for the full-input mode; like
its kernels, these run without the interpreter lock.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from featurestream.selectors._ofs_ops import (
    BoolVector,
    IntVector,
    Matrix,
    Vector,
    _after_step,
    _check_shapes,
    _csr_parts,
    _decay,
    _dot,
    _jit,
    _merge,
    _support,
)

# Cap on the OFS-P draws held at once, in indices (8 MiB): a batch is applied in
# chunks of rows whose draws fit.
_DRAW_ELEMENTS = 1 << 20


@_jit
def _partial_instance(
    w: Vector,
    S: IntVector,
    nS: int,
    x: Vector,
    yi: float,
    explore: bool,
    chosen: IntVector,
    clo: int,
    chi: int,
    B: int,
    eta: float,
    radius_inv: float,
    margin: float,
    decay: float,
    base: float,
    rest: float,
    bufs: Matrix,
    idx: IntVector,
    out: IntVector,
) -> tuple[int, int]:
    """One OFS-P update from the dense instance x; returns (prediction, new |S|).

    Observed are chosen[clo:chi] (explore) or S (exploit). The observation
    probability of feature j is ``base + rest * 1[w_j != 0]`` with base =
    (B/d) epsilon and rest = 1 - epsilon, w taken before the decay.
    ``bufs`` holds four scratch rows of length d: the observed instance
    (zero outside the explored features), the steps, sums and a heap.
    """
    obs = bufs[0]
    step = bufs[1]
    tmp = bufs[2]
    heap = bufs[3]
    if explore:
        nidx = chi - clo
        for q in range(nidx):
            j = chosen[clo + q]
            idx[q] = j
            obs[j] = x[j]
            step[q] = x[j] / (base + rest if w[j] != 0.0 else base)
        f = _dot(w, obs, S, nS, tmp)
        for q in range(nidx):
            obs[idx[q]] = 0.0
    else:
        # Every feature with w_j != 0 is observed: x itself at S.
        nidx = nS
        prob = base + rest
        for q in range(nidx):
            j = S[q]
            idx[q] = j
            step[q] = x[j] / prob
        f = _dot(w, x, S, nS, tmp)
    pred = 1 if f >= 0.0 else -1  # sign(0) = +1
    if decay != 0.0:
        nS = _decay(w, S, nS, 1.0 - decay)
    if yi * f <= margin:
        c = eta * yi
        for q in range(nidx):
            j = idx[q]
            w[j] = w[j] + step[q] * c
        nS = _merge(w, S, nS, idx, 0, nidx, out)
        nS = _after_step(w, S, nS, B, radius_inv, tmp, heap)
    return pred, nS


@_jit
def _learn_partial_dense(
    w: Vector,
    X: Matrix,
    labels: Vector,
    explore: BoolVector,
    offsets: IntVector,
    chosen: IntVector,
    B: int,
    eta: float,
    radius_inv: float,
    margin: float,
    decay: float,
    base: float,
    rest: float,
    preds: IntVector,
) -> int:
    """OFS-P over the dense rows of X with the given draws; returns the mistakes."""
    m, d = X.shape
    S = np.empty(d, dtype=np.int64)
    idx = np.empty(d, dtype=np.int64)
    out = np.empty(d, dtype=np.int64)
    bufs = np.zeros((4, d))
    nS = _support(w, S)
    mistakes = 0
    for i in range(m):
        yi = labels[i]
        pred, nS = _partial_instance(
            w,
            S,
            nS,
            X[i],
            yi,
            explore[i],
            chosen,
            offsets[i],
            offsets[i + 1],
            B,
            eta,
            radius_inv,
            margin,
            decay,
            base,
            rest,
            bufs,
            idx,
            out,
        )
        preds[i] = pred
        mistakes += pred != yi
    return mistakes


@_jit
def _learn_partial_sparse(
    w: Vector,
    indptr: IntVector,
    indices: IntVector,
    data: Vector,
    labels: Vector,
    explore: BoolVector,
    offsets: IntVector,
    chosen: IntVector,
    B: int,
    eta: float,
    radius_inv: float,
    margin: float,
    decay: float,
    base: float,
    rest: float,
    preds: IntVector,
) -> int:
    """OFS-P over canonical CSR rows with the given draws; returns the mistakes."""
    d = w.shape[0]
    m = labels.shape[0]
    S = np.empty(d, dtype=np.int64)
    idx = np.empty(d, dtype=np.int64)
    out = np.empty(d, dtype=np.int64)
    bufs = np.zeros((4, d))
    x = np.zeros(d)  # the instance expanded, as OFS-P reads any feature of it
    nS = _support(w, S)
    mistakes = 0
    for i in range(m):
        lo = indptr[i]
        hi = indptr[i + 1]
        for p in range(lo, hi):
            x[indices[p]] = data[p]
        yi = labels[i]
        pred, nS = _partial_instance(
            w,
            S,
            nS,
            x,
            yi,
            explore[i],
            chosen,
            offsets[i],
            offsets[i + 1],
            B,
            eta,
            radius_inv,
            margin,
            decay,
            base,
            rest,
            bufs,
            idx,
            out,
        )
        for p in range(lo, hi):
            x[indices[p]] = 0.0
        preds[i] = pred
        mistakes += pred != yi
    return mistakes


def partial_draws(
    seed: int, t0: int, m: int, d: int, B: int, epsilon: float
) -> tuple[BoolVector, IntVector, IntVector]:
    """The OFS-P draws of instances t0 .. t0 + m - 1 (they do not depend on w).

    Instance t draws from ``numpy.random.default_rng([seed, t])`` a uniform u
    and, when u < epsilon, min(B, d) features without replacement.

    Returns
    -------
    explore : (m,) whether instance t0 + i explores.
    offsets : (m + 1,) instance i's features are ``chosen[offsets[i]:offsets[i + 1]]``.
    chosen : the explored features of each exploring instance, sorted.

    Examples
    --------
    >>> explore, offsets, chosen = partial_draws(7, 0, 3, 4, 2, 1.0)
    >>> explore.tolist(), offsets.tolist(), len(chosen)
    ([True, True, True], [0, 2, 4, 6], 6)
    """
    Bd = min(B, d)
    explore = np.zeros(m, dtype=np.bool_)
    offsets = np.zeros(m + 1, dtype=np.int64)
    parts: list[IntVector] = []
    for i in range(m):
        rng = np.random.default_rng([seed, t0 + i])
        if rng.random() < epsilon:
            explore[i] = True
            parts.append(np.sort(rng.choice(d, size=Bd, replace=False)).astype(np.int64))
        offsets[i + 1] = offsets[i] + (Bd if explore[i] else 0)
    chosen: IntVector = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return explore, offsets, chosen


def learn_partial(
    w: Vector,
    X: Any,
    labels: Vector,
    *,
    sparse: bool,
    B: int,
    eta: float,
    lam: float,
    margin: float,
    decay: float,
    epsilon: float,
    seed: int,
    t0: int,
) -> tuple[IntVector, int]:
    """Apply OFS-P to the rows of X in order, updating w in place.

    As ``learn_full``, plus ``epsilon``, ``seed`` and ``t0``, the stream's
    instance count before this batch (the draws of row i are seeded by
    (seed, t0 + i)). The rows go in chunks whose draws fit in
    ``_DRAW_ELEMENTS`` indices.

    Examples
    --------
    Exploitation of a zero w observes nothing: w stays 0.

    >>> w = np.zeros(3)
    >>> preds, mistakes = learn_partial(
    ...     w, np.ones((2, 3)), np.array([1.0, -1.0]), sparse=False, B=1, eta=0.5,
    ...     lam=0.01, margin=1.0, decay=0.0, epsilon=1e-9, seed=0, t0=0,
    ... )
    >>> preds.tolist(), mistakes, w.tolist()
    ([1, 1], 1, [0.0, 0.0, 0.0])
    """
    _check_shapes(w, X, labels)
    m = labels.shape[0]
    d = w.shape[0]
    Bd = min(B, d)
    preds = np.empty(m, dtype=np.int64)
    labels = np.ascontiguousarray(labels, dtype=np.float64)
    # Observation probability of feature j: (B/d) eps + 1[w_j != 0] (1 - eps)
    # (docs/algorithms/ofs.md, "OFS-P"), with B capped at d.
    base = (Bd / d) * epsilon
    rest = 1.0 - epsilon
    radius_inv = math.sqrt(lam)
    if sparse:
        indptr, indices, data = _csr_parts(X)
    else:
        dense = np.ascontiguousarray(X, dtype=np.float64)
    rows = max(1, _DRAW_ELEMENTS // max(Bd, 1))
    mistakes = 0
    for lo in range(0, m, rows):
        hi = min(m, lo + rows)
        explore, offsets, chosen = partial_draws(seed, t0 + lo, hi - lo, d, B, epsilon)
        if sparse:
            mistakes += _learn_partial_sparse(
                w, indptr[lo : hi + 1], indices, data, labels[lo:hi], explore, offsets, chosen,
                B, eta, radius_inv, margin, decay, base, rest, preds[lo:hi],
            )  # fmt: skip
        else:
            mistakes += _learn_partial_dense(
                w, dense[lo:hi], labels[lo:hi], explore, offsets, chosen,
                B, eta, radius_inv, margin, decay, base, rest, preds[lo:hi],
            )  # fmt: skip
    return preds, int(mistakes)


__all__ = ["learn_partial", "partial_draws"]
