"""OFS-A3M: online streaming feature selection with adapted neighbourhoods.

docs/algorithms/ofs_a3m.md, "Exact rules". Each arriving feature f is judged
by its neighborhood dependency with the adapted (gap) neighbourhood
(stats/neighborhood.py, ``Adapted``): f is considered when its own
dependency exceeds the running mean dep_set / |S|; it joins when it raises
the dependency of the selection; when the selection's dependency stays
exactly the same, it joins and every earlier member whose removal changes
nothing (significance 0) leaves; otherwise it is discarded. No parameters.

References
----------
Peng Zhou, Xuegang Hu, Peipei Li, Xindong Wu. "Online streaming feature
selection using adapted Neighborhood Rough Set." Information Sciences
481:258-279, 2019 (first presented at ICBK 2017).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from featurestream.selectors.base import Matrix, Vector
from featurestream.selectors.decisions import Decision, Reason
from featurestream.selectors.params import Params
from featurestream.selectors.rough_set import MeanState, ParameterFree, RoughSetSelector
from featurestream.stats.neighborhood import Adapted, Rule


@dataclass(frozen=True, kw_only=True)
class OFSA3MParams(ParameterFree):
    """OFS-A3M has no parameters."""

    algorithm: ClassVar[str] = "OFS-A3M"


@dataclass(frozen=True)
class OFSA3MState(MeanState):
    """Everything OFS-A3M knows: :class:`~featurestream.selectors.rough_set.MeanState`,
    dep_set being the dependency of S when it last rose and dep_mean = dep_set / |S|."""


def _no_significance(g_r: float, g_without: float) -> bool:
    """sig(h) = (gamma_R - gamma_{R - h}) / gamma_R == 0 (undefined, so False, at gamma_R 0)."""
    return g_r != 0.0 and (g_r - g_without) / g_r == 0.0


class OFSA3M(RoughSetSelector[OFSA3MParams, OFSA3MState]):
    """Online streaming feature selection with the adapted (gap) neighbourhood.

    Parameters
    ----------
    params : OFSA3MParams
        None.

    Examples
    --------
    Eight instances, classes [0, 1, 1, 1, 0, 1, 0, 0] (the example of the
    paper, its Table 1). f1 alone: 0.2625, above the mean 0, and it raises the
    dependency of the selection from 0: accepted. f2 alone: 0.33542 > 0.2625
    and {f1, f2} depends 0.32292 > 0.2625: accepted.

    >>> y = [0.0, 1, 1, 1, 0, 1, 0, 0]
    >>> sel = OFSA3M.start(OFSA3MParams(), y)
    >>> f1, f2 = [3.0, 5, 8, 13, 6, 5, 9, 15], [5.6, 6.9, 5.3, 12.3, 15.2, 2.6, 6.8, 8.4]
    >>> d = sel.learn_features(["f1", "f2"], [f1, f2])
    >>> [(x.feature, x.accepted, round(x.score, 5)) for x in d]
    [('f1', True, 0.2625), ('f2', True, 0.33542)]
    >>> round(sel.state.dep_set, 5), sel.selected()
    (0.32292, ('f1', 'f2'))

    References
    ----------
    Zhou, Hu, Li, Wu. Online streaming feature selection using adapted
    Neighborhood Rough Set. Information Sciences 481, 2019.
    """

    name: ClassVar[str] = "ofs_a3m"
    params_type: ClassVar[type[Params]] = OFSA3MParams
    state_type: ClassVar[type[Any]] = OFSA3MState
    status_fields: ClassVar[tuple[str, ...]] = ("dep_set", "dep_mean", "passes")

    def make_rule(self) -> Rule:
        return Adapted()

    @classmethod
    def initial_state(cls, params: OFSA3MParams, y: Vector) -> OFSA3MState:
        return OFSA3MState(y=y.copy(), columns=np.zeros((0, y.shape[0])))

    def _learn_batch(
        self, names: list[str], X: Matrix, groups: Sequence[str | None] | None
    ) -> list[Decision]:
        s = self.state
        members = self.members()
        dep_set, dep_mean, passes = s.dep_set, s.dep_mean, s.passes
        accepted = evicted = 0
        out: list[Decision] = []
        for i, name, z in self.arrivals(names, X, out):
            g = self.single(z)[0]
            if not g > dep_mean:
                out.append(Decision(name, False, Reason.IRRELEVANT, score=g))
                continue
            Q = self.subset.plus(z)
            d = self.gamma(Q)
            if d < dep_set:
                out.append(Decision(name, False, Reason.NOT_SIGNIFICANT, score=g))
                continue
            self.subset.append(z, Q)
            members.append((name, g, X[i]))
            accepted += 1
            if d > dep_set:
                dep_set = d
                out.append(Decision(name, True, None, score=g))
            else:
                gone = self.drop_insignificant(members, name, d, _no_significance, i)[0]
                passes += 1
                evicted += len(gone)
                out.append(Decision(name, True, None, score=g, evicted=gone))
            dep_mean = dep_set / len(members)
        self.state = replace(
            s,
            **self.member_fields(members),
            dep_set=dep_set,
            dep_mean=dep_mean,
            passes=passes,
            **self.counted(len(names), accepted, evicted),
        )
        return out


__all__ = ["OFSA3M", "OFSA3MParams", "OFSA3MState"]
