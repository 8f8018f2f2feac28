"""Column arithmetic that gives bit-identical results however columns are batched.

Feature columns are kept *feature-major*: a batch of b columns of n rows is a
C-contiguous ``(b, n)`` array, one row per feature. Every per-column or
per-pair quantity is a product followed by a sum along the contiguous last
axis, which numpy evaluates with the same pairwise summation for each row
whatever the number of rows. A BLAS matrix product would be faster but its
accumulation order depends on the shapes involved, so one request of b columns
could decide differently from b requests of one column at an exact tie (for
instance a duplicated column, where dep_f == dep_g). docs/algorithms.md ("Determinism and replay")
requires the decisions, and the state, to be identical under any batching.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float64]
Vector = npt.NDArray[np.float64]

# Cap on the temporary (a, b, n) product in cross_dots, in float64 elements (32 MiB).
_CHUNK_ELEMENTS = 1 << 22


def as_rows(X: npt.ArrayLike) -> Matrix:
    """Return X as a C-contiguous float64 ``(b, n)`` array (a 1-D input is one row)."""
    A = np.asarray(X, dtype=np.float64)
    if A.ndim == 1:
        A = A[None, :]
    return np.ascontiguousarray(A)


def is_constant_rows(X: Matrix) -> npt.NDArray[np.bool_]:
    """True for rows whose values are all equal (zero variance).

    The test is on the peak-to-peak range, not on the computed variance: the
    mean of [0.1, 0.1, 0.1] is not exactly 0.1 in floating point, so centring
    leaves tiny non-zero residuals that would otherwise standardise to noise.

    >>> is_constant_rows(np.array([[0.1, 0.1, 0.1], [1.0, 2.0, 1.0]]))
    array([ True, False])
    """
    if X.shape[1] == 0:
        return np.ones(X.shape[0], dtype=bool)
    return np.asarray(X.max(axis=1) == X.min(axis=1))


def standardize_rows(X: npt.ArrayLike) -> tuple[Matrix, npt.NDArray[np.bool_]]:
    """Centre each row and scale it to unit Euclidean norm.

    Returns ``(U, constant)``: the dot product of two rows of U is their
    Pearson correlation. Constant rows are returned as zeros and flagged.

    >>> U, constant = standardize_rows([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]])
    >>> U.round(4)
    array([[-0.7071,  0.    ,  0.7071],
           [ 0.    ,  0.    ,  0.    ]])
    >>> constant
    array([False,  True])
    """
    A = as_rows(X)
    n = A.shape[1]
    constant = is_constant_rows(A)
    if n == 0:
        return np.zeros_like(A), constant
    mean = A.sum(axis=1) / n
    C = A - mean[:, None]
    # Scale by the largest deviation before squaring, so tiny (1e-300) or huge
    # (1e200) columns neither underflow nor overflow in the norm.
    peak = np.where(constant, 1.0, np.abs(C).max(axis=1))
    C = C / peak[:, None]
    norms = np.sqrt((C * C).sum(axis=1))
    U = C / np.where(constant, 1.0, norms)[:, None]
    U[constant] = 0.0
    return np.ascontiguousarray(U), constant


def row_dots(A: Matrix, v: Vector) -> Vector:
    """Dot product of every row of A with v, batch-invariant (see module docstring)."""
    if A.shape[0] == 0:
        return np.zeros(0)
    return np.asarray((A * v[None, :]).sum(axis=1), dtype=np.float64)


def cross_dots(A: Matrix, B: Matrix) -> Matrix:
    """``(a, b)`` matrix of dot products of the rows of A with the rows of B.

    Equal, bit for bit, to ``row_dots(B, A[i])`` for every i, whatever a and b.
    """
    a, n = A.shape
    b = B.shape[0]
    out = np.empty((a, b))
    if a == 0 or b == 0:
        return out
    step = max(1, _CHUNK_ELEMENTS // max(1, b * n))
    for start in range(0, a, step):
        block = A[start : start + step]
        out[start : start + step] = (block[:, None, :] * B[None, :, :]).sum(axis=2)
    return out


def row_origins(X: npt.ArrayLike) -> tuple[Vector, Vector]:
    """The mean and scale of each row as ``standardize_rows`` standardises it.

    A row of U is (x - mean) / scale, so x = U * scale + mean (to rounding);
    scale is 0 for a constant row.

    >>> mean, scale = row_origins([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]])
    >>> mean.tolist(), scale.round(4).tolist()
    ([2.0, 5.0], [1.4142, 0.0])
    """
    A = as_rows(X)
    n = A.shape[1]
    if n == 0:
        return np.zeros(A.shape[0]), np.zeros(A.shape[0])
    mean = A.sum(axis=1) / n
    C = A - mean[:, None]
    peak = np.abs(C).max(axis=1)
    safe = np.where(peak > 0.0, peak, 1.0)
    norms = np.sqrt(((C / safe[:, None]) ** 2).sum(axis=1))
    return mean, np.where(peak > 0.0, safe * norms, 0.0)


def correlations(U: Matrix, v: Vector) -> Vector:
    """Pearson correlations of standardised rows U with standardised v, clipped to [-1, 1]."""
    return np.clip(row_dots(U, v), -1.0, 1.0)


__all__ = [
    "Matrix",
    "Vector",
    "as_rows",
    "correlations",
    "cross_dots",
    "is_constant_rows",
    "row_dots",
    "row_origins",
    "standardize_rows",
]
