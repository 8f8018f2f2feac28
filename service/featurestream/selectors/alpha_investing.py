"""Alpha-investing: streamwise feature selection with an alpha-wealth budget.

docs/algorithms/alpha_investing.md, "Exact rules". The i-th arriving feature (i = 1 for the
first) is tested at level alpha_i = w / (2 i) with the p-value of adding it to
the least-squares fit of y on [1, S]:

    p = exp((SSE_new - SSE_old) / (2 sigma2)),    sigma2 = SSE_old / (n - |S| - 1).

It is accepted iff p < alpha_i, which pays w += dw - alpha_i; a rejection costs
w -= alpha_i. Accepted features are never evicted. The default (``variance:
"residual"``) estimates sigma2 with the residual degrees of freedom of the fit
on [1, S] and accepts no feature that would leave fewer than RESIDUAL_MARGIN of
them, so a fit nearing saturation (as many parameters as rows) stops taking
noise; ``variance: "reference"`` is the published rule, sigma2 = SSE_old / n
without a limit.

The fit is kept incrementally: the State holds an orthonormal basis Q of
span[1, S] (one row per basis vector) and the residual r of y on that span. For
a new column f, with q_f the unit vector of f orthogonalised against Q,
SSE_new = SSE_old - (q_f . r)^2, so a test costs O(n |S|) instead of a fresh
least-squares fit; and since q_f . r = (f . r) / ||f outside the span||, it is
read from the column's non-zeros alone, O(nnz(f) |S|), unless most of f lies
in the span (see ``_Pending``).

References
----------
Jing Zhou, Dean P. Foster, Robert A. Stine, Lyle H. Ungar. "Streamwise Feature
Selection." Journal of Machine Learning Research 7:1861-1885, 2006.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from featurestream.selectors.base import FeatureSelector, Matrix, Vector
from featurestream.selectors.decisions import (
    Decision,
    Reason,
    ScoreKind,  # scores
)
from featurestream.selectors.params import Interval, Params, StrOptions
from featurestream.selectors.targets import indicators
from featurestream.stats.columns import row_dots
from featurestream.stats.sparse import Columns

_EPS = float(np.finfo(np.float64).eps)
# variance "residual": a feature is accepted only while the model [1, S, f] leaves
# at least this many residual degrees of freedom (n - |S| - 2).
RESIDUAL_MARGIN = 10


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


def _project_out(F: Matrix, basis: Iterable[Vector]) -> None:
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


class _Pending:
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
        _project_out(v, basis)
        return v

    def _bring_up(self, basis: list[Vector]) -> None:
        if self.dense and self.through < len(basis):
            keys = list(self.dense)
            P = np.array([self.dense[k][0] for k in keys])
            _project_out(P, basis[self.through :])
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
                _project_out(F, basis)
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


@dataclass(frozen=True, kw_only=True)
class AlphaInvestingParams(Params):
    """Parameters of Alpha-investing (named as in docs/algorithms.md, "Alpha-investing").

    ``w0`` (initial wealth) and ``dw`` (payout) are alpha-wealth, i.e.
    probabilities: with w0 <= 1 and dw <= 1 the wealth before the i-th test is
    at most 1 + (i - 1), so alpha_i <= 1/2 and a p-value of 1 (a column that
    adds nothing to the fit) can never be accepted.
    """

    algorithm: ClassVar[str] = "Alpha-investing"
    constraints: ClassVar[dict[str, Any]] = {
        "w0": Interval(float, 0.0, 1.0, "right"),
        "dw": Interval(float, 0.0, 1.0, "both"),
        "variance": StrOptions(("residual", "reference")),
    }
    # A stream stored before ``variance`` existed keeps the rule it was created with.
    legacy: ClassVar[dict[str, Any]] = {"variance": "reference"}
    descriptions: ClassVar[dict[str, str]] = {
        "w0": "initial alpha-wealth",
        "dw": "wealth paid back on each acceptance",
        "variance": "`residual`: sigma2 = SSE_old over the residual degrees of freedom "
        "(n - 1 - the number selected), and no feature accepted "
        f"that would leave the model fewer than {RESIDUAL_MARGIN} residual degrees of freedom; "
        "`reference`: sigma2 = SSE_old / n and no limit (the published algorithm)",
    }

    w0: float = 0.5
    dw: float = 0.5
    variance: str = "residual"


@dataclass(frozen=True)
class AlphaInvestingState:
    """Everything Alpha-investing knows.

    Attributes
    ----------
    y : the target, as given (n,), or its class codes 0..K-1 (multi-class).
    Q : orthonormal basis of span[1, S], feature-major (1 + |S|, n); row 0 is
        the normalised intercept column.
    residual : residual of y on span[1, S] (n,).
    sse : SSE_old = residual . residual.
    wealth : the current alpha-wealth w.
    selected : names of S, in arrival order.
    p_values : p-value of each member of S when it was accepted.
    features_tested : i, the number of features seen (constant ones included).
    features_accepted, features_rejected : counters.
    """

    y: Vector
    Q: Matrix
    residual: Vector
    sse: float
    wealth: float
    selected: tuple[str, ...] = ()
    p_values: Vector = field(default_factory=lambda: np.zeros(0))
    features_tested: int = 0
    features_accepted: int = 0
    features_rejected: int = 0
    # Multi-class target (K >= 3; else 0): the residual of each class indicator
    # on span[1, S] (K, n) and its SSE (K,); ``residual`` and ``sse`` then hold
    # those of the first class and the sum of the SSEs.
    n_classes: int = 0
    class_residuals: Matrix = field(default_factory=lambda: np.zeros((0, 0)))
    class_sse: Vector = field(default_factory=lambda: np.zeros(0))

    @property
    def features_seen(self) -> int:
        """Every arrival is tested (constant ones count too): the same number."""
        return self.features_tested


class AlphaInvesting(FeatureSelector[AlphaInvestingParams, AlphaInvestingState]):
    """Streamwise regression with alpha-investing.

    Parameters
    ----------
    params : AlphaInvestingParams
        ``w0`` (initial wealth, default 0.5), ``dw`` (payout on acceptance,
        default 0.5) and ``variance`` (``residual``, default, or ``reference``).

    Examples
    --------
    The published rule (``variance: "reference"``, sigma2 = SSE_old / n; the
    default would accept nothing from 6 rows, fewer than the margin). With
    y = 1..6, column ``a`` = [1, 2, 3, 4, 6, 5] has centred cross product
    16.5 with y and SST = 17.5, so adding it removes 16.5^2 / 17.5 = 15.557 of
    SSE_old = 17.5: p = exp(-15.557 / (2 * 17.5 / 6)) = exp(-2.667) = 0.0695 <
    alpha_1 = 0.5 / 2, accepted, w = 0.5 + 0.5 - 0.25 = 0.75. The constant
    ``c`` is feature 2 (alpha_2 = 0.75 / 4, w = 0.5625); ``b`` = 2 a + 1 lies in
    span[1, a], so SSE_new = SSE_old, p = 1 (alpha_3 = 0.09375, w = 0.46875).

    >>> import numpy as np
    >>> y = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    >>> sel = AlphaInvesting.start(AlphaInvestingParams(variance="reference"), y)
    >>> d = sel.learn_features(
    ...     ["a", "c", "b"],
    ...     [[1, 2, 3, 4, 6, 5],
    ...      [7, 7, 7, 7, 7, 7],
    ...      [3, 5, 7, 9, 13, 11]])
    >>> [(x.feature, x.accepted, x.reason and x.reason.value) for x in d]
    [('a', True, None), ('c', False, 'constant'), ('b', False, 'not significant')]
    >>> round(d[0].score, 4), d[2].score
    (0.0695, 1.0)
    >>> sel.status()["wealth"]
    0.46875

    References
    ----------
    Zhou, Foster, Stine, Ungar. Streamwise Feature Selection. JMLR 7, 2006.
    """

    name: ClassVar[str] = "alpha_investing"
    score: ClassVar[ScoreKind] = ScoreKind("p_value", higher_is_better=False)
    accepts_sparse: ClassVar[bool] = True
    params_type: ClassVar[type[Params]] = AlphaInvestingParams
    state_type: ClassVar[type[Any]] = AlphaInvestingState
    score_field: ClassVar[str] = "p_values"
    status_fields: ClassVar[tuple[str, ...]] = ("wealth", "features_tested", "sse")

    @classmethod
    def test_params(cls) -> list[dict[str, Any]]:
        return [{}, {"w0": 1.0, "dw": 1.0}, {"w0": 0.05, "dw": 0.05}]

    @classmethod
    def initial_state(cls, params: AlphaInvestingParams, y: Vector) -> AlphaInvestingState:
        n = y.shape[0]
        Q = np.full((1, n), 1.0 / math.sqrt(n))
        r = _intercept_residual(y, Q)
        return AlphaInvestingState(
            y=y.copy(),
            Q=Q,
            residual=r,
            sse=float(row_dots(r[None, :], r)[0]),
            wealth=float(params.w0),
            p_values=np.zeros(0),
        )

    @classmethod
    def multiclass_state(
        cls, params: AlphaInvestingParams, y: Vector, n_classes: int
    ) -> AlphaInvestingState:
        s = cls.initial_state(params, y)
        R = np.array([_intercept_residual(col, s.Q) for col in indicators(y, n_classes)])
        sse = np.array([float(row_dots(r[None, :], r)[0]) for r in R])
        return replace(
            s,
            residual=R[0].copy(),
            sse=math.fsum(sse.tolist()),
            n_classes=n_classes,
            class_residuals=R,
            class_sse=sse,
        )

    # ------------------------------------------------------------------ queries

    @property
    def wealth(self) -> float:
        return self.state.wealth

    # ------------------------------------------------------------------ learning

    def _targets(self) -> tuple[list[Vector], list[float], list[float]]:
        """Per target column: its residual on span[1, S], SSE_old and norm."""
        s = self.state
        if not s.n_classes:
            y_norm = math.sqrt(float(row_dots(s.y[None, :], s.y)[0]))
            return [s.residual.copy()], [s.sse], [y_norm]
        cols = indicators(s.y, s.n_classes)
        norms = [math.sqrt(float(row_dots(c[None, :], c)[0])) for c in cols]
        return [r.copy() for r in s.class_residuals], s.class_sse.tolist(), norms

    def _learn_batch(
        self, names: list[str], X: Matrix | Any, groups: Sequence[str | None] | None
    ) -> list[Decision]:
        p = self.params
        s = self.state
        n = self.n_instances
        tol = span_tolerance(n)
        residuals, sses, y_norms = self._targets()
        # Every column in its canonical sparse form: dense or sparse, alone or in
        # a batch, a column is the same object, and every per-column number below
        # is a reduction over its own non-zeros (stats/sparse.py).
        cols = Columns.from_any(X)
        # The fit on [1, S, f] depends on f only through span(f), so each column
        # is first scaled (exactly) by a power of two that brings its largest
        # magnitude into [0.5, 1): its squares then stay in float64 range (a
        # column of values near 1e-200 would otherwise have a norm that
        # underflows to 0 and look like it lies in the span).
        peak = np.zeros(cols.b)
        has = cols.nnz > 0
        if has.any():
            peak[has] = np.maximum.reduceat(np.abs(cols.data), cols.indptr[:-1][has])
        _, e = np.frexp(peak)
        cols = Columns(
            cols.n, cols.indptr, cols.indices, np.ldexp(cols.data, -np.repeat(e, cols.nnz))
        )
        _, centred_norm, constant = cols.moments()
        cand = np.flatnonzero(~constant)
        if cand.size < cols.b:
            cols = cols.take(cand)
        row_of = {int(j): k for k, j in enumerate(cand)}
        # One fit per target column (a multi-class target: one per class indicator).
        pendings = [_Pending(cols, s.Q, r, centred_norm[cand] ** 2) for r in residuals]
        basis: list[Vector] = list(s.Q)

        residual_variance = p.variance == "residual"

        def tests(start: int) -> tuple[Vector, np.ndarray[Any, np.dtype[np.bool_]]]:
            # len(basis) = 1 + |S|: the parameters of the fit on [1, S].
            dof = n - len(basis) if residual_variance else n
            parts = [
                pending.exponents(start, basis, r, sse, y_norm, tol, dof)
                for pending, r, sse, y_norm in zip(pendings, residuals, sses, y_norms, strict=True)
            ]
            return _p_values(parts)

        p_vals, in_span = tests(0)

        wealth = s.wealth
        i = s.features_tested
        selected = list(s.selected)
        p_values = list(s.p_values.tolist())
        decisions: list[Decision] = []
        accepted_total = 0
        for j, name in enumerate(names):
            self.checkpoint(j)
            i += 1
            alpha_i = wealth / (2 * i)
            if constant[j]:
                # docs/algorithms.md, "Constant columns": rejected before any test, but it
                # still is the i-th feature and a rejection costs alpha_i.
                wealth -= alpha_i
                decisions.append(Decision(name, False, Reason.CONSTANT))
                continue
            k = row_of[j]
            p_val = float(p_vals[k])
            # A p-value of 1 is never below alpha_i <= 1/2 (see the Params
            # docstring); `in_span` is kept in the test so that a column that
            # adds no direction can never reach the basis.
            # variance "residual": [1, S, f] must leave RESIDUAL_MARGIN residual
            # degrees of freedom, n - (len(basis) + 1); past that the fit is saturated.
            saturated = residual_variance and n - len(basis) - 1 < RESIDUAL_MARGIN
            if saturated or not (p_val < alpha_i and not in_span[k]):
                wealth -= alpha_i
                decisions.append(Decision(name, False, Reason.NOT_SIGNIFICANT, score=p_val))
                continue
            wealth += p.dw - alpha_i
            accepted_total += 1
            selected.append(name)
            p_values.append(p_val)
            decisions.append(Decision(name, True, None, score=p_val))
            # The new basis vector: the column projected out of the basis twice
            # (modified Gram-Schmidt, "twice is enough"), so that Q stays
            # orthonormal to working precision even for nearly collinear columns.
            v = pendings[0].projected(k, basis)
            _project_out(v, basis)
            q = v[0] / math.sqrt(float(row_dots(v, v[0])[0]))
            basis.append(q)
            for t, (pending, r) in enumerate(zip(pendings, residuals, strict=True)):
                c = float(row_dots(r[None, :], q)[0])
                r = r - c * q
                residuals[t] = r
                sses[t] = float(row_dots(r[None, :], r)[0])
                # The batch-mates still to come now see [1, S, f].
                pending.extend(k + 1, q, r)
            p_vals[k + 1 :], in_span[k + 1 :] = tests(k + 1)

        b = len(names)
        multi: dict[str, Any] = (
            {"class_residuals": np.array(residuals), "class_sse": np.array(sses)}
            if s.n_classes
            else {}
        )
        self.state = replace(
            s,
            Q=np.ascontiguousarray(np.array(basis)) if accepted_total else s.Q,
            residual=residuals[0],
            sse=sses[0] if not s.n_classes else math.fsum(sses),
            wealth=wealth,
            selected=tuple(selected),
            p_values=np.array(p_values, dtype=np.float64),
            features_tested=i,
            features_accepted=s.features_accepted + accepted_total,
            features_rejected=s.features_rejected + b - accepted_total,
            **multi,
        )
        return decisions


def _intercept_residual(y: Vector, Q: Matrix) -> Vector:
    """Residual of y on the intercept; projected twice ("twice is enough") so that it is
    orthogonal to Q to working precision."""
    r = y.copy()[None, :]
    _project_out(r, Q)
    _project_out(r, Q)
    out: Vector = r[0]
    return out


def _p_values(
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


__all__ = ["AlphaInvesting", "AlphaInvestingParams", "AlphaInvestingState", "span_tolerance"]
