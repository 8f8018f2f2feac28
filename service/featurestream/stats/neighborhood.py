"""The neighborhood rough set dependency gamma_S(D) of a class on a feature subset.

docs/algorithms.md, "Neighborhood dependency". K-OFSD, OFS-A3M and OFS-Density
judge a feature subset S by how consistently each instance's neighbours, in
the standardized Euclidean distance over S, share its class:

1. Each column is divided by its sample standard deviation (a zero-variance
   column is left as it is and so contributes nothing); the squared distance
   of instances i and j over S is the sum, over the columns of S in arrival
   order, of their contributions (z_i - z_j)^2, and D(i, j) its square root.
2. Each instance's n distances (its own, 0, included) are sorted ascending;
   distances within 1e-12 relative of the previous one in that order are a
   tie, and tied instances keep instance order. A rule takes a prefix N(i) of
   positions 2..n as i's neighbourhood and gives card(i), normally the share
   of N(i) of i's class.
3. gamma = (card(1) + ... + card(n), added in that order) / n; 0 for S empty.

The squared distances of a subset are kept as one n x n sum
(:class:`Subset`): adding the newest column adds its contributions, which is
exactly the sum over the columns in arrival order; a subset without one of
its members is summed again from its other members, in arrival order, so a
subset's distances have the same bits however it was reached. Rows are
sorted a block at a time, so a computation holds a few n x n arrays at most.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Distances within this relative difference of each other are a tie.
TIE = 1e-12
#: Largest n the dependency is computed for: it holds n x n float64 arrays (200 MB
#: each at n = 5,000), as NRFS's window does.
MAX_INSTANCES = 5000
# Values of one block of sorted rows (float64 elements: 32 MiB).
_BLOCK = 1 << 22


def unit_column(x: FloatArray) -> FloatArray:
    """x divided by its sample standard deviation; a zero-variance x as it is.

    >>> unit_column(np.array([1.0, 2.0, 3.0])).tolist()
    [1.0, 2.0, 3.0]
    >>> unit_column(np.array([0.0, 4.0])).round(6).tolist()
    [0.0, 1.414214]
    >>> unit_column(np.array([5.0, 5.0])).tolist()
    [5.0, 5.0]
    """
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] < 2 or x.max() == x.min():
        return x.copy()
    return np.asarray(x / float(np.std(x, ddof=1)), dtype=np.float64)


def add_contribution(Q: FloatArray, z: FloatArray) -> None:
    """Q += (z_i - z_j)^2 for every pair, in place."""
    diff = np.subtract.outer(z, z)
    np.multiply(diff, diff, out=diff)
    np.add(Q, diff, out=Q)


def squared_distances(units: Sequence[FloatArray], n: int) -> FloatArray:
    """The n x n squared distances over the columns ``units``, summed in their order."""
    Q = np.zeros((n, n))
    for z in units:
        add_contribution(Q, z)
    return Q


@dataclass(frozen=True)
class KNearest:
    """K-OFSD: N(i) = positions 2..K+1 (2..n when n <= K); for the majority class
    card(i) = 1 if all of N(i) is of i's class, else 0; for the other class the share."""

    k: int
    majority: int

    def positions(self, n: int) -> int | None:
        """The positions the rule reads: 1..K+1, and one more to see where a tie ends."""
        return self.k + 2

    def card(self, dist: FloatArray, same: BoolArray, codes: IntArray) -> FloatArray:
        m = min(self.k, same.shape[1] - 1)
        if m <= 0:
            return np.zeros(same.shape[0])
        near = same[:, 1 : m + 1]
        whole = near.all(axis=1).astype(np.float64)
        return np.where(codes == self.majority, whole, near.sum(axis=1) / m)


@dataclass(frozen=True)
class Adapted:
    """OFS-A3M: gap = 1.5 (D(n) - D(2)) / (n - 2); N(i) = position 2, then positions
    j = 3.. while D(j) - D(j - 1) < gap."""

    def positions(self, n: int) -> int | None:
        return None  # D(n) and a prefix of unknown length: every position

    def card(self, dist: FloatArray, same: BoolArray, codes: IntArray) -> FloatArray:
        n = dist.shape[1]
        if n <= 2:
            return _share(same, np.full(dist.shape[0], n - 1, dtype=np.int64))
        gap = 1.5 * (dist[:, n - 1] - dist[:, 1]) / (n - 2)
        ok = dist[:, 2:] - dist[:, 1:-1] < gap[:, None]
        return _share(same, 1 + _leading(ok))


