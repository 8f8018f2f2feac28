"""k-best: an online filter that keeps the k features most related to the target.

docs/algorithms/kbest.md. Every instance adds its weight to decayed sums of
x, x^2 and x y (per class sums for a class target), and every feature is
scored from those sums alone (``stats/kbest.py``): |Pearson r| with the
target, or the ANOVA F statistic between the classes. The k highest scores are
selected. With a ``half_life`` the sums forget, so the selection follows a
stream whose relevant features change.

The sums are kept in a common unit that changes only every ``_EPOCH`` half-lives:
the true sums are the stored ones times 2^(-(t - t0) / h) (t instances seen,
t0 the start of the epoch), so an instance adds its values times
2^((t - t0) / h) to the features it touches and nothing else is rescaled; at
the end of an epoch every sum is multiplied by 2^(-(t - t0) / h) once and t0
becomes t. A sparse instance costs O(its non-zeros).

References
----------
The filter is the streaming form of a univariate selection (scikit-learn's
``SelectKBest`` with ``r_regression`` / ``f_classif``; River's
``feature_selection.SelectKBest`` on a similarity statistic). Fisher, R. A.
"Statistical Methods for Research Workers", 1925 (the F statistic of the
analysis of variance); Pearson, K. "Notes on regression and inheritance in
the case of two parents", Proceedings of the Royal Society of London 58, 1895.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Self

import numpy as np

from featurestream.errors import InvalidInput
from featurestream.selectors import drift
from featurestream.selectors.base import JSON, InstanceSelector, Matrix, Vector
from featurestream.selectors.decisions import InstanceUpdate, ScoreKind, SelectedFeature
from featurestream.selectors.forgetting import HALF_LIFE, HALF_LIFE_DESCRIPTION
from featurestream.selectors.kbest_labels import CONTINUOUS, resolve_labels
from featurestream.selectors.params import Interval, Params, StrOptions
from featurestream.stats.fires import top_m
from featurestream.stats.kbest import anova_f, correlation_classes, correlation_continuous
from featurestream.stats.sparse import is_sparse

Index = np.ndarray[Any, np.dtype[np.intp]]

# Half-lives per epoch of the sums' unit: the newest instance's factor stays <= 2^32.
_EPOCH = 32


@dataclass(frozen=True, kw_only=True)
class KBestParams(Params):
    """Parameters of k-best (docs/algorithms/kbest.md); ``num_features`` is required."""

    algorithm: ClassVar[str] = "k-best"
    constraints: ClassVar[dict[str, Any]] = {
        "num_features": Interval(int, 1, None, "left"),
        "score": StrOptions(("auto", "correlation", "anova")),
        "half_life": HALF_LIFE,
        **drift.CONSTRAINTS,
    }
    descriptions: ClassVar[dict[str, str]] = {
        "num_features": "k, the number of features selected (all d when k > d)",
        "score": "`correlation`: |Pearson r| with the target (the largest over the class "
        "indicators for 3 classes or more); `anova`: the F statistic between the classes; "
        "`auto`: correlation up to two classes or a continuous target, anova from 3 classes",
        "half_life": HALF_LIFE_DESCRIPTION,
        **drift.DESCRIPTIONS,
    }

    num_features: int
    score: str = "auto"
    half_life: float | None = None
    drift: str = "none"
    on_drift: str = "log"


@dataclass(frozen=True)
class KBestState:
    """Everything k-best knows.

    Attributes
    ----------
    feature_names : the d feature names, in column order.
    instances_seen : t; ``epoch_start`` t0, the count at which the sums' unit was set.
    weight, sum_x, sum_xx : W and the per-feature S_x, S_xx, in the sums' unit.
    sum_y, sum_yy, sum_xy : a continuous target's S_y, S_yy and S_xy ((d,); empty
        for a class target).
    class_weight, class_sum : a class target's n_k (K,) and S_k (K, d), classes in
        sorted order of their labels ((0,) and (0, d) for a continuous target).
    target_type, classes : the stream's target (selectors/targets.py).
    """

    feature_names: tuple[str, ...]
    sum_x: Vector
    sum_xx: Vector
    sum_xy: Vector
    class_weight: Vector
    class_sum: Matrix
    instances_seen: int = 0
    epoch_start: int = 0
    weight: float = 0.0
    sum_y: float = 0.0
    sum_yy: float = 0.0
    target_type: str = "auto"
    classes: tuple[Any, ...] = ()
    # The drift watch (selectors/drift.py): empty without one.
    watch: tuple[Any, ...] = ()


class KBest(InstanceSelector[KBestParams, KBestState]):
    """The k features of highest relevance to the target, from decayed sums.

    Parameters
    ----------
    params : KBestParams
        ``num_features`` (k, required), ``score`` (``auto``, ``correlation`` or
        ``anova``) and ``half_life`` (h instances; default none: no forgetting).

    Notes
    -----
    * Targets follow docs/algorithms.md, "Targets": continuous numbers, or
      classes (any labels, numbers or strings). ``anova`` needs classes; a
      continuous target with it is refused (422) at its first labelled batch,
      or at creation when declared.
    * ``auto`` scores by correlation up to two classes (the binary rule) and
      for a continuous target, by the F statistic from the third class on.
    * Scores are computed from the sums after each batch; before the first
      instance nothing is selected. Ties go to the lower index.
    * A batch of m instances equals m batches of one, bit for bit: every sum
      adds the instances in arrival order, one after the other.

    Examples
    --------
    Two features and four instances with y = x_0: feature a correlates
    perfectly, b not at all (its values are balanced across y).

    >>> import numpy as np
    >>> sel = KBest.start(KBestParams(num_features=1), ["a", "b"])
    >>> X = np.array([[0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    >>> u = sel.learn_instances(X, [0, 1, 0, 1])
    >>> [(f.name, f.score) for f in sel.selected_features()]
    [('a', 1.0)]
    """

    name: ClassVar[str] = "kbest"
    score: ClassVar[ScoreKind] = ScoreKind("abs_correlation")
    score_by: ClassVar[tuple[str, dict[str, ScoreKind]] | None] = (
        "score",
        {
            "auto": ScoreKind("abs_correlation_or_f_statistic"),
            "correlation": ScoreKind("abs_correlation"),
            "anova": ScoreKind("f_statistic"),
        },
    )
    params_type: ClassVar[type[Params]] = KBestParams
    state_type: ClassVar[type[Any]] = KBestState
    accepts_multiclass: ClassVar[bool] = True
    accepts_sparse: ClassVar[bool] = True
    _cache: tuple[KBestState, KBestParams, Index, Vector] | None = None

    @classmethod
    def test_params(cls) -> list[dict[str, Any]]:
        return [
            {"num_features": 3},
            {"num_features": 2, "score": "anova"},
            {"num_features": 4, "score": "correlation", "half_life": 5.0},
            {"num_features": 3, "half_life": 0.01},
        ]

    @classmethod
    def initial_state(cls, params: KBestParams, feature_names: tuple[str, ...]) -> KBestState:
        d = len(feature_names)
        return KBestState(
            feature_names=feature_names,
            sum_x=np.zeros(d),
            sum_xx=np.zeros(d),
            sum_xy=np.zeros(0),
            class_weight=np.zeros(0),
            class_sum=np.zeros((0, d)),
        )

    @classmethod
    def start(
        cls, params: KBestParams, feature_names: Sequence[str], target_type: str = "auto"
    ) -> Self:
        if params.score == "anova" and target_type == CONTINUOUS:
            raise InvalidInput(
                'score "anova" compares classes; a continuous target takes "correlation".',
                field="target_type",
            )
        return super().start(params, feature_names, target_type)

    # ------------------------------------------------------------------ queries

    def score_used(self) -> str:
        """``correlation`` or ``anova``: what the scores are now (``auto`` resolved)."""
        if self.params.score != "auto":
            return self.params.score
        return "anova" if len(self.state.classes) >= 3 else "correlation"

    def scores(self) -> Vector:
        """Every feature's score from the current sums."""
        s = self.state
        if s.target_type == CONTINUOUS:
            return correlation_continuous(s.weight, s.sum_x, s.sum_xx, s.sum_y, s.sum_yy, s.sum_xy)
        if self.score_used() == "anova":
            total = s.weight * self._unit(s.instances_seen - s.epoch_start)
            return anova_f(s.weight, total, s.sum_x, s.sum_xx, s.class_weight, s.class_sum)
        return correlation_classes(s.weight, s.sum_x, s.sum_xx, s.class_weight, s.class_sum)

    def _order(self) -> tuple[Index, Vector]:
        cached = self._cache
        if cached is not None and cached[0] is self.state and cached[1] is self.params:
            return cached[2], cached[3]
        scores = self.scores()
        order = np.zeros(0, dtype=np.intp)
        if self.state.instances_seen:
            order = top_m(scores, self.params.num_features)
        self._cache = (self.state, self.params, order, scores)
        return order, scores

    def selected_features(self) -> tuple[SelectedFeature, ...]:
        order, scores = self._order()
        names = self.state.feature_names
        return tuple(SelectedFeature(names[i], float(scores[i])) for i in order)

    def status(self) -> dict[str, JSON]:
        return {**super().status(), "score": self.score_used()}

    # ------------------------------------------------------------------ learning

    def _unit(self, age: int) -> float:
        """2^(-age / h): the true sums per stored unit, ``age`` instances into the epoch."""
        h = self.params.half_life
        return 1.0 if h is None else float(2.0 ** (-age / h))

    def _factor(self, age: int) -> float:
        """2^(age / h): what an instance ``age`` instances into the epoch adds per value."""
        h = self.params.half_life
        return 1.0 if h is None else float(2.0 ** (age / h))

    def _epoch(self) -> int | None:
        """Instances per epoch of the sums' unit (None: no forgetting, one unit forever)."""
        h = self.params.half_life
        return None if h is None else max(1, int(_EPOCH * h))

    def _learn_batch(self, X: Matrix, y: Vector | None) -> InstanceUpdate:
        s = self.state
        m = X.shape[0]
        if m == 0:
            return InstanceUpdate(instances=0, instances_seen=s.instances_seen)
        target, labels = resolve_labels(self.name, self.params.score, s, y)
        before, _ = self._order()
        sums = _Sums.of(replace(s, **target))
        t, lo = s.instances_seen, 0
        epoch = self._epoch()
        while lo < m:
            # The rows up to the end of the current epoch share the sums' unit.
            hi = m if epoch is None else min(m, lo + sums.epoch_start + epoch - t)
            ages = range(t + 1 - sums.epoch_start, t + 1 - sums.epoch_start + hi - lo)
            w = np.ones(hi - lo) if epoch is None else np.array([self._factor(a) for a in ages])
            sums.add(X[lo:hi], labels[lo:hi], w)
            t += hi - lo
            lo = hi
            if epoch is not None and t - sums.epoch_start == epoch:
                sums.fold(self._unit(epoch), t)
        self.state = sums.state(t)
        after, _ = self._order()
        return InstanceUpdate(
            instances=m,
            instances_seen=t,
            selection_changed=not np.array_equal(before, after),
        )


class _Sums:
    """The mutable sums of one batch, started from a state's (copies: states are values)."""

    def __init__(self, s: KBestState) -> None:
        self.base = s
        self.continuous = s.target_type == CONTINUOUS
        self.epoch_start = s.epoch_start
        self.scalars = np.array([s.weight, s.sum_y, s.sum_yy])
        self.sx, self.sxx = s.sum_x.copy(), s.sum_xx.copy()
        self.sxy = s.sum_xy.copy()
        self.nk, self.sk = s.class_weight.copy(), s.class_sum.copy()

    @classmethod
    def of(cls, s: KBestState) -> _Sums:
        return cls(s)

    def add(self, X: Any, labels: Vector, w: Vector) -> None:
        """Add rows in order, row i with weight w[i]: every sum one row after the other."""
        wy = w * labels
        tail = np.stack([w, wy, wy * labels], axis=1) if self.continuous else w[:, None]
        k = tail.shape[1]
        self.scalars[:k] = np.add.accumulate(np.vstack([self.scalars[:k], tail]), axis=0)[-1]
        if not self.continuous:
            codes = labels.astype(np.intp)
            np.add.at(self.nk, codes, w)
        if is_sparse(X):
            self._add_sparse(X, labels, w)
            return
        C = w[:, None] * X
        self.sx = _added(self.sx, C)
        self.sxx = _added(self.sxx, C * X)
        if self.continuous:
            self.sxy = _added(self.sxy, C * labels[:, None])
            return
        for code in np.unique(codes):
            self.sk[code] = _added(self.sk[code], C[codes == code])

    def _add_sparse(self, X: Any, labels: Vector, w: Vector) -> None:
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        c = w[rows] * X.data
        # ufunc.at adds unbuffered, in the order given: row after row, per feature.
        np.add.at(self.sx, X.indices, c)
        np.add.at(self.sxx, X.indices, c * X.data)
        if self.continuous:
            np.add.at(self.sxy, X.indices, c * labels[rows])
        else:
            np.add.at(self.sk, (labels.astype(np.intp)[rows], X.indices), c)

    def fold(self, unit: float, t: int) -> None:
        """End of an epoch: every sum into the new unit, which starts at count t."""
        for a in (self.scalars, self.sx, self.sxx, self.sxy, self.nk, self.sk):
            a *= unit
        self.epoch_start = t

    def state(self, t: int) -> KBestState:
        W, sy, syy = (float(v) for v in self.scalars)
        return replace(
            self.base,
            sum_x=self.sx,
            sum_xx=self.sxx,
            sum_xy=self.sxy,
            class_weight=self.nk,
            class_sum=self.sk,
            weight=W,
            sum_y=sy if self.continuous else 0.0,
            sum_yy=syy if self.continuous else 0.0,
            instances_seen=t,
            epoch_start=self.epoch_start,
        )


def _added(total: Vector, rows: Matrix) -> Vector:
    """total + rows[0] + rows[1] + ..., added one row after the other (as single steps)."""
    if rows.shape[0] == 1:
        return np.asarray(total + rows[0], dtype=np.float64)
    return np.asarray(np.add.accumulate(np.vstack([total, rows]), axis=0)[-1], dtype=np.float64)


__all__ = ["KBest", "KBestParams", "KBestState"]
