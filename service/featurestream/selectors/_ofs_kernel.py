"""Compiled per-instance updates of OFS and OFS-P (docs/algorithms/ofs.md, "Exact rules").

Each instance's update depends on the weights the previous one left, so a
batch cannot be vectorised across instances; this module runs the whole loop
as compiled code (numba) instead of one round of numpy calls per instance.
It reproduces ``OFS`` decision for decision and weight for weight:

* Every sum (w . x, ||w||^2) runs over S, the sorted indices of w's non-zeros,
  in index order, with numpy's pairwise summation (``_pairwise_sum``), the
  order ``np.add.reduce`` adds a contiguous float64 array in; elementwise
  products and the step are the same IEEE operations as numpy's, so the bits
  agree.
* A sparse (CSR) instance is read at S through a scattered copy, and its step
  touches only its non-zeros: O(|S| + nnz(x)) per instance, not O(d).
* With truncation, a dense instance is read at S by the dot product, and in
  full only by a step: the next instance's entries at S are prefetched (a
  cache hint, no effect on values) while the current one is learnt.
* A dense truncating step works from x itself: outside S, w is 0 and
  w~_j = x_j c, so w~ is never written out. It skips the exact norm of w~
  when an upper bound (the squares of x times c^2, any order of summation,
  so it vectorises) proves w~ inside the projection's ball with room for
  every rounding (and lam is not subnormal, where the exact sum could
  overflow): the scale is then 1, as the exact norm would have made it.
  Near or past the edge the exact norm decides. It finds the candidates for
  truncation among max(|x_j|, |x_{j + d/2}|) scaled by |c| (rounding is
  monotone).
* Truncate(v, B) leaves v alone when |S| <= B and otherwise finds the B-th
  largest |v| over S by a partial selection (quickselect), keeping ties at it
  by lower index.
* OFS-P draws its features from ``numpy.random.default_rng([seed, t])``, which
  compiled code cannot reproduce: ``partial_draws`` makes the draws in Python
  (they do not depend on w), and the kernel applies them.
* With ``scale: "standard"`` the instances are standardised first, by compiled
  code too (``_standardise``: Welford's running statistics, row after row),
  in chunks of rows whose dense form is bounded (``standardised_chunks``); each
  chunk then goes through the dense kernel. A standardised sparse instance is
  dense, so this costs O(d) per instance whatever the sparsity.

The kernels run without the interpreter lock (``_jit``), so the event loop
goes on while a worker thread learns a batch.

Numba is imported with this module, which ``OFS`` imports on its first batch,
so importing ``featurestream.selectors`` stays cheap. The compiled code is
cached on disk (``cache=True``) so it is compiled once per machine; where no
cache directory is writable it is compiled once per process instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from featurestream.selectors._ofs_ops import (
    IntVector,
    Matrix,
    Vector,
    _after_step,
    _check_shapes,
    _csr_parts,
    _decay,
    _dot,
    _inside_ball,
    _jit,
    _keep_largest,
    _merge,
    _prefetch,
    _select,
    _standardise,
    _sum,
    _sum_squares_estimate,
    _support,
)
from featurestream.selectors._ofs_partial import learn_partial, partial_draws

# --------------------------------------------------------------------------- full input

_NEAR = 1.0 - 2.0**-49
# The B-th largest projected |w~| under which products may be subnormal (their
# relative rounding error unbounded): then the candidates are not enough, and
# the step takes the exact pass over every entry.
_TINY = 2.0**-960
# The least positive double.
_LEAST = 5e-324
# Instances standardised at once, in float64 elements (2 MiB, cache-sized): the
# dense form of a chunk of rows, which the kernels then learn from.
_SCALE_ELEMENTS = 1 << 18


@_jit
def _fold_pairs(pairs: Vector, h: int, B: int, mags: Vector) -> None:
    """The h >= B pairs' maxima folded into B groups' maxima, in ``mags[:B]``.

    The pairs fold onto each other while at least 2B groups are left, then
    the extra ones onto the first B (an odd one out of a fold is in no group).
    """
    size = h
    if size >= 2 * B:
        size = h // 2
        for i in range(size):
            mags[i] = max(pairs[i], pairs[i + size])
    else:
        for i in range(size):
            mags[i] = pairs[i]
    while size >= 2 * B:
        half = size // 2
        for i in range(half):
            mags[i] = max(mags[i], mags[i + half])
        size = half
    for i in range(B, size):
        mags[i - B] = max(mags[i - B], mags[i])


@_jit
def _threshold(cand_v: Vector, nc: int, B: int, scale: float, mags: Vector) -> tuple[float, int]:
    """The B-th largest of |cand_v[:nc]| * scale (0 when fewer), and how many are above it.

    The selection is over the magnitudes before the scale (rounding is
    monotone, so the scaled B-th largest is the B-th largest scaled); an
    infinite value with a scale of 0 never reaches the selection as a NaN.
    """
    thr = 0.0
    if nc == B:
        thr = abs(cand_v[0])
        for q in range(1, nc):
            thr = min(thr, abs(cand_v[q]))
        thr *= scale
    elif nc > B:
        for q in range(nc):
            mags[q] = abs(cand_v[q])
        thr = _select(mags, nc, nc - B) * scale
    above = 0
    for q in range(nc):
        above += abs(cand_v[q] * scale) > thr
    return thr, above


@_jit
def _write_kept(
    w: Vector,
    S: IntVector,
    nS: int,
    cand_j: IntVector,
    cand_v: Vector,
    nc: int,
    B: int,
    scale: float,
    thr: float,
    above: int,
) -> int:
    """w := the candidates (indices ``cand_j``, values ``cand_v * scale``) kept; new |S|.

    w is non-zero only on S[:nS] before, and the candidates include every
    entry that can be kept: the values above thr, then those equal to it in
    the B - above places left, by lower index (the candidates are in index
    order). S becomes the kept indices, in order.
    """
    for k in range(nS):
        w[S[k]] = 0.0
    ties = B - above
    kept = 0
    for q in range(nc):
        j = cand_j[q]
        v = cand_v[q] * scale
        a = abs(v)
        keep = (a > thr) | ((a == thr) & (a != 0.0) & (ties > 0))
        ties -= keep & (a == thr)
        w[j] = v if keep else 0.0  # a candidate not kept is 0 now (+0.0, see _decay)
        S[kept] = j
        kept += keep
    return kept


@_jit
def _bound_outside(x: Vector, c: float, d: int) -> float:
    """An upper bound, to rounding, of what the entries of w~ = w + x c outside S add to ||w~||^2.

    Each of them is x_j c, and its square fl(fl(x_j c)^2) is at most
    (x_j c)^2 (1 + u)^3 + 2^-1075 (a square below the normal range rounds
    to 0 or a subnormal); so with c2 = fl(c^2) normal and the squares of x
    summed in any order (``_sum_squares_estimate``, within (d - 1) u), the
    sum over j of these squares is at most
    c2 (sum fl(x_j^2) + d 2^-1074) + d 2^-1074, to (d + 8) u. The slack of
    ``_inside_ball``, 8 (d + 16) u, covers that and the rounding of the |S| <= d
    squares over S added after. Infinite (nothing proved) when c2 is not
    normal, or a sum overflows.
    """
    c2 = c * c
    if not c2 >= 2.0**-1022:
        return math.inf
    tiny = d * _LEAST
    return c2 * (_sum_squares_estimate(x, d) + tiny) + tiny


@_jit
def _candidates(
    w: Vector,
    x: Vector,
    c: float,
    S: IntVector,
    nS: int,
    B: int,
    ws: Vector,
    pairs: Vector,
    found: IntVector,
    mags: Vector,
    cand_j: IntVector,
    cand_v: Vector,
) -> int:
    """The entries of w~ = w + x c that can be among its B largest |w~_j|; returns their count.

    d >= 2B; ``ws[:nS]`` holds w~ over S. Outside S, w is 0 and w~_j = x_j c,
    so w~ need not be written out. j and j + d // 2 are paired (an odd last
    entry is in no pair) and ``pairs`` holds the larger |x_j| of each pair's
    entries outside S (computed for every pair, then again without S for the
    pairs holding an entry of S). Folding the pairs onto each other groups
    the entries outside S into B disjoint groups; a group's largest |x_j|
    times |c| is its largest |w~_j| (rounding is monotone and
    sign-symmetric). Those B maxima and the |w~_j| over S are B + |S|
    distinct entries; the B-th largest of them (``_select``), lb, is at most
    the B-th largest of all, and most often that value itself. The
    candidates are the entries with |w~_j| >= lb * _NEAR: those outside S,
    looked for in the few pairs that reach it (``found``), merged in index
    order with those of S; hardly more than B. Their indices go to
    ``cand_j`` and their values, unprojected, to ``cand_v``. The pass over
    the pairs and the folds have no branches and vectorise; the search of the
    pairs branches on the few that reach lb.
    """
    d = w.shape[0]
    h = d // 2
    for i in range(h):
        pairs[i] = max(abs(x[i]), abs(x[i + h]))
    for k in range(nS):
        j = S[k]
        if j < 2 * h:
            # A non-zero w_j marks j in S: a pair holds its entries outside S.
            i = j - h if j >= h else j
            a = abs(x[i]) if w[i] == 0.0 else 0.0
            b = abs(x[i + h]) if w[i + h] == 0.0 else 0.0
            pairs[i] = max(a, b)
    _fold_pairs(pairs, h, B, mags)
    cabs = abs(c)
    for i in range(B):
        mags[i] = mags[i] * cabs
    for k in range(nS):
        mags[B + k] = abs(ws[k])
    lb = max(_select(mags, B + nS, nS) * _NEAR, _LEAST)
    # The entries outside S at least lb, from the few pairs that reach it:
    # those below h in found[:low], the others in found[h:h + high].
    low = 0
    high = 0
    for i in range(h):
        if pairs[i] * cabs >= lb:
            found[low] = i
            low += (abs(x[i] * c) >= lb) & (w[i] == 0.0)
            found[h + high] = i + h
            high += (abs(x[i + h] * c) >= lb) & (w[i + h] == 0.0)
    if d > 2 * h:
        j = d - 1
        found[h + high] = j
        high += (abs(x[j] * c) >= lb) & (w[j] == 0.0)
    # Merged in index order with the entries of S at least lb (d: none left).
    nc = 0
    k = 0
    r = 0
    while k < nS or r < low + high:
        sj = S[k] if k < nS else d
        fj = d if r == low + high else (found[r] if r < low else found[h + r - low])
        if sj < fj:
            v = ws[k]
            cand_j[nc] = sj
            cand_v[nc] = v
            nc += abs(v) >= lb
            k += 1
        else:
            cand_j[nc] = fj
            cand_v[nc] = x[fj] * c
            nc += 1
            r += 1
    return nc


@_jit
def _dense_step_truncate(
    w: Vector,
    x: Vector,
    c: float,
    S: IntVector,
    nS: int,
    B: int,
    radius_inv: float,
    sq: Vector,
    cand_j: IntVector,
    found: IntVector,
    cand_v: Vector,
    ws: Vector,
    mags: Vector,
) -> int:
    """w := Truncate(projection of w + c x, B) for a dense x; returns the new |S|.

    w is non-zero only on S[:nS] (a non-zero w_j marks j in S) and has no
    -0.0; d > B. Outside S, w~ = w + x c is x c, and is never written out.
    The projection needs ||w~|| only to tell whether w~ leaves the ball of
    radius 1 / sqrt(lam): an upper bound of ||w~||^2 (``_bound_outside`` for
    the entries outside S, plus the squares of w~ over S, summed in any order)
    settles that when w~ is well inside (``_inside_ball``), as a truncated w~
    most often is; otherwise the squares of the non-zeros of w~ go to ``sq``
    and are summed in index order, as ``_norm`` would. With d >= 2B the
    candidates for the B largest come from ``_candidates``; with fewer
    entries every non-zero is one. A selection over their projected
    magnitudes gives the B-th largest; only S is zeroed and the kept
    candidates are written (``_write_kept``). O(d) reads and O(|S| + B)
    writes per step.
    """
    d = w.shape[0]
    estimate = _bound_outside(x, c, d)
    for k in range(nS):
        j = S[k]
        v = w[j] + x[j] * c
        ws[k] = v
        estimate += v * v
    # min(1, 1 / (sqrt(lam) ||w~||)): shrink only outside the ball (a zero w~ is
    # inside it; this also avoids dividing by zero). The bound adds the exact
    # squares' terms outside S, to rounding, and those over S: within the slack
    # of ``_inside_ball`` of a sum no smaller than the exact one.
    scale = 1.0
    if not _inside_ball(estimate, radius_inv, d):
        n = 0  # non-zeros of w~
        for j in range(d):
            v = w[j] + x[j] * c
            sq[n] = v * v
            n += v != 0.0
        norm = math.sqrt(_sum(sq, n))
        if radius_inv * norm > 1.0:
            scale = 1.0 / (radius_inv * norm)
    if d >= 2 * B:
        nc = _candidates(w, x, c, S, nS, B, ws, sq, found, mags, cand_j, cand_v)
    else:
        # Fewer than 2B entries: every non-zero is a candidate.
        nc = 0
        for j in range(d):
            v = w[j] + x[j] * c
            cand_j[nc] = j
            cand_v[nc] = v
            nc += v != 0.0
    # The B-th largest projected |w~_j| (0 when fewer are non-zero), and how many
    # project above it.
    thr, above = _threshold(cand_v, nc, B, scale, mags)
    if nc >= B and thr < _TINY:
        # Projected values near the subnormals: decide over every entry.
        for j in range(d):
            w[j] = w[j] + x[j] * c
        return _keep_largest(w, S, _support(w, S), B, scale, thr, above)
    return _write_kept(w, S, nS, cand_j, cand_v, nc, B, scale, thr, above)


@_jit
def _learn_dense(
    w: Vector,
    X: Matrix,
    labels: Vector,
    B: int,
    eta: float,
    radius_inv: float,
    margin: float,
    decay: float,
    preds: IntVector,
) -> int:
    """OFS over the dense rows of X, updating w in place; returns the mistakes."""
    m, d = X.shape
    S = np.empty(d, dtype=np.int64)
    tmp = np.empty(d)
    heap = np.empty(min(B, d))
    nS = _support(w, S)
    keep = 1.0 - decay
    # Truncation to fewer than d: the one-pass step (_dense_step_truncate). It
    # leaves the zeros outside S alone, so it needs them +0.0, as this module
    # stores them; a w from elsewhere with a -0.0 takes the general route.
    one_pass = d > B and not np.any(np.signbit(w[w == 0.0]))
    cand_j = np.empty(d if one_pass else 0, dtype=np.int64)
    found = np.empty(d if one_pass else 0, dtype=np.int64)
    cand_v = np.empty(d if one_pass else 0)
    ws = np.empty(d if one_pass else 0)
    mags = np.empty(d + B if one_pass else 0)
    mistakes = 0
    for i in range(m):
        x = X[i]
        if one_pass and i + 1 < m:
            # The dot reads x at S only: |S| scattered cache lines (B at most
            # once a step has truncated), each a miss when the rows stream
            # from memory, waited for one after another. The next row's lines
            # at S are asked for now, to arrive while this instance is learnt
            # (S changes little in a step).
            ahead = X[i + 1]
            for k in range(nS):
                _prefetch(ahead, S[k])
        yi = labels[i]
        f = _dot(w, x, S, nS, tmp)
        pred = 1 if f >= 0.0 else -1  # sign(0) = +1
        preds[i] = pred
        mistakes += pred != yi
        if decay != 0.0:
            nS = _decay(w, S, nS, keep)
        if yi * f <= margin:
            c = eta * yi
            if one_pass:
                nS = _dense_step_truncate(
                    w, x, c, S, nS, B, radius_inv, tmp, cand_j, found, cand_v, ws, mags
                )
                continue
            # A dense step can touch every entry: a contiguous pass (it
            # vectorises), then S rebuilt only if some entry is 0.
            count = 0
            for j in range(d):
                v = w[j] + x[j] * c
                w[j] = v
                count += v != 0.0
            if count < d:
                _support(w, S)
            elif nS < d:
                for j in range(d):
                    S[j] = j
            nS = count
            nS = _after_step(w, S, nS, B, radius_inv, tmp, heap)
    return mistakes


@_jit
def _learn_sparse(
    w: Vector,
    indptr: IntVector,
    indices: IntVector,
    data: Vector,
    labels: Vector,
    B: int,
    eta: float,
    radius_inv: float,
    margin: float,
    decay: float,
    preds: IntVector,
) -> int:
    """OFS over canonical CSR rows (sorted indices, no zeros); returns the mistakes."""
    d = w.shape[0]
    m = labels.shape[0]
    S = np.empty(d, dtype=np.int64)
    out = np.empty(d, dtype=np.int64)
    tmp = np.empty(d)
    heap = np.empty(min(B, d))
    x_at = np.zeros(d)  # the instance scattered, to read it at S
    nS = _support(w, S)
    keep = 1.0 - decay
    mistakes = 0
    for i in range(m):
        lo = indptr[i]
        hi = indptr[i + 1]
        for p in range(lo, hi):
            x_at[indices[p]] = data[p]
        f = _dot(w, x_at, S, nS, tmp)
        for p in range(lo, hi):
            x_at[indices[p]] = 0.0
        yi = labels[i]
        pred = 1 if f >= 0.0 else -1  # sign(0) = +1
        preds[i] = pred
        mistakes += pred != yi
        if decay != 0.0:
            nS = _decay(w, S, nS, keep)
        if yi * f <= margin:
            c = eta * yi
            for p in range(lo, hi):
                j = indices[p]
                w[j] = w[j] + data[p] * c
            nS = _merge(w, S, nS, indices, lo, hi, out)
            nS = _after_step(w, S, nS, B, radius_inv, tmp, heap)
    return mistakes


# --------------------------------------------------------------------------- entry points


def learn_full(
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
) -> tuple[IntVector, int]:
    """Apply OFS (full input) to the rows of X in order, updating w in place.

    Parameters
    ----------
    w : the weight vector (d,), C-contiguous; updated in place.
    X : the instances, a dense (m, d) array or, with ``sparse``, a canonical
        scipy.sparse CSR matrix (sorted indices, no explicit zeros).
    labels : the m labels in {-1, +1}.
    sparse : whether X is a CSR matrix.
    B, eta, lam, margin, decay : the OFS parameters (B = ``num_features``).

    Returns
    -------
    predictions : the m predictions sign(w . x) in {-1, +1}.
    mistakes : how many of them disagree with their label.

    Examples
    --------
    >>> w = np.zeros(3)
    >>> X = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, -1.0]])
    >>> preds, mistakes = learn_full(
    ...     w, X, np.array([1.0, -1.0]), sparse=False, B=2, eta=0.5, lam=0.01, margin=1.0, decay=0.0
    ... )
    >>> preds.tolist(), mistakes, w.tolist()
    ([1, -1], 0, [0.0, -1.5, 1.5])
    """
    _check_shapes(w, X, labels)
    m = labels.shape[0]
    preds = np.empty(m, dtype=np.int64)
    labels = np.ascontiguousarray(labels, dtype=np.float64)
    radius_inv = math.sqrt(lam)
    if sparse:
        indptr, indices, data = _csr_parts(X)
        mistakes = _learn_sparse(
            w, indptr, indices, data, labels, B, eta, radius_inv, margin, decay, preds
        )
    else:
        dense = np.ascontiguousarray(X, dtype=np.float64)
        mistakes = _learn_dense(w, dense, labels, B, eta, radius_inv, margin, decay, preds)
    return preds, int(mistakes)


def standardised_chunks(
    X: Any, *, sparse: bool, count: int, mean: Vector, M2: Vector
) -> Iterator[tuple[int, Matrix]]:
    """The rows of X standardised with running statistics, as dense chunks ``(lo, Z)``.

    ``count`` is the number of instances seen before X; ``mean`` and ``M2`` (length
    d) are their running mean and sum of squared deviations, updated in place as
    the chunks are produced: consume every chunk, in order, before reading them.
    ``Z`` holds rows ``lo, lo + 1, ...`` of the batch (docs/algorithms/ofs.md,
    "Scaling"): a chunk of rows holds at most ``_SCALE_ELEMENTS`` values (or
    one row), in one buffer that the next chunk overwrites.

    Examples
    --------
    The first instance maps to 0 (no variance yet); the second of [0, 2] has
    mean 1 and population variance 1, so it maps to 1:

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
    rows = max(1, min(m, _SCALE_ELEMENTS // max(d, 1)))
    buffer = np.empty((rows, d))
    for lo in range(0, m, rows):
        hi = min(m, lo + rows)
        if sparse:
            chunk = np.ascontiguousarray(X[lo:hi].toarray(), dtype=np.float64)
        else:
            chunk = np.ascontiguousarray(X[lo:hi], dtype=np.float64)
        Z = buffer[: hi - lo]
        # Values near the float64 limit can overflow the running moments: the
        # state then holds an infinity, which the engine refuses to commit.
        _standardise(chunk, count + lo, mean, M2, Z)
        yield lo, Z


__all__ = ["learn_full", "learn_partial", "partial_draws", "standardised_chunks"]