@dataclass(frozen=True)
class Density:
    """OFS-Density: density(j) = D(j) / (j - 1); N(i) = positions j = 2.. while
    density(j) == 0 or density(j) <= the density of the position before."""

    def positions(self, n: int) -> int | None:
        return None  # a prefix of unknown length: every position

    def card(self, dist: FloatArray, same: BoolArray, codes: IntArray) -> FloatArray:
        n = dist.shape[1]
        if n <= 2:
            return _share(same, np.full(dist.shape[0], n - 1, dtype=np.int64))
        dens = dist[:, 1:] / np.arange(1, n, dtype=np.float64)
        ok = (dens[:, 1:] == 0.0) | (dens[:, 1:] <= dens[:, :-1])
        return _share(same, 1 + _leading(ok))


Rule = KNearest | Adapted | Density


def _share(same: BoolArray, length: IntArray) -> FloatArray:
    """The share of positions 2..length+1 that are of the instance's class (0 when none)."""
    if same.shape[1] <= 1:
        return np.zeros(same.shape[0])
    count = np.cumsum(same[:, 1:], axis=1)[np.arange(same.shape[0]), np.maximum(length, 1) - 1]
    return np.where(length > 0, count / np.maximum(length, 1), 0.0)


def _leading(ok: BoolArray) -> IntArray:
    """How many leading True values each row has."""
    stop = ~ok
    first = np.argmax(stop, axis=1)
    return np.asarray(np.where(stop.any(axis=1), first, ok.shape[1]), dtype=np.int64)


def sorted_rows(Q: FloatArray, m: int | None = None) -> tuple[FloatArray, IntArray]:
    """Each row's distances sorted ascending, and the instances in that order.

    Ties (a distance within :data:`TIE` relative of the one before it) keep
    instance order; the distances themselves stay in ascending order. With
    ``m``, only the first m positions of each row (the m nearest, found by a
    partition), of which the first m - 1 hold the instances a whole sort puts
    there: a row whose m-th position ties with the one before it, so that
    instances beyond m could belong before it, is sorted whole.

    >>> d, order = sorted_rows(np.array([[0.0, 4.0, 1.0], [4.0, 0.0, 4.0], [1.0, 4.0, 0.0]]))
    >>> d.tolist(), order.tolist()
    ([[0.0, 1.0, 2.0], [0.0, 2.0, 2.0], [0.0, 1.0, 2.0]], [[0, 2, 1], [1, 0, 2], [2, 0, 1]])
    """
    D = np.sqrt(Q)
    n = D.shape[1]
    if m is None or m >= n:
        order = np.argsort(D, axis=1, kind="stable")
        dist = np.take_along_axis(D, order, axis=1)
        _untie(dist, order)
        return dist, order
    part = np.argpartition(D, m - 1, axis=1)[:, :m]
    values = np.take_along_axis(D, part, axis=1)
    by = np.lexsort((part, values), axis=1)  # by distance, then instance
    order = np.take_along_axis(part, by, axis=1)
    dist = np.take_along_axis(values, by, axis=1)
    _untie(dist, order)
    spill = np.flatnonzero(dist[:, m - 1] - dist[:, m - 2] <= TIE * dist[:, m - 1])
    if spill.shape[0]:
        whole_dist, whole_order = sorted_rows(Q[spill])
        dist[spill], order[spill] = whole_dist[:, :m], whole_order[:, :m]
    return dist, order


def _untie(dist: FloatArray, order: IntArray) -> None:
    """Put the instances of each run of tied distances in instance order (in place).

    The rows come sorted by distance, then instance: only near ties, distances
    within :data:`TIE` that are not equal, can be out of instance order.
    """
    close = dist[:, 1:] - dist[:, :-1] <= TIE * dist[:, 1:]
    rows = np.flatnonzero((close & (order[:, 1:] < order[:, :-1])).any(axis=1))
    if rows.shape[0]:
        # Number the runs of each row; sort its instances by (run, instance).
        run = np.zeros((rows.shape[0], dist.shape[1]), dtype=np.int64)
        np.cumsum(~close[rows], axis=1, out=run[:, 1:])
        mine = order[rows]
        order[rows] = np.take_along_axis(mine, np.lexsort((mine, run), axis=1), axis=1)


