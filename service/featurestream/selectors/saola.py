"""SAOLA: Scalable and Accurate OnLine Approach for feature selection.

docs/algorithms/saola.md, "Exact rules". Each arriving feature f is first tested for relevance
to y, then compared with every member g of the selected set S by the pairwise
dependence t = dep(f, g): f is rejected when some g is at least as relevant
and explains f better than f explains y; members that f dominates are evicted.

References
----------
Kui Yu, Xindong Wu, Wei Ding, Jian Pei. "Scalable and Accurate Online Feature
Selection for Big Data." ACM Transactions on Knowledge Discovery from Data
11(2), 2016 (and ICDM 2014).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, cast

import numpy as np
import numpy.typing as npt

from featurestream.selectors.base import FeatureSelector, Matrix, Vector
from featurestream.selectors.decisions import (  # scores
    TEST_SCORES,
    Decision,
    Eviction,
    Reason,
    ScoreKind,
)
from featurestream.selectors.params import Interval, NoneOr, Params, StrOptions
from featurestream.selectors.targets import discrete_target, target_columns
from featurestream.selectors.untestable import (
    UNTESTABLE,
    fisher_z_relevance,
    fisher_z_untestable,
    untestable_warnings,
)
from featurestream.stats.entropy import su_dependence, su_relevance
from featurestream.stats.fisher_z import fisher_z_dependence
from featurestream.stats.sparse import Columns, IntVector, unit_vector


@dataclass(frozen=True, kw_only=True)
class SAOLAParams(Params):
    """Parameters of SAOLA (named as in docs/algorithms.md, "SAOLA").

    ``untestable`` (docs/algorithms.md, "Untestable tests"): with
    ``dependent`` a relevance test that cannot be made keeps the feature. A
    pairwise test that cannot be made has no t to compare, so it never rejects
    nor evicts anything, whatever this says.
    """

    algorithm: ClassVar[str] = "SAOLA"
    constraints: ClassVar[dict[str, Any]] = {
        "test": StrOptions(("fisher_z", "su")),
        "alpha": Interval(float, 0.0, 1.0, "neither"),
        "delta": Interval(float, 0.0, 1.0, "left"),
        "bound": StrOptions(("saola", "max")),
        "max_features": NoneOr(Interval(int, 1, None, "left")),
        "untestable": UNTESTABLE,
    }
    descriptions: ClassVar[dict[str, str]] = {
        "test": "`fisher_z`: Fisher's z test of the correlation (continuous data); `su`: "
        "symmetrical uncertainty (discrete codes)",
        "alpha": "significance level of the Fisher z tests (`fisher_z` only)",
        "delta": "relevance threshold: features with SU <= delta are irrelevant (`su` only)",
        "bound": "`max` (SAOLA-max) compares t with max(dep_f, dep_g) in both tests: fewer "
        "features are found redundant",
        "max_features": "keep at most this many features, the most relevant (evictions have reason "
        "`max_features`)",
        "untestable": "what a test that cannot be made counts as: `independent` (the reference "
        "rule) or `dependent` (nothing is rejected or evicted on such a test)",
    }

    test: str = "fisher_z"
    alpha: float = 0.01
    delta: float = 0.0
    bound: str = "saola"
    max_features: int | None = None
    untestable: str = "independent"


@dataclass(frozen=True)
class SAOLAState:
    """Everything SAOLA knows.

    Attributes
    ----------
    y : the target, as given (n,), or its class codes 0..K-1 (multi-class).
    selected : names of S, in arrival order.
    dep : relevance to y of each member of S.
    s_indptr, s_indices, s_data : the raw columns of S (one per member, in
        order) as sorted non-zeros (``stats/sparse.py``); their standardised
        forms are a cache rebuilt from these.
    features_seen, features_accepted, features_rejected, features_evicted : counters.
    tests_performed : tests made: one relevance test per non-constant arrival,
        plus one per member of S that a relevant arrival was compared with.
    tests_untestable : how many of them could not be made (Fisher z: n <= 3).
    """

    y: Vector
    selected: tuple[str, ...] = ()
    dep: Vector = field(default_factory=lambda: np.zeros(0))
    s_indptr: IntVector = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    s_indices: IntVector = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    s_data: Vector = field(default_factory=lambda: np.zeros(0))
    features_seen: int = 0
    features_accepted: int = 0
    features_rejected: int = 0
    features_evicted: int = 0
    tests_performed: int = 0
    tests_untestable: int = 0
    # K >= 3 for a multi-class target (y holds the class codes), else 0.
    n_classes: int = 0

    def members(self) -> Columns:
        return Columns(int(self.y.shape[0]), self.s_indptr, self.s_indices, self.s_data)


class SAOLA(FeatureSelector[SAOLAParams, SAOLAState]):
    """Online feature selection with pairwise redundancy analysis.

    Parameters
    ----------
    params : SAOLAParams
        ``test`` (fisher_z or su), ``alpha`` (fisher_z level), ``delta`` (su
        relevance threshold), ``bound`` (saola or max), ``max_features``.

    Examples
    --------
    With y = 1..8, column a swaps the last two values (r(a, y) = 41/42), b
    also swaps the first two (r(b, y) = 40/42, r(a, b) = 41/42), and an
    alternating column has r = -4 / sqrt(42 * 8) = -0.22. At alpha = 0.05 and n = 8 a
    correlation is significant when |r| >= tanh(1.96 / sqrt(5)) = 0.704.
    b is redundant: dep_a >= dep_b and t(a, b) = 41/42 > dep_b.

    >>> import numpy as np
    >>> y = np.arange(1.0, 9.0)
    >>> sel = SAOLA.start(SAOLAParams(alpha=0.05), y)
    >>> d = sel.learn_features(
    ...     ["a", "b", "noise"],
    ...     [[1, 2, 3, 4, 5, 6, 8, 7],
    ...      [2, 1, 3, 4, 5, 6, 8, 7],
    ...      [1, -1, 1, -1, 1, -1, 1, -1]])
    >>> [(x.feature, x.accepted, x.reason and x.reason.value, x.by) for x in d]
    [('a', True, None, None), ('b', False, 'redundant', 'a'), ('noise', False, 'irrelevant', None)]
    >>> sel.selected()
    ('a',)

    References
    ----------
    Yu, Wu, Ding, Pei. Scalable and Accurate Online Feature Selection for Big
    Data. ACM TKDD 11(2), 2016.
    """

    name: ClassVar[str] = "saola"
    score: ClassVar[ScoreKind] = TEST_SCORES["fisher_z"]
    score_by = ("test", {t: TEST_SCORES[t] for t in ("fisher_z", "su")})
    params_type: ClassVar[type[Params]] = SAOLAParams
    state_type: ClassVar[type[Any]] = SAOLAState
    status_fields: ClassVar[tuple[str, ...]] = ("tests_performed", "tests_untestable")

    accepts_sparse: ClassVar[bool] = True

    def __init__(self, params: SAOLAParams, state: SAOLAState) -> None:
        super().__init__(params, state)
        # Caches rebuilt from the state alone (docs/algorithms.md, "How a selector is built"):
        # fisher_z keeps S as dense centred unit rows, su as dense integer codes.
        members = state.members()
        # su: the class numbers by first appearance (selectors/targets.py).
        self._y_ref: Vector = (
            discrete_target(state.y, state.n_classes) if params.test == "su" else state.y
        )
        self._y_refs: list[tuple[Vector, float]] = []
        if params.test == "fisher_z":
            # One centred unit row per target column: y itself, or the K class
            # indicators of a multi-class target (docs/algorithms.md, "Targets").
            self._y_refs = [unit_vector(col) for col in target_columns(state.y, state.n_classes)]
            mean, norm, _ = members.moments()
            self._S_rows: Matrix = members.unit_rows(mean, norm)
            self._S_sums: Vector = self._S_rows.sum(axis=1)
        else:
            self._S_rows = members.to_dense()
            self._S_sums = np.zeros(members.b)

    @classmethod
    def requires_discrete(cls, params: Any) -> bool:
        return bool(params.test == "su")

    @classmethod
    def test_params(cls) -> list[dict[str, Any]]:
        return [
            {},
            {"bound": "max", "alpha": 0.05},
            {"max_features": 2, "alpha": 0.2},
            {"test": "su"},
            {"untestable": "dependent", "bound": "max"},
        ]

    @classmethod
    def initial_state(cls, params: SAOLAParams, y: Vector) -> SAOLAState:
        return SAOLAState(y=y.copy())

    # ------------------------------------------------------------------ learning

    def _learn_batch(
        self, names: list[str], X: Any, groups: Sequence[str | None] | None
    ) -> list[Decision]:
        p = self.params
        s = self.state
        n = self.n_instances
        cols = Columns.from_any(X)
        mean, norm, constant = cols.moments()

        # Step 1, vectorised over the batch: relevance of every new column.
        if p.test == "su":
            dense = cols.to_dense()
            dep_new = su_relevance(dense, self._y_ref, constant)
            relevant = ~constant & (dep_new > p.delta)
            untestable = np.zeros(len(names), dtype=bool)
        else:
            # Each target column on its own (same arithmetic whatever its position),
            # so that relabelling the classes changes nothing.
            rs = [
                cols.correlations(ref[None, :], np.array([total]), mean, norm)[0]
                for ref, total in self._y_refs
            ]
            dep_new, relevant, untestable = fisher_z_relevance(
                rs, n, p.alpha, constant, p.untestable
            )
        tests = int((~constant).sum())
        untested = int(untestable.sum())

        # Pairwise dependence of the relevant new columns with S as it stands now,
        # in one vectorised pass; pairs with batch-mates are computed on demand.
        cand = np.flatnonzero(relevant)
        cand_pos = {int(i): k for k, i in enumerate(cand)}
        if p.test == "su":
            t_old = self._su_pairs(dense[cand], self._S_rows)
            u_old = np.zeros(t_old.shape, dtype=bool)
        else:
            cc = cols.take(cand)
            r_old = cc.correlations(self._S_rows, self._S_sums, mean[cand], norm[cand]).T
            t_old = fisher_z_dependence(r_old, n, p.alpha)
            u_old = fisher_z_untestable(r_old, n)

        # Current S as parallel lists; refs are old members (>= 0) or new columns (~i).
        cur_names = list(s.selected)
        cur_dep = list(s.dep.tolist())
        cur_ref = list(range(len(cur_names)))
        new_rows: dict[int, Vector] = {}  # cached reference rows of accepted batch-mates
        evicted_total = 0
        accepted_total = 0

        # A column that is constant or irrelevant is decided by step 1 alone and leaves
        # S as it is: those decisions are made in one pass (most of a batch, as plain
        # Python values), and the loop below visits only the relevant columns, in order.
        deps = dep_new.tolist()
        decisions: list[Decision | None] = [
            None
            if r
            else (
                Decision(nm, False, Reason.CONSTANT, score=None)
                if c
                else Decision(nm, False, Reason.IRRELEVANT, score=d)
            )
            for nm, r, c, d in zip(names, relevant.tolist(), constant.tolist(), deps, strict=True)
        ]
        self.checkpoint(0)
        for i in cand.tolist():
            self.checkpoint(i)
            name = names[i]
            dep_f = deps[i]
            # t for every g in S, in S's order.
            t = np.empty(len(cur_ref))
            u = np.zeros(len(cur_ref), dtype=bool)  # the pairs that could not be tested
            old_mask = np.array([ref >= 0 for ref in cur_ref], dtype=bool)
            if old_mask.any():
                old_at = [ref for ref in cur_ref if ref >= 0]
                t[old_mask] = t_old[cand_pos[i], old_at]
                u[old_mask] = u_old[cand_pos[i], old_at]
            if (~old_mask).any():
                mates = np.array([new_rows[~ref] for ref in cur_ref if ref < 0])
                t[~old_mask], u[~old_mask] = self._pairs_with_mates(
                    cols, i, mean, norm, mates, dense_row=(dense[i] if p.test == "su" else None)
                )
            dep_g = np.array(cur_dep)
            first_rejecting, evict = self._compare(dep_f, dep_g, t)
            # Step 2 compares f with the members in order up to the first that rejects it.
            examined = len(cur_ref) if first_rejecting is None else first_rejecting + 1
            tests += examined
            untested += int(u[:examined].sum())
            by = None if first_rejecting is None else cur_names[first_rejecting]
            evictions = tuple(
                Eviction(cur_names[k], Reason.REDUNDANT, by=name) for k in np.flatnonzero(evict)
            )
            keep = ~evict
            cur_names = [x for x, k in zip(cur_names, keep, strict=True) if k]
            cur_dep = [x for x, k in zip(cur_dep, keep, strict=True) if k]
            cur_ref = [x for x, k in zip(cur_ref, keep, strict=True) if k]
            evicted_total += len(evictions)
            if by is not None:
                decisions[i] = Decision(
                    name, False, Reason.REDUNDANT, by=by, score=dep_f, evicted=evictions
                )
                continue
            cur_names.append(name)
            cur_dep.append(dep_f)
            cur_ref.append(~i)
            if p.test == "su":
                new_rows[i] = dense[i]
            else:
                one = cols.take([i])
                new_rows[i] = one.unit_rows(mean[i : i + 1], norm[i : i + 1])[0]
            accepted = True
            if p.max_features is not None and len(cur_names) > p.max_features:
                # Keep the k highest dep; ties: earlier arrival (earlier position) wins.
                order = sorted(range(len(cur_dep)), key=lambda k: (-cur_dep[k], k))
                drop = set(order[p.max_features :])
                dropped = [cur_names[k] for k in sorted(drop)]
                keep_idx = [k for k in range(len(cur_names)) if k not in drop]
                if name in dropped:
                    accepted = False
                    dropped.remove(name)
                evictions += tuple(Eviction(x, Reason.MAX_FEATURES, by=name) for x in dropped)
                evicted_total += len(dropped)
                cur_names = [cur_names[k] for k in keep_idx]
                cur_dep = [cur_dep[k] for k in keep_idx]
                cur_ref = [cur_ref[k] for k in keep_idx]
            if accepted:
                accepted_total += 1
                decisions[i] = Decision(name, True, None, score=dep_f, evicted=evictions)
            else:
                decisions[i] = Decision(
                    name, False, Reason.MAX_FEATURES, score=dep_f, evicted=evictions
                )

        old_keep = [ref for ref in cur_ref if ref >= 0]
        new_keep = [~ref for ref in cur_ref if ref < 0]
        members = Columns.concat([s.members().take(old_keep), cols.take(new_keep)], n)
        if new_keep:
            added = np.array([new_rows[i] for i in new_keep])
            self._S_rows = np.concatenate([self._S_rows[old_keep], added], axis=0)
        else:
            self._S_rows = np.ascontiguousarray(self._S_rows[old_keep])
        self._S_sums = self._S_rows.sum(axis=1) if p.test == "fisher_z" else np.zeros(len(cur_ref))
        b = len(names)
        self.state = replace(
            s,
            selected=tuple(cur_names),
            dep=np.array(cur_dep, dtype=np.float64),
            s_indptr=members.indptr,
            s_indices=members.indices,
            s_data=members.data,
            **self.counted(b, accepted_total, evicted_total),
            tests_performed=s.tests_performed + tests,
            tests_untestable=s.tests_untestable + untested,
        )
        return cast(list[Decision], decisions)

    def warnings(self) -> list[dict[str, str]]:
        s = self.state
        return untestable_warnings(self.params, s.tests_performed, s.tests_untestable)

    def _su_pairs(self, A: Matrix, B: Matrix) -> Matrix:
        """SU of rows of A against rows of B; NaN where t <= delta (g is skipped)."""
        out = np.empty((A.shape[0], B.shape[0]))
        for i, a in enumerate(A):
            out[i] = su_dependence(a, B, self.params.delta)
        return out

    def _pairs_with_mates(
        self,
        cols: Columns,
        i: int,
        mean: Vector,
        norm: Vector,
        mates: Matrix,
        dense_row: Vector | None,
    ) -> tuple[Vector, npt.NDArray[np.bool_]]:
        """t of new column i against accepted batch-mates (their reference rows).

        Also returns the mask of the pairs whose test could not be made.
        """
        if dense_row is not None:
            t = su_dependence(dense_row, mates, self.params.delta)
            return t, np.zeros(t.shape, dtype=bool)
        one = cols.take([i])
        r = one.correlations(mates, mates.sum(axis=1), mean[i : i + 1], norm[i : i + 1])[:, 0]
        # Step 2: g is skipped when fisher_z(f, g | {}) is independent or untestable.
        n = self.n_instances
        return fisher_z_dependence(r, n, self.params.alpha), fisher_z_untestable(r, n)

    def _compare(
        self, dep_f: float, dep_g: Vector, t: Vector
    ) -> tuple[int | None, np.ndarray[Any, np.dtype[np.bool_]]]:
        """Step 2 over S in order: the position of the first rejecting g, and the evicted mask.

        Each g's outcome depends only on (dep_f, dep_g, t), so the sequential
        scan is a pair of masks: evictions happen for every g before the first
        rejecting one (LOFS removes them as it scans, then stops).
        """
        p = self.params
        testable = ~np.isnan(t)
        tt = np.where(testable, t, -np.inf)
        if p.bound == "max":
            thr_rej = np.maximum(dep_f, dep_g)
            thr_ev = thr_rej
        else:
            thr_rej = np.full(dep_g.shape, dep_f)
            thr_ev = dep_g
        stronger = dep_g > dep_f if p.test == "su" else dep_g >= dep_f
        rej = testable & stronger & (tt > thr_rej)
        ev = testable & ~rej & (dep_f > dep_g) & (tt > thr_ev)
        if rej.any():
            first = int(np.argmax(rej))
            ev[first:] = False
            return first, ev
        return None, ev
