"""Feature columns as sorted non-zeros, with batch-invariant moments and dot products.

A batch of b columns over n rows is kept CSR-like (``indptr``, ``indices``,
``data``), one row per feature, explicit zeros removed and indices sorted: the
*canonical* form of a column depends only on its values, so a column sent
dense or sparse, alone or in a batch, is the same object here. Every
per-column quantity is a reduction over that column's own segment of
``data`` (``np.add.reduceat``), which gives the same bits as reducing the
column alone; this is what keeps one request of b columns deciding exactly as
b requests of one (docs/algorithms.md, "Determinism and replay").

The moments use only the non-zeros: with m = sum(x)/n, the centred sum of
squares is sum over non-zeros of (x - m)^2 plus (n - nnz) m^2 (two-pass, no
cancellation), and the correlation of x with a centred unit vector v is
(x . v - m sum(v)) / ||x - m||.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float64]
IntVector = npt.NDArray[np.int64]
BoolVector = npt.NDArray[np.bool_]

# Cap on temporaries of dot_dense, in float64 elements (32 MiB).
_CHUNK_ELEMENTS = 1 << 22


def canonical_csr(X: Any) -> Any:
    """A float64 CSR copy of a scipy.sparse matrix in canonical form.

    Duplicate entries summed, then explicit zeros removed (duplicates that
    cancel leave none behind), indices ascending within each row: the form
    depends only on the values, as a dense row's non-zeros do.

    >>> import scipy.sparse as sp
    >>> M = canonical_csr(sp.coo_matrix(([1.0, -1.0, 2.0], ([0, 0, 0], [1, 1, 0])), (1, 3)))
    >>> M.indices.tolist(), M.data.tolist()
    ([0], [2.0])
    """
    M = X.tocsr(copy=True).astype(np.float64)
    M.sum_duplicates()  # also sorts the indices
    M.eliminate_zeros()
    return M


def is_sparse(X: Any) -> bool:
    """True for scipy.sparse matrices and arrays (without importing scipy.sparse eagerly)."""
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


@dataclass(frozen=True)
class Columns:
    """b columns of n rows as sorted non-zeros (see the module docstring)."""

    n: int
    indptr: IntVector
    indices: IntVector
    data: Vector

    # ------------------------------------------------------------------ building

    @classmethod
    def from_dense(cls, X: npt.ArrayLike) -> Columns:
        """From a ``(b, n)`` array (or a 1-D column).

        >>> c = Columns.from_dense([[0.0, 2.0, 0.0], [1.0, 0.0, 3.0]])
        >>> c.indptr.tolist(), c.indices.tolist(), c.data.tolist()
        ([0, 1, 3], [1, 0, 2], [2.0, 1.0, 3.0])
        """
        A = np.asarray(X, dtype=np.float64)
        if A.ndim == 1:
            A = A[None, :]
        b, n = A.shape
        if np.count_nonzero(A) == A.size:
            # No zero at all (dense data): every column holds all n rows, in order.
            indptr = (
                np.arange(0, (b + 1) * n, n, dtype=np.int64) if n else np.zeros(b + 1, np.int64)
            )
            return cls(int(n), indptr, np.tile(np.arange(n, dtype=np.int64), b), A.ravel().copy())
        rows, cols = np.nonzero(A)  # row-major: each row's indices ascending
        counts = np.bincount(rows, minlength=A.shape[0])
        indptr = np.zeros(A.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(int(A.shape[1]), indptr, cols.astype(np.int64), A[rows, cols])

    @classmethod
    def from_sparse(cls, X: Any) -> Columns:
        """From a scipy.sparse ``(b, n)`` matrix in any format."""
        M = canonical_csr(X)
        return cls(
            int(M.shape[1]),
            np.asarray(M.indptr, dtype=np.int64),
            np.asarray(M.indices, dtype=np.int64),
            np.asarray(M.data, dtype=np.float64),
        )

    @classmethod
    def from_any(cls, X: Any) -> Columns:
        return cls.from_sparse(X) if is_sparse(X) else cls.from_dense(X)

    @classmethod
    def empty(cls, n: int) -> Columns:
        return cls(n, np.zeros(1, dtype=np.int64), np.zeros(0, np.int64), np.zeros(0))

    # ------------------------------------------------------------------ shape

    @property
    def b(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def nnz(self) -> IntVector:
        return np.diff(self.indptr)

    def take(self, rows: npt.ArrayLike) -> Columns:
        """The columns at positions ``rows``, in that order."""
        r = np.asarray(rows, dtype=np.int64)
        if r.size == 0:
            return Columns.empty(self.n)
        starts, ends = self.indptr[r], self.indptr[r + 1]
        lengths = ends - starts
        indptr = np.zeros(r.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        # Positions of every selected non-zero, without a Python loop over columns.
        offsets = np.repeat(starts - indptr[:-1], lengths)
        pos = np.arange(indptr[-1], dtype=np.int64) + offsets
        return Columns(self.n, indptr, self.indices[pos], self.data[pos])

    def tail(self, start: int) -> Columns:
        """The columns from position ``start`` on (views of the non-zeros, no copy).

        >>> Columns.from_dense([[1.0, 0.0], [0.0, 2.0]]).tail(1).to_dense()
        array([[0., 2.]])
        """
        lo = int(self.indptr[start])
        return Columns(self.n, self.indptr[start:] - lo, self.indices[lo:], self.data[lo:])

    @staticmethod
    def concat(parts: list[Columns], n: int) -> Columns:
        parts = [p for p in parts if p.b]
        if not parts:
            return Columns.empty(n)
        indptr = [np.zeros(1, dtype=np.int64)]
        base = 0
        for p in parts:
            indptr.append(p.indptr[1:] + base)
            base += int(p.indptr[-1])
        return Columns(
            n,
            np.concatenate(indptr),
            np.concatenate([p.indices for p in parts]),
            np.concatenate([p.data for p in parts]),
        )

    def to_dense(self) -> Matrix:
        out = np.zeros((self.b, self.n))
        rows = np.repeat(np.arange(self.b), self.nnz)
        out[rows, self.indices] = self.data
        return out

    # ------------------------------------------------------------------ arithmetic

    def segment_sums(self, values: Matrix | Vector) -> Matrix:
        """Per-column sums of ``values`` laid out like ``data`` (last axis); 0 if empty."""
        vals = np.asarray(values, dtype=np.float64)
        lead = vals.shape[:-1]
        out = np.zeros((*lead, self.b))
        nz = self.nnz > 0
        if nz.any() and vals.shape[-1]:
            out[..., nz] = np.add.reduceat(vals, self.indptr[:-1][nz], axis=-1)
        return out

    def moments(self) -> tuple[Vector, Vector, BoolVector]:
        """(mean, norm of the centred column, constant) of every column.

        >>> m, s, c = Columns.from_dense([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]]).moments()
        >>> m.tolist(), s.round(6).tolist(), c.tolist()
        ([2.0, 5.0], [1.414214, 0.0], [False, True])
        """
        n = self.n
        nnz = self.nnz
        mean = self.segment_sums(self.data) / n if n else np.zeros(self.b)
        dev = self.data - np.repeat(mean, nnz)
        zeros = n - nnz
        # A column is constant when all its n values are equal: no non-zeros at all,
        # or n non-zeros with a zero range (docs/algorithms.md, "Constant columns").
        seg_max = np.full(self.b, -np.inf)
        seg_min = np.full(self.b, np.inf)
        has = nnz > 0
        if has.any():
            starts = self.indptr[:-1][has]
            seg_max[has] = np.maximum.reduceat(self.data, starts)
            seg_min[has] = np.minimum.reduceat(self.data, starts)
        constant = (nnz == 0) | ((zeros == 0) & (seg_max == seg_min))
        # Scale before squaring so 1e-300 or 1e200 columns neither underflow nor overflow.
        peak = np.zeros(self.b)
        if has.any():
            peak[has] = np.maximum.reduceat(np.abs(dev), self.indptr[:-1][has])
        peak = np.where(zeros > 0, np.maximum(peak, np.abs(mean)), peak)
        peak = np.where(constant | (peak == 0), 1.0, peak)
        scaled = dev / np.repeat(peak, nnz)
        css = self.segment_sums(scaled * scaled) + zeros * (mean / peak) ** 2
        norm = np.where(constant, 0.0, peak * np.sqrt(css))
        return mean, norm, constant

    def dot_dense(self, V: Matrix) -> Matrix:
        """``(k, b)`` dot products of the rows of V (k, n) with every column.

        A column with no zero (n non-zeros) is reduced like a dense row
        (``(x * v).sum()``), any other over its non-zeros (``segment_sums``).
        The two round differently, but which one applies depends on the column
        alone, so a column gives the same bits alone or in any batch.
        """
        k = V.shape[0]
        out = np.zeros((k, self.b))
        if k == 0 or self.b == 0:
            return out
        full = self.nnz == self.n
        if full.any():
            every = bool(full.all())
            part = self if every else self.take(np.flatnonzero(full))
            D = part.data.reshape(part.b, self.n)
            rows = max(1, _CHUNK_ELEMENTS // max(1, self.n))
            dots = np.empty((k, part.b))
            for lo in range(0, part.b, rows):
                block = D[lo : lo + rows]
                for i in range(k):
                    dots[i, lo : lo + rows] = (block * V[i]).sum(axis=1)
            if every:
                return dots
            out[:, full] = dots
            rest = np.flatnonzero(~full)
            out[:, rest] = self.take(rest)._dot_segments(V)
            return out
        return self._dot_segments(V)

    def _dot_segments(self, V: Matrix) -> Matrix:
        k = V.shape[0]
        out = np.zeros((k, self.b))
        total = int(self.indptr[-1])
        if k == 0 or total == 0:
            return out
        step = max(1, _CHUNK_ELEMENTS // total)
        for start in range(0, k, step):
            block = V[start : start + step]
            out[start : start + step] = self.segment_sums(block[:, self.indices] * self.data)
        return out

    def correlations(self, U: Matrix, sum_U: Vector, mean: Vector, norm: Vector) -> Matrix:
        """``(k, b)`` Pearson correlations with centred unit rows U (row sums ``sum_U``).

        Undefined (constant column) entries are NaN.
        """
        dots = self.dot_dense(U) - np.outer(sum_U, mean)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = dots / norm[None, :]
        r[:, norm == 0] = np.nan
        return np.clip(r, -1.0, 1.0)

    def unit_rows(self, mean: Vector, norm: Vector) -> Matrix:
        """Dense centred unit-norm rows ``(b, n)`` (zeros for constant columns)."""
        safe = np.where(norm == 0, 1.0, norm)
        out = np.repeat((-mean / safe)[:, None], self.n, axis=1)
        rows = np.repeat(np.arange(self.b), self.nnz)
        out[rows, self.indices] = (self.data - np.repeat(mean, self.nnz)) / np.repeat(
            safe, self.nnz
        )
        out[norm == 0] = 0.0
        return out


def unit_vector(y: npt.ArrayLike) -> tuple[Vector, float]:
    """A target as a centred unit row (by the same arithmetic as columns) and its sum."""
    c = Columns.from_dense(np.asarray(y, dtype=np.float64))
    mean, norm, _ = c.moments()
    u = c.unit_rows(mean, norm)[0]
    return u, float(u.sum())


__all__ = ["Columns", "canonical_csr", "is_sparse", "unit_vector"]
