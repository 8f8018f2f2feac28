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
* Truncate(v, B) leaves v alone when |S| <= B and otherwise finds the B-th
  largest |v| over S by a partial selection (quickselect), keeping ties at it
  by lower index.
* OFS-P draws its features from ``numpy.random.default_rng([seed, t])``, which
  compiled code cannot reproduce: ``partial_draws`` makes the draws in Python
  (they do not depend on w), and the kernel applies them.

Numba is imported with this module, which ``OFS`` imports on its first batch,
so importing ``featurestream.selectors`` stays cheap. The compiled code is
cached on disk (``cache=True``) so it is compiled once per machine; where no
cache directory is writable it is compiled once per process instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt
from numba import njit

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float64]
IntVector = npt.NDArray[np.int64]
BoolVector = npt.NDArray[np.bool_]

_F = TypeVar("_F", bound=Callable[..., Any])

# numpy's pairwise summation adds blocks of at most this many elements with
# eight accumulators (PW_BLOCKSIZE in numpy's loops_utils.h).
_PW_BLOCK = 128

# Cap on the OFS-P draws held at once, in indices (8 MiB): a batch is applied in
# chunks of rows whose draws fit.
_DRAW_ELEMENTS = 1 << 20


def _jit(f: _F) -> _F:
    """``numba.njit`` with an on-disk cache, or without one where none can be written.

    Numba looks for a writable cache directory (next to this file, then the
    user's cache directory) when the decorator is applied and raises
    RuntimeError if there is none, e.g. a read-only install run by a user
    without a writable home: the kernels then compile in each process.
    """
    try:
        compiled = njit(cache=True)(f)
    except RuntimeError:
        compiled = njit(cache=False)(f)
    return cast(_F, compiled)


# --------------------------------------------------------------------------- sums


