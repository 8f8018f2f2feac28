"""group-SAOLA's redundancy analysis: the pairwise comparisons of steps 1 and 3.

docs/algorithms/group_saola.md, "What it does". Within a group (step 1,
:func:`intra_group`) and against the features of earlier selected groups
(step 3, :func:`inter_group`), a feature is removed when a feature at least as
relevant explains it (t = dep(f, g) above the bound); :class:`Pairs` computes
those dependences (Fisher's z or symmetrical uncertainty), and :class:`Batch`
is the working copy of the selection they change while one request is applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from featurestream.selectors.base import Matrix, Vector
from featurestream.selectors.decisions import Decision, Eviction, Reason
from featurestream.selectors.untestable import fisher_z_untestable
from featurestream.stats.columns import cross_dots, row_dots
from featurestream.stats.entropy import su_dependence
from featurestream.stats.fisher_z import fisher_z_dependence

BoolVector = npt.NDArray[np.bool_]
BoolMatrix = npt.NDArray[np.bool_]


@dataclass
class Batch:
    """Working copy of the selection while one request is applied.

    Parallel lists in selection order; a ``ref`` >= 0 is a row of the state's
    columns, a ``ref`` < 0 is ~(row of the request). Old refs always precede new
    ones, since groups are only ever appended.
    """

    names: list[str]
    groups: list[str]
    dep: list[float]
    ref: list[int]
    decided: dict[int, Decision] = field(default_factory=dict)
    accepted: int = 0
    evicted: int = 0
    groups_rejected: int = 0
    groups_dropped: int = 0
    tests: int = 0
    untestable: int = 0

    def count_tests(self, untestable: BoolVector, first: int | None) -> None:
        """Count the pairwise tests of one scan: up to the first rejecting member, or all."""
        examined = untestable.shape[0] if first is None else first + 1
        self.tests += examined
        self.untestable += int(untestable[:examined].sum())

    def keep(self, alive: BoolVector) -> None:
        """Remove the evicted features; a group left empty is dropped (step 3)."""
        before = set(self.groups)
        self.names = [x for x, a in zip(self.names, alive, strict=True) if a]
        self.groups = [x for x, a in zip(self.groups, alive, strict=True) if a]
        self.dep = [x for x, a in zip(self.dep, alive, strict=True) if a]
        self.ref = [x for x, a in zip(self.ref, alive, strict=True) if a]
        self.groups_dropped += len(before - set(self.groups))
        self.evicted += int((~alive).sum())


@dataclass(frozen=True)
class Pairs:
    """The pairwise dependence t = dep(a, b) of the stream's test, over ``n`` rows.

    ``su``: symmetrical uncertainty of integer codes, a pair skipped when
    t <= ``delta``; else Fisher's z of standardised rows at level ``alpha``.
    """

    su: bool
    alpha: float
    delta: float
    n: int

    def many(self, A: Matrix, B: Matrix) -> tuple[Matrix, BoolMatrix]:
        """t = dep(a, b) for rows of A (the arriving side) against rows of B; NaN = skip.

        Also returns the mask of the pairs whose test could not be made.
        """
        if self.su:
            out = np.empty((A.shape[0], B.shape[0]))
            for k, a in enumerate(A):
                out[k] = self.one(B, a)[0]
            return out, np.zeros(out.shape, dtype=bool)
        return self._dependence(np.clip(cross_dots(A, B), -1.0, 1.0))

    def one(self, B: Matrix, a: Vector) -> tuple[Vector, BoolVector]:
        """:meth:`many` for one arriving row ``a``."""
        if self.su:
            # SU(arriving, earlier), g skipped when t <= delta (SAOLA step 2, su).
            t = su_dependence(a, B, self.delta)
            return t, np.zeros(t.shape, dtype=bool)
        return self._dependence(np.clip(row_dots(B, a), -1.0, 1.0))

    def _dependence(self, r: Matrix) -> tuple[Matrix, BoolMatrix]:
        # SAOLA step 2 / group-SAOLA step 3: skip pairs that are independent or untestable.
        # An untestable pair has no t to compare, with either setting of ``untestable``.
        return fisher_z_dependence(r, self.n, self.alpha), fisher_z_untestable(r, self.n)


def intra_group(
    pairs: Pairs, cand: list[int], names: list[str], rows: Matrix, dep_new: Vector, work: Batch
) -> dict[int, str]:
    """Step 1 over the relevant features of one group; returns {removed row: by name}.

    SAOLA steps 1-3 with S starting empty and min(dep_f, dep_g) as the bound of
    both comparisons (docs/algorithms/group_saola.md, "What it does", step 1).
    """
    removed_by: dict[int, int] = {}
    if len(cand) < 2:
        return {}
    # fisher_z: the whole group's pairwise matrix in one pass.
    T, U = (None, None) if pairs.su else pairs.many(rows[cand], rows[cand])
    pos = {i: k for k, i in enumerate(cand)}
    members: list[int] = []
    for i in cand:
        if members:
            if T is None or U is None:
                t, u = pairs.one(rows[members], rows[i])
            else:
                at = [pos[j] for j in members]
                t, u = T[pos[i], at], U[pos[i], at]
            dep_f = float(dep_new[i])
            dep_g = dep_new[members]
            bound = np.minimum(dep_f, dep_g)
            rej = _scan(t, (dep_g >= dep_f), bound)
            ev = _scan(t, (dep_f > dep_g), bound)
            first = _first(rej, ev)
            work.count_tests(u, first)
            for k in np.flatnonzero(ev):
                removed_by[members[k]] = i
            if first is not None:
                removed_by[i] = members[first]
            members = [m for m, e in zip(members, ev, strict=True) if not e]
            if first is not None:
                continue
        members.append(i)
    return {k: names[v] for k, v in removed_by.items()}


def inter_group(
    pairs: Pairs,
    columns: Matrix,
    kept: list[int],
    names: list[str],
    rows: Matrix,
    dep_new: Vector,
    work: Batch,
    evictions: dict[int, list[Eviction]],
) -> tuple[BoolVector, dict[int, str]]:
    """Step 3: G' against the earlier selected groups; returns (alive mask, removed).

    ``columns``: the state's columns of the selected features. The rule
    (docs/algorithms/group_saola.md, "Processing order") runs group H by group,
    then f in G', then h in H. The only shared state is "f still in G'"
    (changed only while f is compared) and "h still in H" (changed only by the
    features of G', in order), so taking f by f against all earlier features in
    selection order gives the same outcome: a rejected f stops for every later
    group anyway.
    """
    old = [ref for ref in work.ref if ref >= 0]
    new = [~ref for ref in work.ref if ref < 0]
    old_cols = columns if len(old) == columns.shape[0] else columns[old]
    S_cols = None
    T = U = None
    if pairs.su:
        S_cols = np.concatenate([old_cols, rows[new]], axis=0)
    else:
        # The group's whole pairwise matrix against the selected features, one pass.
        G_rows = rows[kept]
        T_old, U_old = pairs.many(G_rows, old_cols)
        T_new, U_new = pairs.many(G_rows, rows[new])
        T = np.concatenate([T_old, T_new], axis=1)
        U = np.concatenate([U_old, U_new], axis=1)
    dep_S = np.array(work.dep, dtype=np.float64)
    alive = np.ones(len(work.ref), dtype=bool)
    removed: dict[int, str] = {}
    for k, i in enumerate(kept):
        live = np.flatnonzero(alive)
        if live.size == 0:
            break
        if S_cols is not None:
            t, u = pairs.one(S_cols[live], rows[i])
        else:
            assert T is not None and U is not None
            t, u = T[k, live], U[k, live]
        dep_f = float(dep_new[i])
        dep_h = dep_S[live]
        bound = np.minimum(dep_f, dep_h)
        rej = _scan(t, dep_h > dep_f, bound)
        ev = _scan(t, dep_f >= dep_h, bound)
        first = _first(rej, ev)
        work.count_tests(u, first)
        for j in live[ev]:
            evictions[i].append(Eviction(work.names[j], Reason.REDUNDANT, by=names[i]))
        alive[live[ev]] = False
        if first is not None:
            removed[i] = work.names[live[first]]
    return alive, removed


def _scan(t: Vector, stronger: BoolVector, bound: Vector) -> BoolVector:
    """Pairs that are testable, on the right side of the dep comparison, and t > bound."""
    testable = ~np.isnan(t)
    return np.asarray(testable & stronger & (np.where(testable, t, -np.inf) > bound))


def _first(rej: BoolVector, ev: BoolVector) -> int | None:
    """Position of the first rejecting comparison; evictions after it never happen.

    The scan over S stops at the first g that rejects f (SAOLA step 2); each
    comparison depends only on (dep_f, dep_g, t), so the scan is a pair of masks.
    Clears ``ev`` in place from that position on.
    """
    if not rej.any():
        return None
    first = int(np.argmax(rej))
    ev[first:] = False
    return first


__all__ = ["Batch", "Pairs", "inter_group", "intra_group"]
