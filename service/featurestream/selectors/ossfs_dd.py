"""OSSFS-DD: online scalable streaming feature selection via dynamic decision.

docs/algorithms/ossfs_dd.md, "Exact rules". Each arriving feature's relevance
gamma(f) is compared with two thresholds that move with the running mean mu
and standard deviation sigma of all relevances so far: a strongly relevant
feature joins the candidates SC (then redundant pairs in SC lose their weaker
member), an irrelevant one is discarded, and one in between waits in the
undetermined pool SU, where pairs that are strong together join SC when the
pool is flushed.

References
----------
Peng Zhou, Shu Zhao, Yuanting Yan, Xindong Wu. "Online Scalable Streaming
Feature Selection via Dynamic Decision." ACM Transactions on Knowledge
Discovery from Data 16(5), Article 87, 2022.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from featurestream.errors import InvalidParameter
from featurestream.selectors.base import FeatureSelector, Matrix, Vector
from featurestream.selectors.decisions import (
    Decision,
    Eviction,
    Reason,
    ScoreKind,
    SelectedFeature,
)
from featurestream.selectors.params import Interval, Params, StrOptions
from featurestream.selectors.targets import discrete_target, indicators
from featurestream.stats.columns import is_constant_rows, row_dots, standardize_rows
from featurestream.stats.entropy import mutual_information
from featurestream.stats.relevance import conditional_mi, first_order_partial, z_scores

SCORES = {"z": ScoreKind("abs_fisher_z"), "mi": ScoreKind("mutual_information")}


@dataclass(frozen=True, kw_only=True)
class OSSFSDDParams(Params):
    """Parameters of OSSFS-DD (named as in docs/algorithms/ossfs_dd.md)."""

    algorithm: ClassVar[str] = "OSSFS-DD"
    constraints: ClassVar[dict[str, Any]] = {
        "k1": Interval(float, -10.0, 10.0, "both"),
        "k2": Interval(float, -10.0, 10.0, "both"),
        "pool_size": Interval(int, 2, 10_000, "both"),
        "measure": StrOptions(("z", "mi")),
        "alpha": Interval(float, 0.0, 1.0, "neither"),
    }
    descriptions: ClassVar[dict[str, str]] = {
        "k1": "discard threshold mu + k1 sigma of the relevances seen so far",
        "k2": "candidate threshold mu + k2 sigma (greater than k1)",
        "pool_size": "undetermined features kept before the pool is flushed",
        "measure": "`z`: the absolute Fisher z statistic of the correlation (continuous "
        "data); `mi`: mutual information (discrete codes)",
        "alpha": "significance level of the conditional tests",
    }

    k1: float = 1.0
    k2: float = 2.0
    pool_size: int = 100
    measure: str = "z"
    alpha: float = 0.05

    def _check(self) -> None:
        if not self.k1 < self.k2:
            raise InvalidParameter(
                f"The 'k2' parameter of OSSFS-DD must be greater than k1 ({self.k1!r}). "
                f"Got {self.k2!r} instead.",
                parameter="k2",
            )


@dataclass(frozen=True)
class OSSFSDDState:
    """Everything OSSFS-DD knows.

    Attributes
    ----------
    y : the target as given (n,), or its class codes 0..K-1 (multi-class).
    selected, dep, columns : the candidates SC in the order they joined, their
        relevances and their raw columns (one row each).
    pool, pool_dep, pool_columns : the undetermined pool SU, in arrival order.
    relevances, mean, m2 : Welford's count, mean and sum of squared deviations
        of the relevances of every non-constant arrival.
    flushes : how many times the pool was full and flushed.
    tests_performed, tests_untestable : conditional tests made, and those
        that could not be made (counted as independent).
    """

    y: Vector
    columns: Matrix
    pool_columns: Matrix
    selected: tuple[str, ...] = ()
    dep: Vector = field(default_factory=lambda: np.zeros(0))
    pool: tuple[str, ...] = ()
    pool_dep: Vector = field(default_factory=lambda: np.zeros(0))
    relevances: int = 0
    mean: float = 0.0
    m2: float = 0.0
    flushes: int = 0
    features_seen: int = 0
    features_accepted: int = 0
    features_rejected: int = 0
    features_evicted: int = 0
    tests_performed: int = 0
    tests_untestable: int = 0
    n_classes: int = 0


@dataclass(slots=True)
class _Member:
    """A feature of SC or SU with what its tests need."""

    name: str
    gamma: float
    raw: Vector
    unit: np.ndarray[Any, Any]  # z: the centred unit column (float); mi: the integer codes
    r_y: Vector  # z: correlation with each target column; mi: unused
    levels: int  # mi: largest code + 1


class _Tests:
    """gamma(a | b) and the test of a against y given b, for one measure.

    The target is coded by the selector itself: a two-valued or class target
    is renumbered by first appearance (selectors/targets.py,
    ``discrete_target``), so no result depends on the labels' values.
    """

    def __init__(self, params: OSSFSDDParams, y: Vector, n_classes: int) -> None:
        self.params = params
        self.n = int(y.shape[0])
        two = n_classes or (2 if np.unique(y).shape[0] == 2 else 0)
        codes = discrete_target(y, two)
        if params.measure == "mi":
            self.y_codes = codes.astype(np.int64)
            self.y_levels = int(self.y_codes.max()) + 1 if self.n else 1
            self.targets = np.zeros((0, self.n))
        else:
            cols = indicators(codes, n_classes) if n_classes else codes[None, :]
            self.targets = standardize_rows(cols)[0]

    def member(self, name: str, x: Vector) -> _Member:
        return self.members([name], x[None, :])[0]

    def members(self, names: list[str], X: Matrix) -> list[_Member]:
        """The members of the rows of X (none constant), one row at a time or all at once alike.

        Every quantity is a row-wise reduction (stats/columns.py), so a row gives
        the same bits in a batch as alone.
        """
        if self.params.measure == "mi":
            out = []
            for name, x in zip(names, X, strict=True):
                c = x.astype(np.int64)
                gamma = _zero_nan(mutual_information(c, self.y_codes))
                out.append(_Member(name, gamma, x, c, np.zeros(0), int(c.max()) + 1))
            return out
        U = standardize_rows(X)[0]
        R = np.clip(np.array([row_dots(U, t) for t in self.targets]).T, -1.0, 1.0)
        gammas = z_scores([R[:, k] for k in range(R.shape[1])], self.n, 0, 1.0)[0].tolist()
        return [
            _Member(name, _zero_nan(g), x, u, r, 0)
            for name, g, x, u, r in zip(names, gammas, X, U, R, strict=True)
        ]

    def given(
        self, a: list[_Member], b: _Member, stacked: tuple[Matrix, Matrix] | None = None
    ) -> tuple[Vector, np.ndarray[Any, Any]]:
        """gamma(a_i | b) and whether a_i is independent of y given b, for every a_i.

        ``stacked``: the unit rows and target correlations of a, already stacked (z).
        """
        p = self.params
        if not a:
            return np.zeros(0), np.zeros(0, dtype=bool)
        if p.measure == "mi":
            out = [
                conditional_mi(
                    h.unit, self.y_codes, b.unit, (h.levels, self.y_levels, b.levels), p.alpha
                )
                for h in a
            ]
            return np.array([g for g, _ in out]), np.array([i for _, i in out], dtype=bool)
        U, R = stacked if stacked is not None else _stack(a)
        r_ab = np.clip(row_dots(U, b.unit), -1.0, 1.0)
        rs = [first_order_partial(R[:, k], r_ab, b.r_y[k]) for k in range(R.shape[1])]
        return z_scores(rs, self.n, 1, p.alpha)

    def of_given(
        self, a: _Member, bs: list[_Member], stacked: tuple[Matrix, Matrix] | None = None
    ) -> Vector:
        """gamma(a | b_j) for every b_j (``stacked`` as in :meth:`given`)."""
        if self.params.measure == "mi":
            return np.array([self.given([a], b)[0][0] for b in bs])
        if not bs:
            return np.zeros(0)
        U, R = stacked if stacked is not None else _stack(bs)
        r_ab = np.clip(row_dots(U, a.unit), -1.0, 1.0)
        rs = [first_order_partial(a.r_y[k], r_ab, R[:, k]) for k in range(R.shape[1])]
        return z_scores(rs, self.n, 1, self.params.alpha)[0]


def _stack(members: list[_Member]) -> tuple[Matrix, Matrix]:
    return np.array([m.unit for m in members]), np.array([m.r_y for m in members])


def _zero_nan(v: float) -> float:
    return 0.0 if math.isnan(v) else float(v)


class OSSFSDD(FeatureSelector[OSSFSDDParams, OSSFSDDState]):
    """Streaming feature selection with dynamic thresholds and an undetermined pool.

    Parameters
    ----------
    params : OSSFSDDParams
        ``k1``, ``k2`` (thresholds mu + k sigma), ``pool_size`` (N),
        ``measure`` (z or mi), ``alpha`` (conditional tests).

    Examples
    --------
    The first two features are accepted whatever they are; from then on the
    thresholds follow the relevances. Here a and b are weak (gamma 0.77 and
    0) and c copies the target (gamma = sqrt(n - 3) atanh(r) with r just
    below 1: 48.6). With the three, mu = 16.46 and sigma = 27.84, so c lies
    between mu + sigma = 44.3 and mu + 2 sigma = 72.1: it waits in the pool.

    >>> import numpy as np
    >>> y = np.array([0.0, 1, 0, 1, 1, 0, 1, 0, 1, 1])
    >>> sel = OSSFSDD.start(OSSFSDDParams(), y)
    >>> d = sel.learn_features(
    ...     ["a", "b", "c"],
    ...     [[1.0, 2, 3, 4, 5, 6, 7, 8, 9, 10], [1.0, 0, 0, 0, 1, 0, 1, 1, 0, 1], y])
    >>> [(x.feature, x.accepted, x.reason and x.reason.value, round(x.score, 2)) for x in d]
    [('a', True, None, 0.77), ('b', True, None, 0.0), ('c', False, 'undetermined', 48.6)]
    >>> sel.selected()
    ('a', 'b')

    References
    ----------
    Zhou, Zhao, Yan, Wu. Online Scalable Streaming Feature Selection via
    Dynamic Decision. ACM TKDD 16(5), 2022.
    """

    name: ClassVar[str] = "ossfs_dd"
    score: ClassVar[ScoreKind] = SCORES["z"]
    score_by = ("measure", SCORES)
    params_type: ClassVar[type[Params]] = OSSFSDDParams
    state_type: ClassVar[type[Any]] = OSSFSDDState
    status_fields: ClassVar[tuple[str, ...]] = (
        "flushes",
        "tests_performed",
        "tests_untestable",
    )

    def __init__(self, params: OSSFSDDParams, state: OSSFSDDState) -> None:
        super().__init__(params, state)
        self._tests = _Tests(params, state.y, state.n_classes)
        t = self._tests
        self._sc = [
            replace(m, gamma=float(g))
            for m, g in zip(t.members(list(state.selected), state.columns), state.dep, strict=True)
        ]
        self._su = [
            replace(m, gamma=float(g))
            for m, g in zip(
                t.members(list(state.pool), state.pool_columns), state.pool_dep, strict=True
            )
        ]
        self._selection: tuple[OSSFSDDState, tuple[SelectedFeature, ...]] | None = None
        self._counts = [0, 0]  # tests made, tests untestable, in the batch being learned

    @classmethod
    def requires_discrete(cls, params: Any) -> bool:
        return bool(params.measure == "mi")

    @classmethod
    def test_params(cls) -> list[dict[str, Any]]:
        return [{}, {"measure": "mi"}, {"k1": 0.0, "k2": 0.5, "pool_size": 3}]

    @classmethod
    def initial_state(cls, params: OSSFSDDParams, y: Vector) -> OSSFSDDState:
        empty = np.zeros((0, y.shape[0]))
        return OSSFSDDState(y=y.copy(), columns=empty, pool_columns=empty.copy())

    # ------------------------------------------------------------------ learning

    def _learn_batch(
        self, names: list[str], X: Matrix, groups: Sequence[str | None] | None
    ) -> list[Decision]:
        s = self.state
        constant = is_constant_rows(X).tolist()
        count, mean, m2 = s.relevances, s.mean, s.m2
        sc, su = list(self._sc), list(self._su)
        flushes = s.flushes
        self._counts = [0, 0]  # tests made, tests untestable
        live = [i for i, c in enumerate(constant) if not c]
        X = np.asarray(X, dtype=np.float64)
        arrived = dict(
            zip(live, self._tests.members([names[i] for i in live], X[live]), strict=True)
        )
        accepted = evicted = 0
        out: list[Decision] = []
        for i, name in enumerate(names):
            self.checkpoint(i)
            if constant[i]:
                out.append(Decision(name, False, Reason.CONSTANT, score=None))
                continue
            f = arrived[i]
            # Welford's update of mu and sigma with gamma(f).
            count += 1
            delta = f.gamma - mean
            mean += delta / count
            m2 += delta * (f.gamma - mean)
            if count <= 2:
                sc.append(f)
                accepted += 1
                out.append(Decision(name, True, None, score=f.gamma))
                continue
            sigma = math.sqrt(max(m2, 0.0) / (count - 1))
            low = mean + self.params.k1 * sigma
            high = mean + self.params.k2 * sigma
            if f.gamma <= low:
                out.append(Decision(name, False, Reason.IRRELEVANT, score=f.gamma))
            elif f.gamma >= high:
                d = self._candidate(f, sc, high)
                accepted += d.accepted
                evicted += len(d.evicted)
                out.append(d)
            else:
                su.append(f)
                out.append(Decision(name, False, Reason.UNDETERMINED, score=f.gamma))
                if len(su) >= self.params.pool_size:
                    sc += self._flush(su, sc, high, i)
                    su = []
                    flushes += 1
        self._sc, self._su = sc, su
        self.state = replace(
            s,
            selected=tuple(m.name for m in sc),
            dep=np.array([m.gamma for m in sc], dtype=np.float64),
            columns=_rows([m.raw for m in sc], self.n_instances),
            pool=tuple(m.name for m in su),
            pool_dep=np.array([m.gamma for m in su], dtype=np.float64),
            pool_columns=_rows([m.raw for m in su], self.n_instances),
            relevances=count,
            mean=mean,
            m2=m2,
            flushes=flushes,
            **self.counted(len(names), accepted, evicted),
            tests_performed=s.tests_performed + self._counts[0],
            tests_untestable=s.tests_untestable + self._counts[1],
        )
        return out

    def _candidate(self, f: _Member, sc: list[_Member], beta: float) -> Decision:
        """f joins SC; the redundancy check against the earlier members, in order (mutates sc)."""
        gamma_h, independent = self._tests.given(sc, f)
        untestable = np.isnan(gamma_h)
        redundant = ~independent & (np.array([h.gamma for h in sc]) + gamma_h < 2.0 * beta)
        evict: list[int] = []
        by: str | None = None
        examined = len(sc)
        for k in np.flatnonzero(redundant).tolist():
            if f.gamma < sc[k].gamma:
                by, examined = sc[k].name, k + 1
                break
            evict.append(k)
        self._counts[0] += examined
        self._counts[1] += int(untestable[:examined].sum())
        evictions = tuple(Eviction(sc[k].name, Reason.REDUNDANT, by=f.name) for k in evict)
        for k in reversed(evict):
            del sc[k]
        if by is not None:
            return Decision(
                f.name, False, Reason.REDUNDANT, by=by, score=f.gamma, evicted=evictions
            )
        sc.append(f)
        return Decision(f.name, True, None, score=f.gamma, evicted=evictions)

    def _flush(self, su: list[_Member], sc: list[_Member], beta: float, at: int) -> list[_Member]:
        """The members of SU that join SC: each i with the first later j that completes it."""
        present = {m.name for m in sc}
        joined: list[_Member] = []
        U, R = _stack(su) if self.params.measure == "z" else (np.zeros(0), np.zeros(0))
        for a, i in enumerate(su):
            self.checkpoint(at)
            later = su[a + 1 :]
            stacked = (U[a + 1 :], R[a + 1 :]) if self.params.measure == "z" else None
            # j is not independent of y given i, and gamma(i) + gamma(i | j) > 2 beta.
            gamma_j, independent = self._tests.given(later, i, stacked)
            value = self._tests.of_given(i, later, stacked)
            self._counts[0] += len(later)
            self._counts[1] += int(np.isnan(gamma_j).sum())
            with np.errstate(invalid="ignore"):
                ok = ~independent & (i.gamma + value > 2.0 * beta)
            hits = np.flatnonzero(ok)
            if hits.shape[0]:
                for m in (i, later[int(hits[0])]):
                    if m.name not in present:
                        present.add(m.name)
                        joined.append(m)
        return joined

    # ----------------------------------------------------------------- selection

    def selected_features(self) -> tuple[SelectedFeature, ...]:
        """SC, then what a flush of the current pool would add (the batch result)."""
        if self._selection is not None and self._selection[0] is self.state:
            return self._selection[1]
        sc = list(self._sc)
        counts, self._counts = self._counts, [0, 0]
        if self._su and self.state.relevances > 2:
            s = self.state
            sigma = math.sqrt(max(s.m2, 0.0) / (s.relevances - 1))
            sc += self._flush(self._su, sc, s.mean + self.params.k2 * sigma, 0)
        self._counts = counts  # a look ahead counts no tests
        out = tuple(SelectedFeature(m.name, m.gamma) for m in sc)
        self._selection = (self.state, out)
        return out


def _rows(rows: list[Vector], n: int) -> Matrix:
    return np.array(rows, dtype=np.float64) if rows else np.zeros((0, n))


__all__ = ["OSSFSDD", "OSSFSDDParams", "OSSFSDDState"]
