"""K-OFSD: online feature selection for class-imbalanced data by neighborhood dependency.

docs/algorithms/k_ofsd.md, "Exact rules". Each arriving feature f is judged by
its neighborhood dependency g = gamma_{f}(D) with the K nearest neighbours,
where an instance of the majority class counts only when all its K
neighbours share its class (stats/neighborhood.py, ``KNearest``). f is
discarded unless g > 0.5; a feature that alone depends more than the whole
selected set replaces it; otherwise f joins only if it raises the set's
dependency. With nothing selected, the selection is the round(sqrt(p)) features
of largest single dependency.

References
----------
Peng Zhou, Xuegang Hu, Peipei Li, Xindong Wu. "Online feature selection for
high-dimensional class-imbalanced data." Knowledge-Based Systems 136:187-199,
2017.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from featurestream.selectors.base import Matrix, Vector
from featurestream.selectors.decisions import Decision, Eviction, Reason, SelectedFeature
from featurestream.selectors.params import Interval, Params
from featurestream.selectors.rough_set import RoughSetSelector
from featurestream.stats.neighborhood import (
    MAX_INSTANCES,
    KNearest,
    Rule,
    Subset,
    majority_class,
    sqrt_count,
)

#: The dependency a feature must exceed to be considered (the paper's alpha).
ALPHA = 0.5


@dataclass(frozen=True, kw_only=True)
class KOFSDParams(Params):
    """Parameters of K-OFSD (named as in docs/algorithms/k_ofsd.md)."""

    algorithm: ClassVar[str] = "K-OFSD"
    constraints: ClassVar[dict[str, Any]] = {"k": Interval(int, 1, MAX_INSTANCES, "both")}
    descriptions: ClassVar[dict[str, str]] = {
        "k": "neighbours of each instance (K); all instances but itself when fewer",
    }

    k: int = 5


@dataclass(frozen=True)
class KOFSDState:
    """Everything K-OFSD knows.

    Attributes
    ----------
    y : the two-class target as given (its classes in sorted order are 0 and 1).
    selected, dep, columns : S in arrival order, each member's single
        dependency and raw column (one row each).
    dep_last : the dependency of S when it last changed (0 at the start).
    arrived, singles : while S is empty, every non-constant arrival and its
        single dependency (the selection's fallback); emptied once S is not,
        which it then stays.
    """

    y: Vector
    columns: Matrix
    selected: tuple[str, ...] = ()
    dep: Vector = field(default_factory=lambda: np.zeros(0))
    dep_last: float = 0.0
    arrived: tuple[str, ...] = ()
    singles: Vector = field(default_factory=lambda: np.zeros(0))
    features_seen: int = 0
    features_accepted: int = 0
    features_rejected: int = 0
    features_evicted: int = 0


class KOFSD(RoughSetSelector[KOFSDParams, KOFSDState]):
    """Online feature selection for class-imbalanced data (K nearest neighbours).

    Parameters
    ----------
    params : KOFSDParams
        ``k``: the neighbours of each instance (K).

    Examples
    --------
    Six instances, classes [0, 0, 0, 1, 1, 1] (a tie of counts: class 0 is
    the majority). Column ``a`` separates the classes: with K = 2 every
    instance's two nearest share its class, g = 1 > 0.5, and a is selected.
    ``b`` takes two values, each over instances of both classes; tied neighbours
    come in instance order, so the cards are 0, 0, 0 (the majority's instances
    each see the other class), then 1, 1/2, 1: g = 2.5 / 6 <= 0.5, discarded.

    >>> y = [0.0, 0, 0, 1, 1, 1]
    >>> sel = KOFSD.start(KOFSDParams(k=2), y)
    >>> d = sel.learn_features(["a", "b"], [[1.0, 2, 3, 10, 11, 12], [1.0, 5, 1, 5, 1, 5]])
    >>> [(x.feature, x.accepted, x.reason and x.reason.value, x.score) for x in d]
    [('a', True, None, 1.0), ('b', False, 'irrelevant', 0.4166666666666667)]
    >>> sel.selected()
    ('a',)

    References
    ----------
    Zhou, Hu, Li, Wu. Online feature selection for high-dimensional
    class-imbalanced data. Knowledge-Based Systems 136, 2017.
    """

    name: ClassVar[str] = "k_ofsd"
    # docs/algorithms.md, "Targets": defined for two classes; more are refused.
    accepts_multiclass: ClassVar[bool] = False
    params_type: ClassVar[type[Params]] = KOFSDParams
    state_type: ClassVar[type[Any]] = KOFSDState
    status_fields: ClassVar[tuple[str, ...]] = ("dep_last",)

    def make_rule(self) -> Rule:
        return KNearest(self.params.k, majority_class(self.codes))

    @classmethod
    def test_params(cls) -> list[dict[str, Any]]:
        return [{}, {"k": 2}]

    @classmethod
    def initial_state(cls, params: KOFSDParams, y: Vector) -> KOFSDState:
        return KOFSDState(y=y.copy(), columns=np.zeros((0, y.shape[0])))

    def _learn_batch(
        self, names: list[str], X: Matrix, groups: Sequence[str | None] | None
    ) -> list[Decision]:
        s = self.state
        members = self.members()
        arrived, singles = list(s.arrived), s.singles.tolist()
        dep_last = s.dep_last
        accepted = evicted = 0
        out: list[Decision] = []
        for i, name, z in self.arrivals(names, X, out):
            g, alone = self.single(z)
            if not members:
                arrived.append(name)
                singles.append(g)
            if g <= ALPHA:
                out.append(Decision(name, False, Reason.IRRELEVANT, score=g))
                continue
            if g > dep_last:
                # f alone depends more than S: it replaces every member.
                gone = tuple(Eviction(m[0], Reason.REDUNDANT, by=name) for m in members)
                members = [(name, g, X[i])]
                self.subset = Subset(self.n_instances)
                self.subset.append(z, alone)
                dep_last = g
                accepted += 1
                evicted += len(gone)
                out.append(Decision(name, True, None, score=g, evicted=gone))
                continue
            Q = self.subset.plus(z)
            d = self.gamma(Q)
            if d > dep_last:
                members.append((name, g, X[i]))
                self.subset.append(z, Q)
                dep_last = d
                accepted += 1
                out.append(Decision(name, True, None, score=g))
            else:
                out.append(Decision(name, False, Reason.NOT_SIGNIFICANT, score=g))
        if members:
            arrived, singles = [], []
        self.state = replace(
            s,
            **self.member_fields(members),
            dep_last=dep_last,
            arrived=tuple(arrived),
            singles=np.array(singles, dtype=np.float64),
            **self.counted(len(names), accepted, evicted),
        )
        return out

    def selected_features(self) -> tuple[SelectedFeature, ...]:
        """S; while S is empty, the round(sqrt(p)) largest single dependencies (ties:
        earlier first), p the features arrived."""
        s = self.state
        if s.selected:
            return super().selected_features()
        m = sqrt_count(s.features_seen)
        order = np.argsort(-s.singles, kind="stable")[:m].tolist()
        return tuple(SelectedFeature(s.arrived[k], float(s.singles[k])) for k in order)


__all__ = ["KOFSD", "KOFSDParams", "KOFSDState"]