@_jit
def _block_sum(a: Vector, lo: int, n: int) -> float:
    """numpy's pairwise-summation leaf over ``a[lo:lo + n]`` (n <= 128)."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0 = a[lo]
    r1 = a[lo + 1]
    r2 = a[lo + 2]
    r3 = a[lo + 3]
    r4 = a[lo + 4]
    r5 = a[lo + 5]
    r6 = a[lo + 6]
    r7 = a[lo + 7]
    i = lo + 8
    end = lo + n - n % 8
    while i < end:
        r0 += a[i]
        r1 += a[i + 1]
        r2 += a[i + 2]
        r3 += a[i + 3]
        r4 += a[i + 4]
        r5 += a[i + 5]
        r6 += a[i + 6]
        r7 += a[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < lo + n:
        res += a[i]
        i += 1
    return float(res)


@_jit
def _pairwise_sum(a: Vector, lo: int, n: int) -> float:
    """numpy's pairwise summation of ``a[lo:lo + n]``: halves cut at multiples of 8.

    The recursion of numpy's C code, run on explicit stacks: numba's on-disk
    cache does not reload self-recursive functions safely.
    """
    if n <= _PW_BLOCK:
        return _block_sum(a, lo, n)
    # Ranges still to add (with how many of their halves are done) and the sums
    # of finished ranges; each halving at least halves n, so 64 levels suffice.
    los = np.empty(64, dtype=np.int64)
    ns = np.empty(64, dtype=np.int64)
    done = np.empty(64, dtype=np.int64)
    sums = np.empty(64)
    top = 0
    nsums = 0
    los[0] = lo
    ns[0] = n
    done[0] = 0
    while top >= 0:
        start = los[top]
        size = ns[top]
        if size <= _PW_BLOCK:
            sums[nsums] = _block_sum(a, start, size)
            nsums += 1
            top -= 1
            continue
        half = size // 2
        half -= half % 8
        if done[top] == 0:
            done[top] = 1
            top += 1
            los[top] = start
            ns[top] = half
            done[top] = 0
        elif done[top] == 1:
            done[top] = 2
            top += 1
            los[top] = start + half
            ns[top] = size - half
            done[top] = 0
        else:
            # Both halves are summed: left + right, as numpy adds them.
            nsums -= 1
            sums[nsums - 1] = sums[nsums - 1] + sums[nsums]
            top -= 1
    return float(sums[0])


@_jit
def _sum(a: Vector, n: int) -> float:
    """``np.add.reduce(a[:n])`` bit for bit (the reduction starts from 0.0)."""
    return 0.0 + _pairwise_sum(a, 0, n)


# --------------------------------------------------------------------------- support set


@_jit
def _dot(w: Vector, x: Vector, S: IntVector, nS: int, tmp: Vector) -> float:
    """w . x over the support S[:nS], as ``np.add.reduce(w[S] * x[S])``."""
    if nS == w.shape[0]:
        # Full support: S is 0..d-1, and the contiguous products vectorise.
        for k in range(nS):
            tmp[k] = w[k] * x[k]
    else:
        for k in range(nS):
            j = S[k]
            tmp[k] = w[j] * x[j]
    return _sum(tmp, nS)


@_jit
def _norm(w: Vector, S: IntVector, nS: int, tmp: Vector) -> float:
    """||w||_2 over the support S[:nS], as ``sqrt(np.add.reduce(w[S] * w[S]))``."""
    if nS == w.shape[0]:
        for k in range(nS):
            tmp[k] = w[k] * w[k]
    else:
        for k in range(nS):
            v = w[S[k]]
            tmp[k] = v * v
    return math.sqrt(_sum(tmp, nS))


@_jit
def _decay(w: Vector, S: IntVector, nS: int, keep: float) -> int:
    """w[S] *= keep, dropping entries that underflow to 0; returns the new |S|."""
    n = 0
    for k in range(nS):
        j = S[k]
        v = w[j] * keep
        # + 0.0 turns an underflow to -0.0 into +0.0: a dense step later adds
        # x_j * c to it and a sparse one does not, and -0.0 would let the two
        # forms of an instance differ in a sign bit.
        w[j] = v + 0.0
        S[n] = j
        n += v != 0.0
    return n


@_jit
def _merge(
    w: Vector, S: IntVector, nS: int, idx: IntVector, lo: int, hi: int, out: IntVector
) -> int:
    """S := the sorted union of S[:nS] and idx[lo:hi] where w != 0; returns the new |S|.

    Both inputs are sorted without repeats; the merge goes through ``out``.
    """
    n = 0
    a = 0
    b = lo
    while a < nS or b < hi:
        if b == hi or (a < nS and S[a] < idx[b]):
            j = S[a]
            a += 1
        elif a == nS or idx[b] < S[a]:
            j = idx[b]
            b += 1
        else:
            j = S[a]
            a += 1
            b += 1
        out[n] = j
        n += w[j] != 0.0
    for k in range(n):
        S[k] = out[k]
    return n


@_jit
def _scale(w: Vector, S: IntVector, nS: int, scale: float) -> int:
    """w[S] *= scale, dropping entries that underflow to 0; returns the new |S|."""
    if nS == w.shape[0]:
        # Full support: a contiguous pass (it vectorises), S rebuilt only on underflow.
        n = 0
        for j in range(nS):
            v = w[j] * scale
            w[j] = v + 0.0  # no -0.0 (see _decay)
            n += v != 0.0
        return n if n == nS else _support(w, S)
    n = 0
    for k in range(nS):
        j = S[k]
        v = w[j] * scale
        w[j] = v + 0.0  # no -0.0 (see _decay)
        S[n] = j
        n += v != 0.0
    return n


@_jit
def _select(a: Vector, n: int, k: int) -> float:
    """The k-th smallest of a[:n] (0-based), reordering a[:n]: quickselect, O(n) expected."""
    lo = 0
    hi = n - 1
    while lo < hi:
        # Median of three as the pivot, so sorted runs do not go quadratic.
        x = a[lo]
        y = a[(lo + hi) // 2]
        z = a[hi]
        if x > y:
            x, y = y, x
        if y > z:
            y = z
            if x > y:
                y = x
        pivot = y
        i = lo
        j = hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while a[j] > pivot:
                j -= 1
            if i <= j:
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
        # Now a[lo:j + 1] <= pivot <= a[i:hi + 1], and a[j + 1:i] == pivot.
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            return float(a[k])
    return float(a[k])


@_jit
def _heap_add(heap: Vector, size: int, B: int, a: float) -> int:
    """Offer a to the min-heap of the B largest values seen; returns the new size."""
    if size < B:
        i = size
        while i > 0:
            parent = (i - 1) >> 1
            if heap[parent] <= a:
                break
            heap[i] = heap[parent]
            i = parent
        heap[i] = a
        return size + 1
    if a > heap[0]:
        i = 0
        while True:
            child = 2 * i + 1
            if child >= B:
                break
            if child + 1 < B and heap[child + 1] < heap[child]:
                child += 1
            if heap[child] >= a:
                break
            heap[i] = heap[child]
            i = child
        heap[i] = a
    return size


@_jit
def _heap_threshold(heap: Vector, size: int, B: int, scale: float) -> tuple[float, int]:
    """The B-th largest non-zero |w| after scaling, and how many are larger.

    The heap holds the B largest |w| before scaling. Rounding is monotone, so
    scaling them gives the B largest after scaling (with any ties rounding
    makes, which the count of larger ones accounts for). (0.0, count of
    non-zeros) when fewer than B are non-zero.
    """
    thr = heap[0] * scale if size == B else 0.0
    above = 0
    for i in range(size):
        above += heap[i] * scale > thr
    return thr, above


@_jit
def _keep_largest(
    w: Vector, S: IntVector, nS: int, B: int, scale: float, thr: float, above: int
) -> int:
    """w[S] *= scale, then keep the B largest |w| (threshold thr, ``above`` larger).

    Entries equal to thr fill the B - above places left by lower index
    (docs/algorithms/ofs.md, "Exact rules"); the others become 0. Returns the new |S|.
    """
    ties = B - above
    full = nS == w.shape[0]  # then S is 0..d-1, possibly not written out
    n = 0
    for k in range(nS):
        j = k if full else S[k]
        v = w[j] * scale
        a = abs(v)
        if a > thr:
            w[j] = v
            S[n] = j
            n += 1
        elif a == thr and a != 0.0 and ties > 0:
            ties -= 1
            w[j] = v
            S[n] = j
            n += 1
        else:
            w[j] = 0.0  # also an entry the projection underflowed: +0.0, see _decay
    return n


@_jit
def _support(w: Vector, S: IntVector) -> int:
    """S := the indices of w's non-zeros in order; returns their count."""
    n = 0
    for j in range(w.shape[0]):
        S[n] = j
        n += w[j] != 0.0
    return n


