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
in the span (``alpha_investing_fit.py``).

References
----------
Jing Zhou, Dean P. Foster, Robert A. Stine, Lyle H. Ungar. "Streamwise Feature
Selection." Journal of Machine Learning Research 7:1861-1885, 2006.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from featurestream.selectors.alpha_investing_fit import (
    Pending,
    intercept_residual,
    p_values_from,
    project_out,
    span_tolerance,
)
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

# variance "residual": a feature is accepted only while the model [1, S, f] leaves
# at least this many residual degrees of freedom (n - |S| - 2).
RESIDUAL_MARGIN = 10


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
        r = intercept_residual(y, Q)
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
        R = np.array([intercept_residual(col, s.Q) for col in indicators(y, n_classes)])
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
        pendings = [Pending(cols, s.Q, r, centred_norm[cand] ** 2) for r in residuals]
        basis: list[Vector] = list(s.Q)

        residual_variance = p.variance == "residual"

        def tests(start: int) -> tuple[Vector, np.ndarray[Any, np.dtype[np.bool_]]]:
            # len(basis) = 1 + |S|: the parameters of the fit on [1, S].
            dof = n - len(basis) if residual_variance else n
            parts = [
                pending.exponents(start, basis, r, sse, y_norm, tol, dof)
                for pending, r, sse, y_norm in zip(pendings, residuals, sses, y_norms, strict=True)
            ]
            return p_values_from(parts)

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
            project_out(v, basis)
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


__all__ = ["AlphaInvesting", "AlphaInvestingParams", "AlphaInvestingState"]