def cards(Q: FloatArray, codes: IntArray, rule: Rule) -> FloatArray:
    """card(i) for every instance i under ``rule``, given the squared distances Q."""
    n = codes.shape[0]
    out = np.empty(n)
    step = max(1, _BLOCK // max(1, n))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        dist, order = sorted_rows(Q[lo:hi], rule.positions(n))
        out[lo:hi] = rule.card(dist, codes[order] == codes[lo:hi, None], codes[lo:hi])
    return out


def dependency(card: FloatArray) -> float:
    """gamma: the cards added in instance order, over n."""
    if card.shape[0] == 0:
        return 0.0
    return float(np.cumsum(card)[-1]) / float(card.shape[0])


def gamma(Q: FloatArray, codes: IntArray, rule: Rule) -> float:
    """gamma_S(D) of the subset whose squared distances are Q."""
    return dependency(cards(Q, codes, rule))


def majority_class(codes: IntArray) -> int:
    """The class with more instances of two (codes 0 and 1); a tie: the class that
    comes first in the target (of instance 1), which no relabelling changes.

    >>> [majority_class(np.array(c)) for c in ([1, 0, 1], [1, 0], [0, 1])]
    [1, 1, 0]
    """
    ones = int(np.count_nonzero(codes == 1))
    zeros = codes.shape[0] - ones
    if ones == zeros:
        return int(codes[0]) if codes.shape[0] else 0
    return 1 if ones > zeros else 0


class Subset:
    """A feature subset (columns in arrival order) and its squared distances.

    ``units`` are the members' standardized columns; ``Q`` their summed
    contributions, in the same order.
    """

    def __init__(
        self, n: int, units: Sequence[FloatArray] = (), Q: FloatArray | None = None
    ) -> None:
        """``Q``: the squared distances of ``units`` when already known (never copied)."""
        self.n = n
        self.units: list[FloatArray] = list(units)
        self.Q = squared_distances(self.units, n) if Q is None else Q

    def __len__(self) -> int:
        return len(self.units)

    def plus(self, z: FloatArray) -> FloatArray:
        """The squared distances with z added as the newest column (S is unchanged)."""
        Q = self.Q.copy()
        add_contribution(Q, z)
        return Q

    def append(self, z: FloatArray, Q: FloatArray | None = None) -> None:
        """Add z as the newest member; ``Q`` is :meth:`plus` of z when already known."""
        if Q is None:
            Q = self.plus(z)
        self.units.append(z)
        self.Q = Q

    def without(self, k: int, prefix: FloatArray | None = None) -> FloatArray:
        """The squared distances of the subset without member k, summed in arrival order.

        ``prefix``: the sum of members 0..k-1 when known (a pass over the members).
        """
        Q = squared_distances(self.units[:k], self.n) if prefix is None else prefix.copy()
        for z in self.units[k + 1 :]:
            add_contribution(Q, z)
        return Q

    def remove(self, k: int, Q: FloatArray | None = None) -> None:
        """Drop member k; ``Q`` is :meth:`without` of k when already known."""
        self.Q = self.without(k) if Q is None else Q
        del self.units[k]


def non_significant(
    subset: Subset, codes: IntArray, rule: Rule, g: float, removable: Callable[[float, float], bool]
) -> tuple[list[int], float]:
    """The non-significance pass over every member but the newest, in arrival order.

    A member h is removed when ``removable(gamma_R, gamma_{R - h})``, R being
    the subset as the pass has left it (``g`` is gamma of the whole subset).
    Returns the positions, in the subset as it was, of the members removed,
    and gamma of what is left; leaves ``subset`` without them.
    """
    removed: list[int] = []
    prefix = np.zeros((subset.n, subset.n))  # the members kept before position k
    k = 0
    for original in range(len(subset) - 1):
        Q = subset.without(k, prefix)
        g_without = gamma(Q, codes, rule)
        if removable(g, g_without):
            subset.remove(k, Q)
            removed.append(original)
            g = g_without
            continue
        add_contribution(prefix, subset.units[k])
        k += 1
    return removed, g


def sqrt_count(p: int) -> int:
    """round(sqrt(p)), halves away from zero (the fallback size of K-OFSD)."""
    return math.floor(math.sqrt(p) + 0.5)


__all__ = [
    "MAX_INSTANCES",
    "TIE",
    "Adapted",
    "Density",
    "KNearest",
    "Rule",
    "Subset",
    "cards",
    "dependency",
    "gamma",
    "majority_class",
    "non_significant",
    "sorted_rows",
    "sqrt_count",
    "squared_distances",
    "unit_column",
]