# --------------------------------------------------------------------------- full input


@_jit
def _after_step(
    w: Vector, S: IntVector, nS: int, B: int, radius_inv: float, tmp: Vector, heap: Vector
) -> int:
    """Projection onto the L2 ball, then Truncate(w, B); returns the new |S|.

    Truncation compares the projected values (scaling can round two magnitudes
    to a tie), computed on the fly and written only for the entries kept.
    """
    norm = _norm(w, S, nS, tmp)
    # min(1, 1 / (sqrt(lam) ||w~||)): shrink only outside the ball (a zero w~ is
    # inside it; this also avoids dividing by zero).
    shrink = radius_inv * norm > 1.0
    scale = 1.0 / (radius_inv * norm) if shrink else 1.0
    if nS <= B:
        # At most B non-zeros: nothing to truncate.
        return _scale(w, S, nS, scale) if shrink else nS
    if nS >= 16 * B:
        # A few large entries among many: a heap, cheaper than a selection.
        size = 0
        for k in range(nS):
            a = abs(w[S[k]])
            if a != 0.0 and (size < B or a > heap[0]):
                size = _heap_add(heap, size, B, a)
        thr, above = _heap_threshold(heap, size, B, scale)
    else:
        for k in range(nS):
            tmp[k] = abs(w[S[k]] * scale)
        thr = _select(tmp, nS, nS - B)  # the B-th largest (0 if fewer are non-zero)
        above = 0
        for k in range(nS):
            above += tmp[k] > thr
    return _keep_largest(w, S, nS, B, scale, thr, above)


