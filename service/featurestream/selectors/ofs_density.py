"""OFS-Density: online streaming feature selection with density neighbourhoods.

docs/algorithms/ofs_density.md, "Exact rules". Each arriving feature f is
judged by its neighborhood dependency with the density neighbourhood
(stats/neighborhood.py, ``Density``): f is considered when its own dependency
reaches the mean single dependency of the selection; it joins when it raises
the selection's dependency; when the dependency stays within 5% of it, f joins
and the members whose removal does not lower the dependency leave, unless
the selection then depends less than before, in which case they all come
back; otherwise f is discarded. No parameters.

References
----------
Peng Zhou, Xuegang Hu, Peipei Li, Xindong Wu. "OFS-Density: A novel online
streaming feature selection method." Pattern Recognition 86:48-61, 2019.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from featurestream.selectors.base import Matrix, Vector
from featurestream.selectors.decisions import Decision, Reason
from featurestream.selectors.params import Params
from featurestream.selectors.rough_set import MeanState, Member, ParameterFree, RoughSetSelector
from featurestream.stats.neighborhood import Density, Rule, Subset

#: How close to dep_set (relative) a dependency counts as "about equal" (the paper's lambda).
LAMBDA = 0.05


@dataclass(frozen=True, kw_only=True)
class OFSDensityParams(ParameterFree):
    """OFS-Density has no parameters."""

    algorithm: ClassVar[str] = "OFS-Density"


@dataclass(frozen=True)
class OFSDensityState(MeanState):
    """Everything OFS-Density knows: :class:`~featurestream.selectors.rough_set.MeanState`,
    dep_set being the dependency of S when it last rose or a pass kept it, dep_mean
    the mean single dependency of S then; and ``passes_undone``, the passes whose
    removals were taken back."""

    passes_undone: int = 0


def _not_significant(g_r: float, g_without: float) -> bool:
    """sig(h) = gamma_R - gamma_{R - h} <= 0."""
    return g_r - g_without <= 0.0


def mean_single(members: list[Member]) -> float:
    """The mean single dependency of S, added in arrival order."""
    total = 0.0
    for m in members:
        total += m[1]
    return total / len(members)


class OFSDensity(RoughSetSelector[OFSDensityParams, OFSDensityState]):
    """Online streaming feature selection with the density neighbourhood.

    Parameters
    ----------
    params : OFSDensityParams
        None.

    Examples
    --------
    Eight instances, classes [0, 1, 1, 1, 0, 1, 0, 0] (the example of the
    paper, its Table 1). f1 alone depends 0.39583 >= 0 and raises the
    selection's dependency from 0: accepted, dep_mean = 0.39583. f2 alone
    depends 0.16667 < 0.39583: irrelevant.

    >>> y = [0.0, 1, 1, 1, 0, 1, 0, 0]
    >>> sel = OFSDensity.start(OFSDensityParams(), y)
    >>> f1, f2 = [3.0, 5, 8, 13, 6, 5, 9, 15], [5.6, 6.9, 5.3, 12.3, 15.2, 2.6, 6.8, 8.4]
    >>> d = sel.learn_features(["f1", "f2"], [f1, f2])
    >>> [(x.feature, x.accepted, x.reason and x.reason.value, round(x.score, 5)) for x in d]
    [('f1', True, None, 0.39583), ('f2', False, 'irrelevant', 0.16667)]

    References
    ----------
    Zhou, Hu, Li, Wu. OFS-Density: A novel online streaming feature
    selection method. Pattern Recognition 86, 2019.
    """

    name: ClassVar[str] = "ofs_density"
    params_type: ClassVar[type[Params]] = OFSDensityParams
    state_type: ClassVar[type[Any]] = OFSDensityState
    status_fields: ClassVar[tuple[str, ...]] = ("dep_set", "dep_mean", "passes", "passes_undone")

    def make_rule(self) -> Rule:
        return Density()

    @classmethod
    def initial_state(cls, params: OFSDensityParams, y: Vector) -> OFSDensityState:
        return OFSDensityState(y=y.copy(), columns=np.zeros((0, y.shape[0])))

    def _learn_batch(
        self, names: list[str], X: Matrix, groups: Sequence[str | None] | None
    ) -> list[Decision]:
        s = self.state
        members = self.members()
        dep_set, dep_mean = s.dep_set, s.dep_mean
        passes, undone = s.passes, s.passes_undone
        accepted = evicted = 0
        out: list[Decision] = []
        for i, name, z in self.arrivals(names, X, out):
            g = self.single(z)[0]
            if g < dep_mean:
                out.append(Decision(name, False, Reason.IRRELEVANT, score=g))
                continue
            Q = self.subset.plus(z)
            d = self.gamma(Q)
            about = dep_set > 0.0 and abs(d - dep_set) / dep_set <= LAMBDA
            if not (d > dep_set or about):
                out.append(Decision(name, False, Reason.NOT_SIGNIFICANT, score=g))
                continue
            before = (list(members), list(self.subset.units))
            self.subset.append(z, Q)
            members.append((name, g, X[i]))
            accepted += 1
            if d > dep_set:
                dep_set, dep_mean = d, mean_single(members)
                out.append(Decision(name, True, None, score=g))
                continue
            passes += 1
            gone, left = self.drop_insignificant(members, name, d, _not_significant, i)
            if left >= dep_set:
                dep_set, dep_mean = left, mean_single(members)
                evicted += len(gone)
                out.append(Decision(name, True, None, score=g, evicted=gone))
                continue
            # The pass lowered the dependency: the removed members come back, f stays.
            undone += 1
            members = [*before[0], (name, g, X[i])]
            self.subset = Subset(self.n_instances, [*before[1], z], Q)
            out.append(Decision(name, True, None, score=g))
        self.state = replace(
            s,
            **self.member_fields(members),
            dep_set=dep_set,
            dep_mean=dep_mean,
            passes=passes,
            passes_undone=undone,
            **self.counted(len(names), accepted, evicted),
        )
        return out


__all__ = ["OFSDensity", "OFSDensityParams", "OFSDensityState"]
