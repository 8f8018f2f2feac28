"""group-SAOLA: online feature selection over a stream of feature groups.

docs/algorithms/group_saola.md, "What it does". Features arrive a whole group at a time. Each
group is first reduced on its own (intra-group SAOLA with an empty selected set
and the bound min(dep_f, dep_g)); its survivors G' are then compared with the
features of every earlier selected group, where a feature of G' is removed
when a strictly more relevant earlier feature explains it, and an earlier
feature is removed when a feature of G' is at least as relevant and explains
it. Groups left empty are rejected (new) or dropped (earlier). Those pairwise
comparisons are ``group_saola_pairs.py``.

References
----------
Kui Yu, Xindong Wu, Wei Ding, Jian Pei. "Scalable and Accurate Online Feature
Selection for Big Data." ACM Transactions on Knowledge Discovery from Data
11(2), 2016, section "Online group feature selection" (group-SAOLA).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from featurestream.errors import InvalidInput
from featurestream.selectors.base import JSON, FeatureSelector, Matrix, Vector, with_warnings
from featurestream.selectors.decisions import (  # scores
    TEST_SCORES,
    Decision,
    Eviction,
    Reason,
    ScoreKind,
    SelectedFeature,
)
from featurestream.selectors.group_saola_pairs import Batch, Pairs, inter_group, intra_group
from featurestream.selectors.params import Constraint, Params
from featurestream.selectors.saola import SAOLAParams
from featurestream.selectors.targets import discrete_target, target_columns
from featurestream.selectors.untestable import (
    fisher_z_relevance,
    untestable_warnings,
)
from featurestream.stats.columns import (
    correlations,
    is_constant_rows,
    row_origins,
    standardize_rows,
)
from featurestream.stats.entropy import su_relevance


@dataclass(frozen=True, kw_only=True)
class GroupSAOLAParams(Params):
    """Parameters of group-SAOLA: SAOLA's ``test``, ``alpha``, ``delta`` and ``untestable``."""

    algorithm: ClassVar[str] = "group-SAOLA"
    constraints: ClassVar[dict[str, Constraint]] = {
        key: SAOLAParams.constraints[key] for key in ("test", "alpha", "delta", "untestable")
    }
    descriptions: ClassVar[dict[str, str]] = {
        "test": "`fisher_z`: Fisher's z test of the correlation (continuous data); `su`: "
        "symmetrical uncertainty (discrete codes)",
        "alpha": "significance level of the Fisher z tests (`fisher_z` only)",
        "delta": "relevance threshold: features with SU <= delta are irrelevant (`su` only)",
        "untestable": "what a test that cannot be made counts as: `independent` (the reference "
        "rule) or `dependent` (nothing is rejected or evicted on such a test)",
    }

    test: str = "fisher_z"
    alpha: float = 0.01
    delta: float = 0.0
    untestable: str = "independent"


@dataclass(frozen=True)
class GroupSAOLAState:
    """Everything group-SAOLA knows.

    Attributes
    ----------
    y : the target, as given (n,), or its class codes 0..K-1 (multi-class).
    selected : names of the selected features, in selection order (the
        concatenation of the selected groups, each in its own order).
    groups : the group name of each selected feature (parallel to ``selected``);
        the selected groups are its runs of equal names.
    dep : relevance to y of each selected feature.
    columns : one row per selected feature: the standardised column
        (fisher_z) or its integer codes (su).
    seen_groups : names of every group received, in arrival order (a group
        arrives whole, so a name may not come back).
    features_seen, features_accepted, features_rejected, features_evicted :
        feature counters; evictions count earlier groups' features removed.
    groups_rejected : groups that arrived and were not selected (G' empty).
    groups_dropped : selected groups later emptied by evictions.
    tests_performed, tests_untestable : tests made (relevance, then each pair
        compared within the group and with the selected features) and how
        many of them could not be made, as SAOLA counts them.
    means, scales : fisher_z: per selected feature, the mean and scale its column
        was standardised with (column = row * scale + mean), which restore the
        column as sent for ``GET /evaluation``; scale 0 for a feature of a state
        stored before they were kept. Empty for su. They take no part in the tests.
    """

    y: Vector
    selected: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    dep: Vector = field(default_factory=lambda: np.zeros(0))
    columns: Matrix = field(default_factory=lambda: np.zeros((0, 0)))
    seen_groups: tuple[str, ...] = ()
    features_seen: int = 0
    features_accepted: int = 0
    features_rejected: int = 0
    features_evicted: int = 0
    groups_rejected: int = 0
    groups_dropped: int = 0
    tests_performed: int = 0
    tests_untestable: int = 0
    # K >= 3 for a multi-class target (y holds the class codes), else 0.
    n_classes: int = 0
    means: Vector = field(default_factory=lambda: np.zeros(0))
    scales: Vector = field(default_factory=lambda: np.zeros(0))