# Candidates for truncation after a dense step: every |w~_j| within this factor
# of the B-th largest so far. The projection multiplies by a common factor and
# rounds, which can tie |w~_j| just below the B-th largest with it (and the tie
# then goes to the lower index); a ratio under 1 - 2^-49 (16 units in the last
# place) cannot round to a tie while the products stay normal.
_NEAR = 1.0 - 2.0**-49
# The B-th largest projected |w~| under which products may be subnormal (their
# relative rounding error unbounded): then the candidates are not enough, and
# the step takes the exact pass over every entry.
_TINY = 2.0**-960


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
    heap: Vector,
    cand_j: IntVector,
    cand_v: Vector,
) -> int:
    """w := Truncate(projection of w + c x, B) for a dense x; returns the new |S|.

    w is non-zero only on S[:nS] and has no -0.0. w~_j = w_j + x_j c is never
    stored: a pass writes its squares to ``sq`` (the norm sums those of the
    non-zeros, in index order, as ``_norm`` would), and a second keeps as
    candidates (``cand_j``, ``cand_v``, in index order) the entries with |w~_j|
    at least lb, a lower bound of the B-th largest |w~_j| times _NEAR: first
    the smallest over the B entries of S, then the B-th largest candidate. A
    selection over the candidates gives the B-th largest; then only S is
    zeroed and the kept candidates are written, projected by the product
    ``_keep_largest`` computes. O(d) reads and O(|S| + B) writes per step,
    instead of several passes writing all d entries.
    """
    d = w.shape[0]
    # The entries of S go in the heap of the B largest |w~_j| first: they are
    # usually still among the largest, so few others get past its root.
    size = 0
    for k in range(nS):
        j = S[k]
        a = abs(w[j] + x[j] * c)  # the value the passes below compute
        if a != 0.0:
            size = _heap_add(heap, size, B, a)
    # The squares, in a pass without branches (it vectorises).
    n = 0  # non-zeros of w~
    for j in range(d):
        v = w[j] + x[j] * c
        sq[j] = v * v
        n += v != 0.0
    # The candidates: a predictable branch, taken by few entries. The heap's
    # root only grows, so an entry below lb now stays below the final B-th
    # largest by the factor _NEAR; lb = 0: every non-zero is a candidate.
    lb = heap[0] * _NEAR if size == B else 0.0
    nc = 0  # candidates
    p = 0  # entries of S before j (those are in the heap already)
    for j in range(d):
        v = w[j] + x[j] * c
        a = abs(v)
        if a >= lb and a != 0.0:
            cand_j[nc] = j
            cand_v[nc] = v
            nc += 1
            while p < nS and S[p] < j:
                p += 1
            if (p == nS or S[p] != j) and (size < B or a > heap[0]):
                size = _heap_add(heap, size, B, a)
                if size == B:
                    lb = heap[0] * _NEAR
    if n < d:
        # Some w~_j = 0: the norm sums the squares of the non-zeros only.
        n = 0
        for j in range(d):
            v = w[j] + x[j] * c
            sq[n] = v * v
            n += v != 0.0
    norm = math.sqrt(_sum(sq, n))
    # min(1, 1 / (sqrt(lam) ||w~||)): shrink only outside the ball (a zero w~ is
    # inside it; this also avoids dividing by zero).
    scale = 1.0 / (radius_inv * norm) if radius_inv * norm > 1.0 else 1.0
    thr, above = _heap_threshold(heap, size, B, scale)
    if size == B and thr < _TINY:
        # Projected values near the subnormals: decide over every entry.
        for j in range(d):
            w[j] = w[j] + x[j] * c
        return _keep_largest(w, S, _support(w, S), B, scale, thr, above)
    for k in range(nS):
        w[S[k]] = 0.0
    ties = B - above
    kept = 0
    for q in range(nc):
        v = cand_v[q] * scale
        a = abs(v)
        if a > thr or (a == thr and a != 0.0 and ties > 0):
            ties -= a == thr
            j = cand_j[q]
            w[j] = v
            S[kept] = j
            kept += 1
    return kept


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
    cand_v = np.empty(d if one_pass else 0)
    mistakes = 0
    for i in range(m):
        x = X[i]
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
                nS = _dense_step_truncate(w, x, c, S, nS, B, radius_inv, tmp, heap, cand_j, cand_v)
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


# --------------------------------------------------------------------------- partial input


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


# --------------------------------------------------------------------------- entry points


def _check_shapes(w: Vector, X: Any, labels: Vector) -> None:
    """The kernels index without bounds checks: refuse inconsistent shapes here."""
    if X.ndim != 2 or X.shape[0] != labels.shape[0] or X.shape[1] != w.shape[0]:
        raise ValueError(
            f"X must be ({labels.shape[0]}, {w.shape[0]}) for {labels.shape[0]} labels "
            f"and {w.shape[0]} weights; got {X.shape}."
        )
    if w.ndim != 1 or not w.flags.c_contiguous or not w.flags.writeable:
        raise ValueError("w must be a writeable, contiguous vector.")


def _csr_parts(X: Any) -> tuple[IntVector, IntVector, Vector]:
    """indptr, indices and data of a canonical CSR matrix, as int64 / float64 arrays.

    One index type means one compiled signature (scipy picks int32 or int64).
    """
    indptr: IntVector = np.asarray(X.indptr, dtype=np.int64)
    indices: IntVector = np.asarray(X.indices, dtype=np.int64)
    data: Vector = np.ascontiguousarray(X.data, dtype=np.float64)
    return indptr, indices, data


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


__all__ = ["learn_full", "learn_partial", "partial_draws"]
