"""Compiled building blocks of the OFS kernels (``_ofs_kernel``, ``_ofs_partial``).

numpy's pairwise summation reproduced bit for bit, sums and updates over S
(the sorted indices of w's non-zeros), Truncate by partial selection or a
bounded heap, the bookkeeping after a step and a cache prefetch hint; plus
the shape checks of the entry points. See ``_ofs_kernel`` for why the loop
is compiled.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt
from llvmlite import ir  # type: ignore[import-untyped]
from numba import njit, types
from numba.core import cgutils
from numba.core.extending import intrinsic

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float64]
IntVector = npt.NDArray[np.int64]
BoolVector = npt.NDArray[np.bool_]


_F = TypeVar("_F", bound=Callable[..., Any])

# numpy's pairwise summation adds blocks of at most this many elements with
# eight accumulators (PW_BLOCKSIZE in numpy's loops_utils.h).
_PW_BLOCK = 128


def _jit(f: _F, **options: Any) -> _F:
    """``numba.njit`` with an on-disk cache, or without one where none can be written.

    The compiled code releases the interpreter lock (``nogil``): a stream's
    batch is learnt in a worker thread, and the event loop goes on reading
    frames and answering reads meanwhile. The kernels touch only the arrays
    they are given, which their caller owns. Numba's cache key holds neither
    these options nor the decorator: a cache is renewed when its module's
    source changes, so a change here goes with a change to every module that
    compiles kernels (their docstrings say what this sets).

    Numba looks for a writable cache directory (next to this file, then the
    user's cache directory) when the decorator is applied and raises
    RuntimeError if there is none, e.g. a read-only install run by a user
    without a writable home: the kernels then compile in each process.
    """
    try:
        compiled = njit(cache=True, nogil=True, **options)(f)
    except RuntimeError:
        compiled = njit(cache=False, nogil=True, **options)(f)
    return cast(_F, compiled)


def _jit_ieee(f: _F) -> _F:
    """``_jit`` with plain IEEE division (numba's ``error_model="numpy"``).

    Numba's default checks every division for a zero divisor (to raise
    ZeroDivisionError as Python would), a branch that keeps LLVM from
    vectorising the loop. For code whose divisors are never zero the results
    are the same bits, several times faster.
    """
    return _jit(f, error_model="numpy")


def _jit_reassoc(f: _F) -> _F:
    """``_jit`` allowing floating-point sums to be reassociated (``fastmath={"reassoc"}``).

    For estimates only: the compiler may add in any order (and so vectorise
    a sum), which changes the rounding; nothing else (no contraction into
    fused multiply-adds, no assumptions about infinities or NaN).
    """
    return _jit(f, fastmath={"reassoc"})


@intrinsic
def _prefetch_intrinsic(typingctx: Any, a: Any, i: Any) -> Any:
    """Hint the CPU to fetch the cache line of a[i] (``llvm.prefetch``); no effect on values.

    a is a one-dimensional array and i an integer index into it (not wrapped:
    0 <= i < len(a)); other types are not typed (a compile-time error).
    """
    if not (isinstance(a, types.Array) and a.ndim == 1 and isinstance(i, types.Integer)):
        return None
    sig = types.void(a, i)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array_type = signature.args[0]
        array = context.make_array(array_type)(context, builder, args[0])
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = cgutils.get_item_pointer(  # type: ignore[no-untyped-call]
            context, builder, array_type, array, [index], wraparound=False
        )
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn_type = ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32])
        fn = cgutils.get_or_insert_function(  # type: ignore[no-untyped-call]
            builder.module, fn_type, "llvm.prefetch.p0"
        )
        # A read (0), to keep in every cache level (3), of data (1).
        builder.call(fn, [builder.bitcast(ptr, byte_ptr), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


_prefetch = cast(Callable[[Vector, int], None], _prefetch_intrinsic)

# --------------------------------------------------------------------------- sums


@_jit
def _block_sum(a: Vector, lo: int, n: int) -> float:
    """numpy's pairwise-summation leaf over ``a[lo:lo + n]`` (n <= 128).

    Eight running sums over the entries i = 0, 1, ... 7 (mod 8), added
    pairwise at the end, then the n % 8 left over one by one, as numpy's
    unrolled loop does. Read through a view from 0 with ``range`` indices,
    which the compiler knows are not negative: it drops numba's wraparound
    of negative indices and schedules the eight sums freely (twice as fast
    as indices it cannot bound).
    """
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    b = a[lo : lo + n]
    r0 = b[0]
    r1 = b[1]
    r2 = b[2]
    r3 = b[3]
    r4 = b[4]
    r5 = b[5]
    r6 = b[6]
    r7 = b[7]
    blocks = n // 8
    for k in range(1, blocks):
        i = 8 * k
        r0 += b[i]
        r1 += b[i + 1]
        r2 += b[i + 2]
        r3 += b[i + 3]
        r4 += b[i + 4]
        r5 += b[i + 5]
        r6 += b[i + 6]
        r7 += b[i + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(8 * blocks, n):
        res += b[i]
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


@_jit_reassoc
def _sum_squares_estimate(a: Vector, n: int) -> float:
    """sum(a[:n] ** 2) in any order the compiler likes (it vectorises): an estimate.

    Not the bits of ``_sum``: reassociation changes the rounding. Both are
    within (n - 1) u of the exact sum of the rounded squares (u = 2**-53, all
    terms non-negative), which is what ``_inside_ball`` relies on.
    """
    s = 0.0
    for j in range(n):
        s += a[j] * a[j]
    return s


@_jit
def _inside_ball(estimate: float, radius_inv: float, d: int) -> bool:
    """Whether ``estimate`` (``_sum_squares_estimate`` over d entries) proves no projection.

    The step projects when ``radius_inv * sqrt(_sum(sq, n)) > 1`` (n <= d
    non-zero squares). The two sums differ by at most 2 (d - 1) u relative,
    the products and the square root round by a few u more, so an estimate
    with ``radius_inv**2 * estimate <= 1 - 8 (d + 16) u`` leaves the exact
    test false: the step's scale is 1 without the exact sum. That bound is
    relative, and overflow is not: with a subnormal radius_inv**2 (lam near
    1e-308) a finite estimate may pass while the exact sum, near the largest
    double, rounds to infinity and projects. A normal radius_inv**2 keeps
    any estimate that passes below 2**1022, where neither sum can overflow.
    An infinite or NaN estimate proves nothing (the comparison is false).
    """
    rr = radius_inv * radius_inv
    return rr >= 2.0**-1022 and estimate * rr <= 1.0 - (d + 16) * 2.0**-50


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
    """The k-th smallest of a[:n] (0-based), reordering a[:n]: quickselect, O(n) expected.

    Each round splits the range around a pivot (the median of three, so sorted
    runs do not go quadratic) into the values below it, then those equal to
    it, by swaps without branches: a comparison that goes either way as often
    as not costs a misprediction as a branch.
    """
    lo = 0
    hi = n
    while True:
        x = a[lo]
        y = a[(lo + hi - 1) // 2]
        z = a[hi - 1]
        pivot = max(min(x, y), min(max(x, y), z))
        # a[lo:s] < pivot <= a[s:i] after each step.
        s = lo
        for i in range(lo, hi):
            v = a[i]
            a[i] = a[s]
            a[s] = v
            s += v < pivot
        if k < s:
            hi = s
            continue
        # a[s:e] == pivot < a[e:i] after each step (the pivot is one of them).
        e = s
        for i in range(s, hi):
            v = a[i]
            a[i] = a[e]
            a[e] = v
            e += v == pivot
        if k < e:
            return float(pivot)
        lo = e


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


# --------------------------------------------------------------------------- scaling


@_jit_ieee
def _standardise(X: Matrix, count: int, mean: Vector, M2: Vector, Z: Matrix) -> None:
    """Z := the rows of X standardised with running statistics; mean, M2 updated in place.

    docs/algorithms/ofs.md, "Scaling". Row i is instance t = count + i + 1 of the
    stream; every feature takes Welford's update first (delta = x - mean,
    mean += delta / t, M2 += delta (x - mean)), then maps to
    (x - mean) / sqrt(M2 / t), or to 0 when M2 / t is 0. The rows go strictly
    in order, one IEEE operation after another, so the result does not depend
    on how the instances were batched. The divisors (t >= 1, and the standard
    deviation where it is positive) are never zero; the features of one row
    are independent, and that loop is vectorised.
    """
    m, d = X.shape
    for i in range(m):
        t = float(count + i + 1)
        for j in range(d):
            x = X[i, j]
            mu = mean[j]
            delta = x - mu
            mu = mu + delta / t
            m2 = M2[j] + delta * (x - mu)
            mean[j] = mu
            M2[j] = m2
            var = m2 / t
            # Selects, not branches, so that the loop vectorises.
            positive = var > 0.0
            sd = math.sqrt(var if positive else 1.0)
            z = (x - mu) / sd
            Z[i, j] = z if positive else 0.0


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
