"""Grafting: streamwise feature selection by gradient tests on an L1-penalised model.

docs/algorithms/grafting.md, "The model". The model is linear in the standardised selected
columns with an unpenalised intercept b, fitted by minimising

    L(w, b) = (1/n) sum_i loss(y_i, b + x_iS . w) + lambda1 ||w||_1 + lambda2 ||w||_2^2.

An arriving feature f enters with w_f = 0. Because ||w||_1 has subgradient
[-lambda1, lambda1] at 0, w_f = 0 stays optimal iff the data term's derivative
g = dL/dw_f = (1/n) sum_i dloss/dmargin_i * x_if satisfies |g| <= lambda1; then f
is rejected without refitting. Otherwise f joins S, (w, b) is re-optimised and
members whose weight is exactly 0 at the new optimum are evicted.

Losses (margin m = b + x . w):

* ``logistic``: loss = ln(1 + exp(-y m)) with y in {-1, +1} (labels {0, 1} are
  mapped 0 -> -1), Perkins et al.'s binomial negative log-likelihood.
* ``squared``: loss = (y - m)^2, without a factor 1/2, as the mean squared
  error of Perkins et al.; dloss/dm = -2 (y - m).

References
----------
Simon Perkins, Kevin Lacker, James Theiler. "Grafting: Fast, Incremental
Feature Selection by Gradient Descent in Function Space." Journal of Machine
Learning Research 3:1333-1356, 2003.

Simon Perkins, James Theiler. "Online Feature Selection using Grafting."
ICML 2003.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize
from scipy.special import expit

from featurestream.selectors.base import FeatureSelector, Matrix, Vector
from featurestream.selectors.decisions import (
    Decision,
    Eviction,
    Reason,
    ScoreKind,  # scores
)
from featurestream.selectors.params import Interval, NoneOr, Params, StrOptions
from featurestream.selectors.targets import binary_signs
from featurestream.stats.columns import is_constant_rows, row_dots

# L-BFGS-B stopping rules (docs/algorithms/grafting.md, "Exact rules", step 2: relative
# tolerance 1e-8 on the objective). FTOL is scipy's relative reduction of the objective between
# iterations; PGTOL bounds the largest projected-gradient component, so the
# optimiser does not stop on a flat step while the gradient is still sizeable.
FTOL = 1e-8
PGTOL = 1e-10
MAXITER = 15000


@dataclass(frozen=True, kw_only=True)
class GraftingParams(Params):
    """Parameters of Grafting (named as in docs/algorithms.md, "Grafting")."""

    algorithm: ClassVar[str] = "Grafting"
    constraints: ClassVar[dict[str, Any]] = {
        "loss": StrOptions(("logistic", "squared")),
        "lambda1": Interval(float, 0.0, None, "left"),
        "lambda2": Interval(float, 0.0, None, "left"),
        "max_features": NoneOr(Interval(int, 1, None, "left")),
    }
    descriptions: ClassVar[dict[str, str]] = {
        "loss": "the model's loss",
        "lambda1": "L1 penalty: the gradient a feature must exceed to enter",
        "lambda2": "L2 penalty",
        "max_features": "keep at most this many features (largest weights)",
    }

    loss: str = "logistic"
    lambda1: float = 0.05
    lambda2: float = 0.0
    max_features: int | None = None


@dataclass(frozen=True)
class GraftingState:
    """Everything Grafting knows.

    Attributes
    ----------
    y : the target as the loss uses it (n,): labels in {-1, +1} for the
        logistic loss, the values as given for the squared loss.
    selected : names of S, in arrival order.
    columns : the standardised columns of S, feature-major (|S|, n).
    means, stds : the mean and (population) standard deviation each member's
        raw column was standardised with.
    weights : w, one per member of S (never exactly 0).
    intercept : b.
    loss : the data term (1/n) sum loss at the optimum.
    objective : L(w, b) at the optimum.
    features_seen, features_accepted, features_rejected, features_evicted : counters.
    """

    y: Vector
    selected: tuple[str, ...] = ()
    columns: Matrix = field(default_factory=lambda: np.zeros((0, 0)))
    means: Vector = field(default_factory=lambda: np.zeros(0))
    stds: Vector = field(default_factory=lambda: np.zeros(0))
    weights: Vector = field(default_factory=lambda: np.zeros(0))
    intercept: float = 0.0
    loss: float = 0.0
    objective: float = 0.0
    features_seen: int = 0
    features_accepted: int = 0
    features_rejected: int = 0
    features_evicted: int = 0


@dataclass(frozen=True)
class _Fit:
    weights: Vector
    intercept: float
    loss: float
    objective: float


class Grafting(FeatureSelector[GraftingParams, GraftingState]):
    """Streamwise grafting: L1-penalised linear model grown by gradient tests.

    Parameters
    ----------
    params : GraftingParams
        ``loss`` (logistic or squared), ``lambda1`` (L1), ``lambda2`` (L2),
        ``max_features``.

    Examples
    --------
    Squared loss, y = [1, -1, 1, -1, 1, -1] (b = mean y = 0 at the start, so
    dloss/dm = -2 y). Column ``a`` = y standardises to y itself (mean 0, std 1):
    g = (1/6) sum -2 y_i y_i = -2, |g| > 0.5, accepted; the refit gives
    w_a = 1 - lambda1 / 2 = 0.75 (the lasso soft threshold for
    (1/n) sum (y - w x)^2 with ||x||^2 = n). Column ``z`` = [1, 1, -1, -1, 1, -1]
    is standardised to itself too; with residual y - 0.75 a = 0.25 y,
    g = (1/6) sum -2 (0.25 y_i) z_i = -(0.5/6) * 2 = -1/6, |g| <= 0.5, rejected.

    >>> import numpy as np
    >>> y = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])
    >>> sel = Grafting.start(GraftingParams(loss="squared", lambda1=0.5), y)
    >>> d = sel.learn_features(["a", "z"], [y, [1, 1, -1, -1, 1, -1]])
    >>> [(x.feature, x.accepted, x.reason and x.reason.value, round(x.score, 4)) for x in d]
    [('a', True, None, 2.0), ('z', False, 'gradient below lambda1', 0.1667)]
    >>> [(f.name, round(f.score, 6)) for f in sel.selected_features()]
    [('a', 0.75)]

    References
    ----------
    Perkins, Lacker, Theiler. Grafting: Fast, Incremental Feature Selection by
    Gradient Descent in Function Space. JMLR 3, 2003.
    """

    name: ClassVar[str] = "grafting"
    # The selection shows each member's signed weight in the model; a decision, the
    # gradient test's |dL/dw| (the entry test against lambda1).
    score: ClassVar[ScoreKind] = ScoreKind("weight", by_magnitude=True)
    decision_score: ClassVar[ScoreKind | None] = ScoreKind("abs_gradient")
    # docs/algorithms.md, "Targets": defined for binary (logistic) and continuous
    # (squared loss) targets; a multi-class stream is refused at creation.
    accepts_multiclass: ClassVar[bool] = False
    params_type: ClassVar[type[Params]] = GraftingParams
    state_type: ClassVar[type[Any]] = GraftingState
    score_field: ClassVar[str] = "weights"
    status_fields: ClassVar[tuple[str, ...]] = ("intercept", "loss", "objective")

    @classmethod
    def requires_binary_target(cls, params: Any) -> bool:
        return bool(params.loss == "logistic")

    @classmethod
    def test_params(cls) -> list[dict[str, Any]]:
        return [
            {},
            {"loss": "squared"},
            {"loss": "squared", "lambda1": 0.2, "lambda2": 0.1, "max_features": 2},
        ]

    @classmethod
    def check_target(cls, params: GraftingParams, y: Vector) -> None:
        if params.loss == "logistic":
            # The logistic loss needs two classes, any two labels, the lower
            # coded -1 (docs/algorithms/grafting.md, "The model").
            binary_signs(y, field="target")

    @classmethod
    def initial_state(cls, params: GraftingParams, y: Vector) -> GraftingState:
        target = binary_signs(y, field="target") if params.loss == "logistic" else y.copy()
        n = target.shape[0]
        fit = _optimise(params, np.zeros((0, n)), target, np.zeros(0), 0.0)
        return GraftingState(
            y=target,
            columns=np.zeros((0, n)),
            intercept=fit.intercept,
            loss=fit.loss,
            objective=fit.objective,
        )

    # ------------------------------------------------------------------ learning

    def _learn_batch(
        self, names: list[str], X: Matrix, groups: Sequence[str | None] | None
    ) -> list[Decision]:
        p = self.params
        s = self.state
        n = self.n_instances
        y = s.y

        constant = is_constant_rows(X)
        Z, mean, std = _standardize(X, constant)

        cols = s.columns
        means, stds = s.means, s.stds
        sel = list(s.selected)
        fit = _Fit(s.weights, s.intercept, s.loss, s.objective)

        # Gradient test for all non-constant columns against the current model,
        # one row_dots; recomputed for the remaining columns after each
        # acceptance, since that changes the model.
        g = np.zeros(len(names))
        g[~constant] = row_dots(Z[~constant], _dloss(p.loss, y, cols, fit)) / n

        decisions: list[Decision] = []
        accepted_total = 0
        evicted_total = 0
        for j, name in enumerate(names):
            self.checkpoint(j)
            if constant[j]:
                decisions.append(Decision(name, False, Reason.CONSTANT))
                continue
            score = abs(float(g[j]))
            # Subgradient of lambda1 |w_f| at 0 (docs/algorithms/grafting.md, step 1).
            if score <= p.lambda1:
                decisions.append(Decision(name, False, Reason.GRADIENT_BELOW_LAMBDA1, score=score))
                continue

            cols = np.concatenate([cols, Z[j : j + 1]], axis=0)
            means = np.append(means, mean[j])
            stds = np.append(stds, std[j])
            sel.append(name)
            fit = _optimise(p, cols, y, np.append(fit.weights, 0.0), fit.intercept)
            evictions: list[Eviction] = []
            rejected: Reason | None = None
            while True:
                # docs/algorithms/grafting.md, step 2: weights exactly 0 at the optimum leave S.
                # L-BFGS-B projects onto the bounds w+, w- >= 0, so a weight
                # the L1 term wants at 0 is 0 exactly, not merely small.
                drop = fit.weights == 0.0
                reason = Reason.WEIGHT_SHRUNK_TO_ZERO
                refit = False
                if not drop.any() and p.max_features is not None and len(sel) > p.max_features:
                    drop = np.arange(len(sel)) == _weakest(fit.weights)
                    reason = Reason.MAX_FEATURES
                    refit = True
                if not drop.any():
                    break
                keep = ~drop
                for k in np.flatnonzero(drop):
                    if sel[k] == name:
                        rejected = reason
                    else:
                        evictions.append(Eviction(sel[k], reason, by=name))
                sel = [x for x, kept in zip(sel, keep, strict=True) if kept]
                cols = np.ascontiguousarray(cols[keep])
                means, stds = means[keep], stds[keep]
                fit = _Fit(fit.weights[keep], fit.intercept, fit.loss, fit.objective)
                if refit:
                    fit = _optimise(p, cols, y, fit.weights, fit.intercept)

            evicted_total += len(evictions)
            if rejected is None:
                accepted_total += 1
                decisions.append(Decision(name, True, None, score=score, evicted=tuple(evictions)))
            else:
                decisions.append(
                    Decision(name, False, rejected, score=score, evicted=tuple(evictions))
                )
            rest = np.flatnonzero(~constant[j + 1 :]) + j + 1
            g[rest] = row_dots(Z[rest], _dloss(p.loss, y, cols, fit)) / n

        b = len(names)
        self.state = replace(
            s,
            selected=tuple(sel),
            columns=np.ascontiguousarray(cols),
            means=np.asarray(means, dtype=np.float64),
            stds=np.asarray(stds, dtype=np.float64),
            weights=np.asarray(fit.weights, dtype=np.float64),
            intercept=float(fit.intercept),
            loss=float(fit.loss),
            objective=float(fit.objective),
            **self.counted(b, accepted_total, evicted_total),
        )
        return decisions


# --------------------------------------------------------------------------- model


def _standardize(X: Matrix, constant: npt.NDArray[np.bool_]) -> tuple[Matrix, Vector, Vector]:
    """Standardise each row with its own mean and population std
    (docs/algorithms/grafting.md, "The model").

    Returns ``(Z, mean, std)``; constant rows give zeros in Z. Each row is
    first scaled by a power of two that brings its largest magnitude into
    [0.5, 1): the scaling is exact, and squaring can then neither overflow nor
    underflow (a column of values near 1e-200 has a variance below the
    smallest float64). Sums run along the contiguous axis of each row, so a
    column's standardised values do not depend on its batch-mates.

    >>> Z, mean, std = _standardize(np.array([[1.0, 3.0], [2.0, 2.0]]), np.array([False, True]))
    >>> Z, mean, std
    (array([[-1.,  1.], [ 0.,  0.]]), array([2., 2.]), array([1., 0.]))
    """
    n = X.shape[1]
    _, e = np.frexp(np.abs(X).max(axis=1))
    U = np.ldexp(X, -e[:, None])
    mu = U.sum(axis=1) / n
    C = U - mu[:, None]
    sd = np.sqrt((C * C).sum(axis=1) / n)
    # In a non-constant row two values differ, so some C is non-zero, and as
    # max |u| >= 0.5 the spread is at least an ulp of 0.5: sd > 0. Constant
    # rows (docs/algorithms.md, "Constant columns") are rejected before use and zeroed here.
    Z = C / np.where(constant, 1.0, sd)[:, None]
    Z[constant] = 0.0
    return np.ascontiguousarray(Z), np.ldexp(mu, e), np.where(constant, 0.0, np.ldexp(sd, e))


def _weakest(w: Vector) -> int:
    """Position of the member with the smallest |w|; on a tie the later arrival goes.

    ``max_features`` keeps the members with the largest |w| (ties: earlier
    arrival wins, as for SAOLA in docs/algorithms/saola.md, step 4).

    >>> _weakest(np.array([0.5, -0.2, 0.2]))
    2
    """
    aw = np.abs(w)
    return max(range(aw.shape[0]), key=lambda t: (-aw[t], t))


def _margin(cols: Matrix, w: Vector, b: float) -> Vector:
    """b + sum_j w_j x_j.

    A numpy reduction over the rows rather than a BLAS product: the inputs
    have the same shapes and values however the arrivals were batched, and
    the reduction adds the rows in order, so the optimiser's output (part of
    the State) is reproduced bit for bit on replay.
    """
    if cols.shape[0] == 0:
        return np.full(cols.shape[1], b)
    return np.asarray((w[:, None] * cols).sum(axis=0) + b, dtype=np.float64)


def _dloss(loss: str, y: Vector, cols: Matrix, fit: _Fit) -> Vector:
    """dloss/dmargin at each instance for the current model."""
    m = _margin(cols, fit.weights, fit.intercept)
    if loss == "logistic":
        return np.asarray(-y * expit(-y * m), dtype=np.float64)
    return np.asarray(-2.0 * (y - m), dtype=np.float64)


def _data_term(loss: str, y: Vector, m: Vector) -> tuple[float, Vector]:
    """(1/n) sum loss(y_i, m_i) and dloss/dm."""
    n = y.shape[0]
    if loss == "logistic":
        ym = y * m
        return float(np.logaddexp(0.0, -ym).sum() / n), -y * expit(-ym)
    res = y - m
    return float((res * res).sum() / n), -2.0 * res


def _optimise(p: GraftingParams, cols: Matrix, y: Vector, w0: Vector, b0: float) -> _Fit:
    """Minimise L(w, b) over the columns ``cols`` from the warm start (w0, b0).

    L-BFGS-B on z = [w+, w-, b] with w = w+ - w-, w+, w- >= 0 (docs/algorithms/grafting.md,
    step 2), which turns ||w||_1 into the linear term sum(w+ + w-).
    """
    k, n = cols.shape
    lam1, lam2 = p.lambda1, p.lambda2

    def fun(z: Vector) -> tuple[float, Vector]:
        w = z[:k] - z[k : 2 * k]
        data, d = _data_term(p.loss, y, _margin(cols, w, float(z[2 * k])))
        gw = row_dots(cols, d) / n + 2.0 * lam2 * w
        f = data + lam1 * float(z[: 2 * k].sum()) + lam2 * float((w * w).sum())
        grad = np.concatenate([gw + lam1, lam1 - gw, [d.sum() / n]])
        return f, grad

    z0 = np.concatenate([np.maximum(w0, 0.0), np.maximum(-w0, 0.0), [b0]])
    bounds = [(0.0, None)] * (2 * k) + [(None, None)]
    res = minimize(
        fun,
        z0,
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"ftol": FTOL, "gtol": PGTOL, "maxiter": MAXITER},
    )
    z = np.asarray(res.x, dtype=np.float64)
    w = z[:k] - z[k : 2 * k]
    b = float(z[2 * k])
    data, _ = _data_term(p.loss, y, _margin(cols, w, b))
    objective = data + lam1 * float(np.abs(w).sum()) + lam2 * float((w * w).sum())
    return _Fit(np.ascontiguousarray(w), b, data, objective)


__all__ = ["Grafting", "GraftingParams", "GraftingState"]