class GroupSAOLA(FeatureSelector[GroupSAOLAParams, GroupSAOLAState]):
    """Online group feature selection with intra- and inter-group redundancy analysis.

    Parameters
    ----------
    params : GroupSAOLAParams
        ``test`` (fisher_z or su), ``alpha`` (fisher_z level), ``delta`` (su
        relevance threshold).

    Examples
    --------
    y = 1..8 and columns that are permutations of it, so each correlation is
    Spearman's 1 - 6 sum(d^2) / (8 * 63) = 1 - sum(d^2) / 84 (d: differences of
    ranks). At alpha = 0.05 a pair is dependent when |r| >= 0.704. Group g1:
    h (first two values swapped, dep 1 - 4/84 = 0.952) and an alternating
    column (|r| = 4 / sqrt(8 * 42) = 0.218, irrelevant):

    >>> import numpy as np
    >>> y = np.arange(1.0, 9.0)
    >>> sel = GroupSAOLA.start(GroupSAOLAParams(alpha=0.05), y)
    >>> d = sel.learn_features(
    ...     ["h", "noise"],
    ...     [[2, 1, 3, 4, 5, 6, 8, 7], [1, -1, 1, -1, 1, -1, 1, -1]],
    ...     groups=["g1", "g1"])
    >>> [(x.feature, x.accepted, x.reason and x.reason.value) for x in d]
    [('h', True, None), ('noise', False, 'irrelevant')]

    Group g2: f (last two swapped, dep 0.976) and f2 (dep 1 - 6/84 = 0.929).
    Inside g2, t(f2, f) = 0.976 > min(0.929, 0.976) with f at least as
    relevant, so f2 goes. Then f meets h: dep_f >= dep_h and
    t(f, h) = 0.976 > min(0.976, 0.952), so h is evicted and g1, now empty,
    is dropped:

    >>> d = sel.learn_features(
    ...     ["f", "f2"],
    ...     [[1, 2, 3, 4, 5, 6, 8, 7], [1, 2, 3, 4, 5, 7, 8, 6]],
    ...     groups=["g2", "g2"])
    >>> [(x.feature, x.accepted, x.by, [e.feature for e in x.evicted]) for x in d]
    [('f', True, None, ['h']), ('f2', False, 'f', [])]
    >>> sel.selected_groups()
    (('g2', ('f',)),)
    >>> sel.status()["groups_dropped"]
    1

    References
    ----------
    Yu, Wu, Ding, Pei. Scalable and Accurate Online Feature Selection for Big
    Data. ACM TKDD 11(2), 2016 (group-SAOLA).
    """

    name: ClassVar[str] = "group_saola"
    score: ClassVar[ScoreKind] = TEST_SCORES["fisher_z"]
    score_by = ("test", {t: TEST_SCORES[t] for t in ("fisher_z", "su")})
    params_type: ClassVar[type[Params]] = GroupSAOLAParams
    state_type: ClassVar[type[Any]] = GroupSAOLAState
    uses_groups: ClassVar[bool] = True

    def __init__(self, params: GroupSAOLAParams, state: GroupSAOLAState) -> None:
        super().__init__(params, state)
        # Caches rebuilt from the state alone (docs/algorithms.md, "How a selector is built").
        # su: the class numbers by first appearance (selectors/targets.py).
        self._y_ref: Vector = (
            discrete_target(state.y, state.n_classes) if params.test == "su" else state.y
        )
        # fisher_z: one standardised row per target column (y, or the K class
        # indicators of a multi-class target; docs/algorithms.md, "Targets").
        self._y_refs: list[Vector] = []
        if params.test == "fisher_z":
            self._y_refs = [
                standardize_rows(col)[0][0] for col in target_columns(state.y, state.n_classes)
            ]
        self._seen_for: tuple[str, ...] | None = None
        self._seen: frozenset[str] = frozenset()

    @classmethod
    def requires_discrete(cls, params: Any) -> bool:
        return bool(params.test == "su")

    @classmethod
    def test_params(cls) -> list[dict[str, Any]]:
        return [{}, {"alpha": 0.05}, {"test": "su"}, {"untestable": "dependent"}]

    @classmethod
    def initial_state(cls, params: GroupSAOLAParams, y: Vector) -> GroupSAOLAState:
        n = y.shape[0]
        return GroupSAOLAState(y=y.copy(), dep=np.zeros(0), columns=np.zeros((0, n)))

    # ------------------------------------------------------------------ queries

    def selected_features(self) -> tuple[SelectedFeature, ...]:
        s = self.state
        return tuple(
            SelectedFeature(name, float(d), group=g)
            for name, d, g in zip(s.selected, s.dep, s.groups, strict=True)
        )

    def selected_groups(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The selected groups in selection order, each with its surviving features."""
        out: list[tuple[str, list[str]]] = []
        for name, g in zip(self.state.selected, self.state.groups, strict=True):
            if not out or out[-1][0] != g:
                out.append((g, []))
            out[-1][1].append(name)
        return tuple((g, tuple(members)) for g, members in out)

    def status(self) -> dict[str, JSON]:
        s = self.state
        groups = self.selected_groups()
        out: dict[str, JSON] = {
            **self.counters(),
            "groups_seen": len(s.seen_groups),
            "groups_selected": len(groups),
            "groups_rejected": s.groups_rejected,
            "groups_dropped": s.groups_dropped,
            "selected_groups": [{"name": g, "features": list(f)} for g, f in groups],
            "tests_performed": s.tests_performed,
            "tests_untestable": s.tests_untestable,
        }
        return with_warnings(out, self.warnings())

    def warnings(self) -> list[dict[str, str]]:
        s = self.state
        return untestable_warnings(self.params, s.tests_performed, s.tests_untestable)

    # ------------------------------------------------------------------ validation

    def _seen_groups(self) -> frozenset[str]:
        if self._seen_for is not self.state.seen_groups:
            self._seen = frozenset(self.state.seen_groups)
            self._seen_for = self.state.seen_groups
        return self._seen

    def check_groups(self, names: Sequence[str], groups: Sequence[str | None] | None) -> None:
        """Every feature names its group; groups are contiguous and arrive whole, once."""
        if not names:
            return
        if groups is None:
            raise InvalidInput("group-SAOLA needs a group name for every feature.", field="groups")
        seen = self._seen_groups()
        closed: set[str] = set()
        prev: str | None = None
        for name, g in zip(names, groups, strict=True):
            if not isinstance(g, str):
                raise InvalidInput(
                    f"Feature {name!r} has no group; group-SAOLA needs a group name "
                    "for every feature.",
                    field="groups",
                )
            if g == prev:
                continue
            if g in closed:
                raise InvalidInput(
                    f"The features of group {g!r} must be contiguous in the request.",
                    field="groups",
                )
            if g in seen:
                raise InvalidInput(
                    f"Group {g!r} was already received; a group must arrive whole, in one request.",
                    field="groups",
                )
            if prev is not None:
                closed.add(prev)
            prev = g

    # ------------------------------------------------------------------ learning

    def _learn_batch(
        self, names: list[str], X: Matrix, groups: Sequence[str | None] | None
    ) -> list[Decision]:
        assert groups is not None  # check_groups guarantees it
        group_of = [str(g) for g in groups]
        p = self.params
        s = self.state
        n = self.n_instances
        constant = is_constant_rows(X)

        # Relevance of every new column, vectorised over the batch
        # (docs/algorithms/group_saola.md, step 1 = SAOLA step 1). Each value
        # depends only on its own column, so it is the same however the groups
        # are batched.
        means, scales = np.zeros(0), np.zeros(0)
        if p.test == "su":
            rows = X
            dep_new = su_relevance(X, self._y_ref, constant)
            relevant = ~constant & (dep_new > p.delta)
            untestable = np.zeros(len(names), dtype=bool)
        else:
            rows, _ = standardize_rows(X)
            means, scales = row_origins(X)
            rs = [correlations(rows, ref) for ref in self._y_refs]
            # A NaN r or n - 3 <= 0 is "not testable", which counts as independent,
            # or as dependent with untestable: "dependent" (docs/algorithms.md).
            dep_new, relevant, untestable = fisher_z_relevance(
                rs, n, p.alpha, constant, p.untestable
            )

        pairs = Pairs(p.test == "su", p.alpha, p.delta, n)
        work = Batch(
            names=list(s.selected),
            groups=list(s.groups),
            dep=list(s.dep.tolist()),
            ref=list(range(len(s.selected))),
            tests=int((~constant).sum()),
            untestable=int(untestable.sum()),
        )
        decisions: list[Decision] = []
        start = 0
        while start < len(names):
            self.checkpoint(start)
            # Groups are contiguous (check_groups), so a run of equal names is one group.
            stop = start + 1
            while stop < len(names) and group_of[stop] == group_of[start]:
                stop += 1
            batch_idx = list(range(start, stop))
            for i in batch_idx:
                if constant[i]:
                    # Zero variance is rejected before any test
                    # (docs/algorithms.md, "Constant columns").
                    work.decided[i] = Decision(names[i], False, Reason.CONSTANT)
                elif not relevant[i]:
                    work.decided[i] = Decision(
                        names[i], False, Reason.IRRELEVANT, score=float(dep_new[i])
                    )
            cand = [i for i in batch_idx if relevant[i]]
            self._learn_group(group_of[start], cand, names, rows, dep_new, work, pairs)
            decisions += [replace(work.decided[i], group=group_of[start]) for i in batch_idx]
            start = stop

        old_rows = [ref for ref in work.ref if ref >= 0]
        new_rows = [~ref for ref in work.ref if ref < 0]
        columns = np.concatenate([s.columns[old_rows], rows[new_rows]], axis=0)
        if p.test != "su":
            # A state stored before the scales were kept: its features get scale 0.
            kept = len(s.scales) == len(s.selected)
            old_means = s.means if kept else np.zeros(len(s.selected))
            old_scales = s.scales if kept else np.zeros(len(s.selected))
            means = np.concatenate([old_means[old_rows], means[new_rows]])
            scales = np.concatenate([old_scales[old_rows], scales[new_rows]])
        b = len(names)
        self.state = replace(
            s,
            selected=tuple(work.names),
            groups=tuple(work.groups),
            dep=np.array(work.dep, dtype=np.float64),
            columns=np.ascontiguousarray(columns),
            seen_groups=s.seen_groups + tuple(dict.fromkeys(group_of)),
            **self.counted(b, work.accepted, work.evicted),
            groups_rejected=s.groups_rejected + work.groups_rejected,
            groups_dropped=s.groups_dropped + work.groups_dropped,
            tests_performed=s.tests_performed + work.tests,
            tests_untestable=s.tests_untestable + work.untestable,
            means=np.ascontiguousarray(means, dtype=np.float64),
            scales=np.ascontiguousarray(scales, dtype=np.float64),
        )
        return decisions

    def _learn_group(
        self,
        group: str,
        cand: list[int],
        names: list[str],
        rows: Matrix,
        dep_new: Vector,
        work: Batch,
        pairs: Pairs,
    ) -> None:
        """Steps 1-4 for one group, given its relevant features (batch rows, in order)."""
        # Step 1: intra-group SAOLA, S starting empty.
        removed_by = intra_group(pairs, cand, names, rows, dep_new, work)
        kept = [i for i in cand if i not in removed_by]

        # Step 3: inter-group, against the features of earlier selected groups.
        evictions: dict[int, list[Eviction]] = {i: [] for i in kept}
        if kept and work.ref:
            alive, inter_removed = inter_group(
                pairs, self.state.columns, kept, names, rows, dep_new, work, evictions
            )
            removed_by.update(inter_removed)
            work.keep(alive)

        # Steps 2 and 4: an empty G' rejects the group; otherwise it is appended.
        survivors = [i for i in kept if i not in removed_by]
        if not survivors:
            work.groups_rejected += 1
        for i in survivors:
            work.names.append(names[i])
            work.groups.append(group)
            work.dep.append(float(dep_new[i]))
            work.ref.append(~i)
        for i in cand:
            ev = tuple(evictions.get(i, ()))
            score = float(dep_new[i])
            if i in removed_by:
                work.decided[i] = Decision(
                    names[i], False, Reason.REDUNDANT, by=removed_by[i], score=score, evicted=ev
                )
            else:
                work.decided[i] = Decision(names[i], True, score=score, evicted=ev)
        work.accepted += len(survivors)


__all__ = ["GroupSAOLA", "GroupSAOLAParams", "GroupSAOLAState"]
