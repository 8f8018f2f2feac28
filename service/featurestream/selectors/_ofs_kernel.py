"""The compiled per-instance loop of OFS and OFS-P (docs/algorithms/ofs.md, "Exact rules").

Each instance's update needs the weights the previous one left, so a batch
cannot be vectorised across instances; ``_learn`` runs the loop as compiled
code (numba) instead of a round of numpy calls per instance.

* S holds the sorted indices of w's non-zeros. Every sum (w . x, ||w||^2)
  runs over S in index order, one addition after another, and a step touches
  only the non-zeros of the instance: O(|S| + nnz(x)) per instance. A dense
  row and its CSR form go through the same operations, so they give the same
  bits, and so does any split of a batch into frames.
* Truncate(v, B) finds the B-th largest |v| over S by a partial selection
  (``np.partition``) and keeps ties at it by lower index.
* OFS-P draws its features from ``numpy.random.default_rng([seed, t])``, which
  compiled code cannot reproduce: ``partial_draws`` makes the draws in Python
  (they do not depend on w) and ``_learn`` applies them.
* ``scale: "standard"`` standardises the rows first (``_standardise``, Welford's
  running statistics row after row), a bounded chunk of rows at a time;
  ``scale: "maxabs"`` divides each value by its feature's running maximum
  |x| inside the loop, which keeps sparse rows sparse.

The compiled code releases the interpreter lock (``nogil``) and is cached on
disk where a cache directory is writable (compiled once per process where
none is). Numba is imported with this module, which ``OFS`` imports on its
first batch, so importing ``featurestream.selectors`` stays cheap.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt
from numba import njit

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float64]
IntVector = npt.NDArray[np.int64]
BoolVector = npt.NDArray[np.bool_]

_F = TypeVar("_F", bound=Callable[..., Any])

# Values in the dense form of one chunk of rows (standardised, or drawn for
# OFS-P): bounds the memory a batch takes beside its own.
CHUNK_ELEMENTS = 1 << 18


def _jit(f: _F) -> _F:
    """``numba.njit`` without the lock, cached on disk, or uncached where no cache is writable.

    Numba raises RuntimeError when it finds no writable cache directory (a
    read-only install run by a user without a writable home).
    """
    try:
        compiled = njit(cache=True, nogil=True)(f)
    except RuntimeError:
        compiled = njit(cache=False, nogil=True)(f)
    return cast(_F, compiled)


@_jit
def _kth_largest(a: Vector, n: int, k: int) -> float:
    """The k-th largest of a[:n] (1 <= k <= n), by quickselect (Hoare's partition).

    Reorders a[:n] so that the entries after position n - k are at least the
    result and those before it at most.
    """
    lo, hi, target = 0, n - 1, n - k
    while lo < hi:
        pivot = a[(lo + hi) // 2]
        i, j = lo, hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while a[j] > pivot:
                j -= 1
            if i <= j:
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
        if target <= j:
            hi = j
        elif target >= i:
            lo = i
        else:
            break
    return float(a[target])


@_jit
def _truncate(w: Vector, S: IntVector, nS: int, B: int, mags: Vector) -> int:
    """Keep the B entries of largest |w| over S[:nS] (ties: lower index); the new size of S."""
    if nS <= B:
        return nS
    for k in range(nS):
        mags[k] = abs(w[S[k]])
    thr = _kth_largest(mags, nS, B)
    above = 0  # the entries larger than thr: after the selection, all in mags[nS - B + 1 :]
    for k in range(nS - B + 1, nS):
        above += mags[k] > thr
    ties = B - above  # entries equal to thr kept, the lowest indices first
    kept = 0
    for k in range(nS):
        j = S[k]
        v = abs(w[j])
        if v > thr or (v == thr and ties > 0):
            ties -= v == thr
            S[kept] = j
            kept += 1
        else:
            w[j] = 0.0
    return kept


@_jit
def _merge(w: Vector, S: IntVector, nS: int, idx: IntVector, n: int, out: IntVector) -> int:
    """S := the sorted union of S[:nS] and idx[:n] where w is non-zero; the new size of S."""
    a = 0
    b = 0
    k = 0
    while a < nS or b < n:
        if b == n or (a < nS and S[a] < idx[b]):
            j = S[a]
            a += 1
        elif a == nS or idx[b] < S[a]:
            j = idx[b]
            b += 1
        else:
            j = S[a]
            a += 1
            b += 1
        if w[j] != 0.0:
            out[k] = j
            k += 1
    S[:k] = out[:k]
    return k


@_jit
def _support(w: Vector, S: IntVector) -> int:
    """S := the sorted indices of w's non-zeros; how many there are."""
    nS = 0
    for j in range(w.shape[0]):
        if w[j] != 0.0:
            S[nS] = j
            nS += 1
    return nS


@_jit
def _scale(w: Vector, S: IntVector, nS: int, c: float) -> int:
    """w[S] *= c, dropping entries that become 0 from S; the new size of S."""
    kept = 0
    for k in range(nS):
        j = S[k]
        w[j] *= c
        if w[j] != 0.0:
            S[kept] = j
            kept += 1
        else:
            w[j] = 0.0
    return kept


@_jit
def _dot(w: Vector, at: IntVector, vals: Vector, n: int) -> float:
    """The sum of w[at[k]] vals[k] for k = 0, 1, ..., n - 1, added in that order."""
    s = 0.0
    for k in range(n):
        s += w[at[k]] * vals[k]
    return s


@_jit
def _observe(
    w: Vector, row: IntVector, vals: Vector, n: int, obs: IntVector, no: int, p: Vector,
    orow: IntVector, ovals: Vector, step: Vector,
) -> int:  # fmt: skip
    """OFS-P: the entries of row[:n] that are in obs[:no] (both sorted), into orow; how many.

    ``ovals`` gets their values, ``step`` each value divided by its observation
    probability p[5] + p[6] 1[w_j != 0].
    """
    a = 0
    k = 0
    for b in range(no):
        while a < n and row[a] < obs[b]:
            a += 1
        if a < n and row[a] == obs[b]:
            j = row[a]
            orow[k] = j
            ovals[k] = vals[a]
            step[k] = vals[a] / (p[5] + p[6] * (w[j] != 0.0))
            k += 1
            a += 1
    return k


@_jit
def _step(
    w: Vector, S: IntVector, nS: int, at: IntVector, st: Vector, n: int, c: float, full: bool,
    radius_inv: float, B: int, out: IntVector, mags: Vector,
) -> int:  # fmt: skip
    """w += c st at the n entries ``at``, projected and truncated; the new size of S.

    ``full``: the entries are every index in order, so S comes from a scan of
    w, and ||w||^2 adds the same squares in the same order as over S.
    """
    norm2 = 0.0
    if full:
        nS = 0
        for j in range(w.shape[0]):
            v = w[j] + c * st[j]
            w[j] = v
            if v != 0.0:
                S[nS] = j
                nS += 1
                norm2 += v * v
    else:
        for k in range(n):
            w[at[k]] += c * st[k]
        nS = _merge(w, S, nS, at, n, out)
        for k in range(nS):
            norm2 += w[S[k]] * w[S[k]]
    norm = math.sqrt(norm2)
    if radius_inv * norm > 1.0:
        nS = _scale(w, S, nS, 1.0 / (radius_inv * norm))
    return _truncate(w, S, nS, B, mags)


@_jit
def _learn(
    w: Vector,
    dense: Matrix,
    indptr: IntVector,
    indices: IntVector,
    data: Vector,
    labels: Vector,
    maxabs: Vector,
    explore: BoolVector,
    offsets: IntVector,
    chosen: IntVector,
    params: Vector,
    B: int,
    preds: IntVector,
) -> int:
    """OFS (or OFS-P, with draws) over the rows of ``dense`` or of the CSR parts; the mistakes.

    ``params`` = (eta, sqrt(lam), margin, keep, partial, base, rest): keep is
    what w is multiplied by per instance, and OFS-P divides an observed x_j by
    base + rest 1[w_j != 0]. ``maxabs`` (length d, or empty for no scaling) is
    updated in place. An instance is the list of its entries (indices ``at``,
    values ``xv``, ``n`` of them: every entry of a dense row, the stored ones
    of a sparse row, the observed ones in OFS-P) and what the step adds at
    each over eta y (``st``). An entry that is 0 changes no sum and no weight.
    """
    eta, radius_inv, margin, keep = params[0], params[1], params[2], params[3]
    d = w.shape[0]
    S = np.empty(d, dtype=np.int64)
    nS = _support(w, S)
    row = np.arange(d)
    vals = np.empty(d)
    obs = np.empty(d, dtype=np.int64)
    orow = np.empty(d, dtype=np.int64)
    ovals = np.empty(d)
    step = np.empty(d)
    mags = np.empty(d)
    mistakes = 0
    for i in range(labels.shape[0]):
        if dense.shape[0] > 0:
            n = d
            vals[:] = dense[i]
        else:
            n = indptr[i + 1] - indptr[i]
            row[:n] = indices[indptr[i] : indptr[i + 1]]
            vals[:n] = data[indptr[i] : indptr[i + 1]]
        for k in range(n if maxabs.shape[0] > 0 else 0):
            j = row[k]
            maxabs[j] = max(maxabs[j], abs(vals[k]))
            vals[k] = vals[k] / maxabs[j] if maxabs[j] > 0.0 else 0.0
        at, xv, st = row, vals, vals
        full = dense.shape[0] > 0
        if params[4] != 0.0:
            # Observed: the drawn features, or those with w_j != 0; others read as 0.
            if explore[i]:
                no = offsets[i + 1] - offsets[i]
                obs[:no] = chosen[offsets[i] : offsets[i + 1]]
            else:
                no = nS
                obs[:no] = S[:no]
            n = _observe(w, row, vals, n, obs, no, params, orow, ovals, step)
            at, xv, st = orow, ovals, step
            full = False
        f = _dot(w, at, xv, n)
        y = labels[i]
        pred = 1 if f >= 0.0 else -1
        # A tie (f = 0) is written 0: it predicts no class for the prequential count,
        # which then never depends on how the classes are coded.
        preds[i] = pred if f != 0.0 else 0
        mistakes += pred != y
        if keep != 1.0:
            nS = _scale(w, S, nS, keep)
        if y * f <= margin:
            nS = _step(w, S, nS, at, st, n, eta * y, full, radius_inv, B, obs, mags)
    return mistakes


@_jit
def _standardise(X: Matrix, count: int, mean: Vector, M2: Vector, Z: Matrix) -> None:
    """Z := the rows of X standardised with running statistics; mean, M2 updated in place.

    docs/algorithms/ofs.md, "Scaling". Row i is instance t = count + i + 1:
    every feature takes Welford's update (delta = x - mean, mean += delta / t,
    M2 += delta (x - mean)), then maps to (x - mean) / sqrt(M2 / t), or to 0
    when M2 / t is 0.
    """
    m, d = X.shape
    for i in range(m):
        t = float(count + i + 1)
        for j in range(d):
            x = X[i, j]
            delta = x - mean[j]
            mean[j] += delta / t
            M2[j] += delta * (x - mean[j])
            var = M2[j] / t
            Z[i, j] = (x - mean[j]) / math.sqrt(var) if var > 0.0 else 0.0


def partial_draws(
    seed: int, t0: int, m: int, d: int, B: int, epsilon: float
) -> tuple[BoolVector, IntVector, IntVector]:
    """The OFS-P draws of instances t0 .. t0 + m - 1 (they do not depend on w).

    Instance t draws from ``numpy.random.default_rng([seed, t])`` a uniform u
    and, when u < epsilon, min(B, d) features without replacement. Returns
    whether each instance explores, and offsets into the sorted features each
    exploring instance drew (``chosen[offsets[i]:offsets[i + 1]]``).

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


def standardised_chunks(
    X: Any, *, sparse: bool, count: int, mean: Vector, M2: Vector
) -> Iterator[tuple[int, Matrix]]:
    """The rows of X standardised with running statistics, as dense chunks ``(lo, Z)``.

    ``count`` instances came before X, with running ``mean`` and ``M2``, which
    are updated in place as the chunks are produced (consume them in order).
    A chunk holds at most ``CHUNK_ELEMENTS`` values (or one row), in one buffer
    that the next chunk overwrites.

    >>> mean, M2 = np.zeros(1), np.zeros(1)
    >>> [(lo, Z.ravel().tolist()) for lo, Z in standardised_chunks(
    ...     np.array([[0.0], [2.0]]), sparse=False, count=0, mean=mean, M2=M2)]
    [(0, [0.0, 1.0])]
    >>> mean.tolist(), M2.tolist()
    ([1.0], [2.0])
    """
    m, d = X.shape
    if mean.shape != (d,) or M2.shape != (d,):
        raise ValueError(f"mean and M2 must have the {d} entries of an instance.")
    rows = max(1, min(m, CHUNK_ELEMENTS // max(d, 1)))
    buffer = np.empty((rows, d))
    for lo in range(0, m, rows):
        hi = min(m, lo + rows)
        chunk = X[lo:hi].toarray() if sparse else X[lo:hi]
        Z = buffer[: hi - lo]
        _standardise(np.ascontiguousarray(chunk, dtype=np.float64), count + lo, mean, M2, Z)
        yield lo, Z


_NO_INDEX = np.zeros(1, dtype=np.int64)
_NO_FLOAT = np.zeros(0)
_NO_ROWS = np.zeros((0, 0))


def learn(
    w: Vector,
    X: Any,
    labels: Vector,
    *,
    sparse: bool,
    B: int,
    eta: float,
    lam: float,
    margin: float,
    keep: float,
    maxabs: Vector = _NO_FLOAT,
    partial: tuple[float, int, int] | None = None,
) -> tuple[IntVector, int]:
    """Apply OFS to the rows of X in order, updating w (and ``maxabs``) in place.

    X is a dense (m, d) array or, with ``sparse``, a canonical CSR matrix;
    labels are in {-1, +1}; ``keep`` multiplies w per instance. ``partial`` =
    (epsilon, seed, t0) selects OFS-P, t0 being the stream's instance count
    before X. Returns the predictions sign(w . x) (0 for w . x = 0, counted as +1
    among the mistakes) and the mistakes.

    >>> w = np.zeros(3)
    >>> X = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, -1.0]])
    >>> preds, mistakes = learn(
    ...     w, X, np.array([1.0, -1.0]), sparse=False, B=2, eta=0.5, lam=0.01, margin=1.0, keep=1.0
    ... )
    >>> preds.tolist(), mistakes, w.tolist()
    ([0, -1], 0, [0.0, -1.5, 1.5])
    """
    m, d = labels.shape[0], w.shape[0]
    if X.ndim != 2 or X.shape != (m, d) or w.ndim != 1 or not w.flags.c_contiguous:
        raise ValueError(f"X must be ({m}, {d}) for {m} labels and {d} weights; got {X.shape}.")
    labels = np.ascontiguousarray(labels, dtype=np.float64)
    preds = np.empty(m, dtype=np.int64)
    eps, seed, t0 = partial if partial is not None else (0.0, 0, 0)
    Bd = min(B, d)
    params = np.array(
        [eta, math.sqrt(lam), margin, keep, partial is not None, Bd / d * eps, 1 - eps]
    )
    rows = max(1, m if partial is None else CHUNK_ELEMENTS // max(Bd, 1))
    mistakes = 0
    for lo in range(0, m, rows):
        hi = min(m, lo + rows)
        explore, offsets, chosen = (
            partial_draws(seed, t0 + lo, hi - lo, d, B, eps)
            if partial is not None
            else (np.zeros(hi - lo, dtype=np.bool_), _NO_INDEX, _NO_INDEX)
        )
        if sparse:
            part = X if hi - lo == m else X[lo:hi]
            csr = (
                np.asarray(part.indptr, dtype=np.int64),
                np.asarray(part.indices, dtype=np.int64),
                np.asarray(part.data, dtype=np.float64),
            )
            rows_in = _NO_ROWS
        else:
            csr = (_NO_INDEX, _NO_INDEX, _NO_FLOAT)
            rows_in = np.ascontiguousarray(X[lo:hi], dtype=np.float64)
        mistakes += _learn(
            w, rows_in, *csr, labels[lo:hi], maxabs, explore, offsets, chosen, params, B,
            preds[lo:hi],
        )  # fmt: skip
    return preds, int(mistakes)


__all__ = ["CHUNK_ELEMENTS", "learn", "partial_draws", "standardised_chunks"]
