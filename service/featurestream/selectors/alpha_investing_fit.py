"""Alpha-investing's least-squares fit on [1, S], kept incrementally.

The state holds an orthonormal basis Q of span[1, S] and the residual r of y on
it (``alpha_investing.py``). Here: the modified Gram-Schmidt step
(:func:`project_out`), the cut below which an orthogonalised vector lies in the
span (:func:`span_tolerance`), the columns of a batch still to be decided with
the exponent (SSE_new - SSE_old) / (2 sigma2) of each (:class:`Pending`), and
the p-values from those exponents (:func:`p_values_from`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from featurestream.selectors.base import Matrix, Vector
from featurestream.stats.columns import row_dots
from featurestream.stats.sparse import Columns

_EPS = float(np.finfo(np.float64).eps)


def span_tolerance(n: int) -> float:
    """Relative norm below which an orthogonalised vector counts as zero.

    Projecting a vector v that lies in span(Q) out of an orthonormal Q leaves
    rounding noise of a few eps * ||v|| (each of the k projection steps and each
    length-n dot product adds about eps * ||v||). ``numpy.linalg.lstsq`` treats
    singular values below eps * max(n, k) times the largest as zero; here
    k <= n (Q has at most n orthonormal rows), so that cut is eps * n, and we
    add a safety factor of 16 so that the noise left by an exactly collinear
    column is never mistaken for a new direction. A genuinely new direction is
    only missed when it is below ~1e-12 of the column's norm (n in the
    thousands), i.e. below what float64 data can carry. The cut depends on n
    alone, never on the batch, so decisions do not depend on batching.

    >>> span_tolerance(1000) == 16 * 1000 * 2.0**-52
    True
    """
    return 16.0 * _EPS * n


def _sq_norms(F: Matrix) -> Vector:
    """Squared Euclidean norm of each row, summed along the contiguous axis like ``row_dots``."""
    return np.asarray((F * F).sum(axis=1), dtype=np.float64)


def project_out(F: Matrix, basis: Iterable[Vector]) -> None:
    """Modified Gram-Schmidt, in place: remove from each row of F its component on each q.

    The basis vectors are taken one at a time, in order, and each projection
    is computed from the already-updated rows. The operations applied to a row
    therefore depend only on the row and on the sequence of basis vectors, not
    on the other rows of F nor on when a basis vector was appended: projecting
    a batch on Q and later on a new q gives bit for bit what projecting a
    single column on [Q, q] gives (docs/algorithms.md, "Determinism and replay").
    """
    for q in basis:
        c = row_dots(F, q)
        F -= c[:, None] * q[None, :]


# A column whose part outside span[1, S] keeps at least this share of its centred
# sum of squares is tested from its sparse dot products; below it, the
# subtraction ||x_c||^2 - sum_k (x . q_k)^2 would lose digits, and the column is
# orthogonalised densely instead (modified Gram-Schmidt).
_CANCELLATION = 1.0 / 64.0


class Pending:
    """The columns of a batch still to be decided, as the fit on [1, S] sees them.

    For column x (canonical non-zeros, scaled by a power of two) and the
    orthonormal basis q_0 = 1/sqrt(n), q_1, ... of span[1, S], the part of x
    outside the span has squared norm ``||x - mean(x)||^2 - sum_{k>=1} (x . q_k)^2``
    and its dot product with the residual r (orthogonal to the span) is x . r.
    Both come from the column's non-zeros alone, so a test costs O(nnz(x) |S|)
    rather than O(n |S|). A column for which that subtraction cancels (most of
    it lies in the span: below ``_CANCELLATION``) is orthogonalised densely by
    modified Gram-Schmidt instead, which is exact to working precision and also
    decides whether it lies in the span at all.

    Every number is a per-column reduction applied in the same order whatever
    the batch (each basis vector subtracts its square in turn; dense rows are
    projected on the basis vectors one at a time), so a batch decides exactly
    as its columns one by one (docs/algorithms.md, "Determinism and replay").
    """

    def __init__(self, cols: Columns, Q: Matrix, r: Vector, centred_sq: Vector) -> None:
        self.cols = cols
        self.centred_sq = centred_sq
        self.outside_sq = centred_sq.copy()
        for q in Q[1:]:
            self._subtract(0, q)
        self.r_dots = cols.dot_dense(r[None, :])[0]
        # Densely orthogonalised columns: position -> (row, norm before projection),
        # every row projected on the first `through` basis vectors.
        self.dense: dict[int, tuple[Vector, float]] = {}
        self.through = 0

    def _subtract(self, start: int, q: Vector) -> None:
        c = self.cols.tail(start).dot_dense(q[None, :])[0]
        self.outside_sq[start:] -= c * c

    def extend(self, start: int, q: Vector, r: Vector) -> None:
        """A new basis vector q (and residual r): update the columns from ``start`` on."""
        self._subtract(start, q)
        self.r_dots[start:] = self.cols.tail(start).dot_dense(r[None, :])[0]
        for k in [k for k in self.dense if k < start]:
            del self.dense[k]

    def projected(self, k: int, basis: list[Vector]) -> Matrix:
        """Column k, scaled, after one modified Gram-Schmidt pass over ``basis``, as (1, n)."""
        self._bring_up(basis)
        if k in self.dense:
            return self.dense[k][0][None, :].copy()
        v = self.cols.take([k]).to_dense()
        project_out(v, basis)
        return v

    def _bring_up(self, basis: list[Vector]) -> None:
        if self.dense and self.through < len(basis):
            keys = list(self.dense)
            P = np.array([self.dense[k][0] for k in keys])
            project_out(P, basis[self.through :])
            self.dense = {k: (P[i], self.dense[k][1]) for i, k in enumerate(keys)}
        self.through = len(basis)

    def exponents(
        self,
        start: int,
        basis: list[Vector],
        r: Vector,
        sse: float,
        y_norm: float,
        tol: float,
        dof: int,
    ) -> tuple[Vector, np.ndarray[Any, np.dtype[np.bool_]]]:
        """(SSE_new - SSE_old) / (2 sigma2) and the in-span mask of columns ``start:``.

        sigma2 = SSE_old / dof: dof is n (the published rule) or the residual
        degrees of freedom n - |S| - 1 of the fit on [1, S].

        SSE_new - SSE_old = -(q_f . r)^2 is used directly rather than as the
        difference of two nearly equal sums, which would lose the small
        decrements that matter most for rejections.
        """
        m = self.cols.b - start
        if sse == 0.0 or sse <= (tol * y_norm) ** 2:
            # y is already fitted exactly (SSE_old = 0, up to rounding): sigma2 = 0
            # makes step 2 read 0/0. No column can lower SSE below 0, so every
            # later column has SSE_new = SSE_old and we take p = exp(0) = 1.
            return np.zeros(m), np.ones(m, dtype=bool)
        sigma2 = sse / max(dof, 1)
        outside = self.outside_sq[start:]
        dense = ~(outside >= _CANCELLATION * self.centred_sq[start:])
        safe = np.where(dense, 1.0, outside)
        c = self.r_dots[start:] / np.sqrt(safe)
        in_span = np.zeros(m, dtype=bool)
        # A huge ratio overflows to -inf, whose exp is the right limit p = 0.
        with np.errstate(over="ignore"):
            exponent = -(c * c) / (2.0 * sigma2)
        rows = np.flatnonzero(dense)
        if rows.size:
            self._bring_up(basis)
            new = [int(k) + start for k in rows if int(k) + start not in self.dense]
            if new:
                F = self.cols.take(new).to_dense()
                f_norm = np.sqrt(_sq_norms(F))
                project_out(F, basis)
                for i, k in enumerate(new):
                    self.dense[k] = (F[i], float(f_norm[i]))
            keys = [int(k) + start for k in rows]
            P = np.array([self.dense[k][0] for k in keys])
            f_norms = np.array([self.dense[k][1] for k in keys])
            e_dense, s_dense = _dense_exponents(P, f_norms, r, sigma2, tol)
            exponent[rows] = e_dense
            in_span[rows] = s_dense
        return exponent, in_span


def _dense_exponents(
    P: Matrix, f_norm: Vector, r: Vector, sigma2: float, tol: float
) -> tuple[Vector, np.ndarray[Any, np.dtype[np.bool_]]]:
    """Exponents and in-span mask of densely orthogonalised rows P."""
    norm = np.sqrt(_sq_norms(P))
    # A column whose orthogonalised part is rounding noise lies in
    # span[1, S]: SSE_new = SSE_old, p = 1 (docs/algorithms/alpha_investing.md, step 2).
    in_span = norm <= tol * f_norm
    safe = np.where(in_span, 1.0, norm)
    c = row_dots(P, r) / safe
    with np.errstate(over="ignore"):
        exponent = -(c * c) / (2.0 * sigma2)
    return np.where(in_span, 0.0, exponent), in_span


def intercept_residual(y: Vector, Q: Matrix) -> Vector:
    """Residual of y on the intercept; projected twice ("twice is enough") so that it is
    orthogonal to Q to working precision."""
    r = y.copy()[None, :]
    project_out(r, Q)
    project_out(r, Q)
    out: Vector = r[0]
    return out


def p_values_from(
    parts: list[tuple[Vector, np.ndarray[Any, np.dtype[np.bool_]]]],
) -> tuple[Vector, np.ndarray[Any, np.dtype[np.bool_]]]:
    """p-values and in-span masks from each target column's (exponent, in-span).

    One column: p = exp((SSE_new - SSE_old) / (2 sigma2)). K class indicators
    (docs/algorithms.md, "Targets"): t = sum_k (SSE_old,k - SSE_new,k) / sigma2_k
    and p = P(chi2 with 2K degrees of freedom > t), i.e. with h = t / 2,
    exp(-h) sum_{i<K} h^i / i!. The sum over classes is exact (``math.fsum``),
    so the order of the classes cannot change it.
    """
    if len(parts) == 1:
        exponent, in_span = parts[0]
        p = [1.0 if span else math.exp(float(e)) for e, span in zip(exponent, in_span, strict=True)]
        return np.array(p, dtype=np.float64), in_span.copy()
    in_span = np.logical_and.reduce([span for _, span in parts])
    K = len(parts)
    out = np.ones(in_span.shape[0])
    for j in np.flatnonzero(~in_span):
        h = math.fsum(-float(e[j]) for e, _ in parts)
        out[j] = _chi2_even_sf(h, K)
    return out, in_span


def _chi2_even_sf(h: float, K: int) -> float:
    """P(chi2 with 2K degrees of freedom > 2h) = exp(-h) sum_{i<K} h^i / i!.

    >>> round(_chi2_even_sf(1.5, 1), 12) == round(math.exp(-1.5), 12)
    True
    >>> round(_chi2_even_sf(2.0, 3), 6)  # exp(-2) (1 + 2 + 2)
    0.676676
    """
    if not h > 0.0:
        return 1.0
    if math.isinf(h):
        return 0.0
    logh = math.log(h)
    terms = [i * logh - math.lgamma(i + 1) for i in range(K)]
    top = max(terms)
    return min(1.0, math.exp(top - h) * math.fsum(math.exp(t - top) for t in terms))


__all__ = ["Pending", "intercept_residual", "p_values_from", "project_out", "span_tolerance"]
