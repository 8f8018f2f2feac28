"""The neighborhood dependency (stats/neighborhood.py), by hand on small data.

The worked example: one column x = [0, 1, 3, 6, 10] given as its squared
distances (x_i - x_j)^2, so every distance is an integer and every rule can be
followed on paper. Classes [0, 0, 1, 1, 1]. Each instance's neighbours by
distance (instance: distance), position 1 being itself:

    0: 1:1  2:3  3:6  4:10
    1: 0:1  2:2  3:5  4:9
    2: 1:2  0:3  3:3  4:7     (0 and 3 tie at 3: instance order)
    3: 2:3  4:4  1:5  0:6
    4: 3:4  2:7  1:9  0:10
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from featurestream.stats.neighborhood import (
    Adapted,
    Density,
    KNearest,
    Subset,
    cards,
    dependency,
    gamma,
    majority_class,
    non_significant,
    sorted_rows,
    sqrt_count,
    squared_distances,
    unit_column,
)

X = np.array([0.0, 1.0, 3.0, 6.0, 10.0])
Q = np.subtract.outer(X, X) ** 2
CODES = np.array([0, 0, 1, 1, 1])


def test_sorted_rows_of_the_worked_example() -> None:
    dist, order = sorted_rows(Q)
    assert order.tolist() == [
        [0, 1, 2, 3, 4],
        [1, 0, 2, 3, 4],
        [2, 1, 0, 3, 4],
        [3, 2, 4, 1, 0],
        [4, 3, 2, 1, 0],
    ]
    assert dist[2].tolist() == [0.0, 2.0, 3.0, 3.0, 7.0]


def test_near_ties_keep_instance_order_and_the_distances_stay_sorted() -> None:
    # Instance 1 is 2 (1 + 1e-14) away, instance 2 exactly 2: within 1e-12, a tie.
    near = 4.0 * (1 + 1e-14) ** 2
    dist, order = sorted_rows(np.array([[0.0, near, 4.0, 9.0]]))
    assert order.tolist() == [[0, 1, 2, 3]]
    assert dist.tolist() == [[0.0, 2.0, math.sqrt(near), 3.0]]
    # Beyond the tolerance the smaller distance comes first.
    far = 4.0 * (1 + 1e-9) ** 2
    assert sorted_rows(np.array([[0.0, far, 4.0, 9.0]]))[1].tolist() == [[0, 2, 1, 3]]


def test_duplicate_instances_can_come_before_the_instance_itself() -> None:
    # Instances 0 and 1 coincide: for instance 1, position 1 is instance 0.
    order = sorted_rows(squared_distances([np.array([2.0, 2.0, 5.0])], 3))[1]
    assert order[1].tolist() == [0, 1, 2]


def test_zero_variance_columns_contribute_nothing() -> None:
    x = np.array([1.0, 4.0, 2.0, 8.0])
    constant = unit_column(np.full(4, 0.1))
    assert constant.tolist() == [0.1] * 4
    alone = squared_distances([unit_column(x)], 4)
    both = squared_distances([constant, unit_column(x)], 4)
    assert np.array_equal(alone, both)


def test_columns_are_divided_by_their_sample_standard_deviation() -> None:
    # x = [0, 4]: mean 2, sample variance (4 + 4) / 1 = 8.
    assert np.allclose(unit_column(np.array([0.0, 4.0])), [0.0, 4.0 / math.sqrt(8.0)])
    # The squared distance over two columns is the sum of their contributions.
    a, b = np.array([0.0, 1.0, 2.0]), np.array([2.0, 0.0, 4.0])
    got = squared_distances([a, b], 3)
    assert got[0, 2] == (0.0 - 2.0) ** 2 + (2.0 - 4.0) ** 2 == 8.0


def test_k_nearest_rule_by_hand() -> None:
    # K = 2, majority class 1. Instance 0 (class 0): neighbours 1, 2 -> 1/2;
    # 1: 0, 2 -> 1/2; 2 (majority): 1, 0, not all of its class -> 0;
    # 3: 2, 4 -> all class 1 -> 1; 4: 3, 2 -> 1.
    rule = KNearest(2, majority_class(CODES))
    assert rule.majority == 1
    assert cards(Q, CODES, rule).tolist() == [0.5, 0.5, 0.0, 1.0, 1.0]
    assert gamma(Q, CODES, rule) == 3.0 / 5
    # The same neighbours, class 0 the majority: shares for class 1, all-or-nothing for 0.
    assert cards(Q, CODES, KNearest(2, 0)).tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]


def test_k_nearest_with_more_neighbours_than_instances_takes_all_others() -> None:
    assert cards(Q, CODES, KNearest(10, 1)).tolist() == [0.25, 0.25, 0.0, 0.0, 0.0]


def test_majority_class_and_its_tie() -> None:
    assert majority_class(np.array([1, 1, 0])) == 1
    # A tie: the class of the first instance, whatever the labels' order.
    assert majority_class(np.array([0, 1, 1, 0])) == 0
    assert majority_class(np.array([1, 0, 0, 1])) == 1
    assert majority_class(np.array([1, 1])) == 1


def test_adapted_rule_by_hand() -> None:
    # gap = 1.5 (D(5) - D(2)) / 3.
    # 0: 1,3,6,10, gap 4.5: steps 2,3,4 all < 4.5 -> {1,2,3,4}, 1 of class 0 -> 1/4
    # 1: 1,2,5,9, gap 4: steps 1,3 then 4 (not < 4) -> {0,2,3} -> 1/3
    # 2: 2,3,3,7, gap 2.5: steps 1,0 then 4 -> {1,0,3} -> 1/3
    # 3: 3,4,5,6, gap 1.5: steps 1,1,1 -> {2,4,1,0} -> 2/4
    # 4: 4,7,9,10, gap 3: step 3 (not < 3) -> {3} -> 1
    assert cards(Q, CODES, Adapted()).tolist() == [0.25, 1 / 3, 1 / 3, 0.5, 1.0]
    assert gamma(Q, CODES, Adapted()) == (((0.25 + 1 / 3) + 1 / 3) + 0.5 + 1.0) / 5


def test_density_rule_by_hand() -> None:
    # density(j) = D(j) / (j - 1):
    # 0: 1, 1.5 -> {1} -> 1
    # 1: 1, 1, 5/3 -> {0, 2} -> 1/2
    # 2: 2, 1.5, 1, 1.75 -> {1, 0, 3} -> 1/3
    # 3: 3, 2, 5/3, 1.5 -> {2, 4, 1, 0} -> 1/2
    # 4: 4, 3.5, 3, 2.5 -> {3, 2, 1, 0} -> 1/2
    assert cards(Q, CODES, Density()).tolist() == [1.0, 0.5, 1 / 3, 0.5, 0.5]


def test_density_zero_is_always_a_neighbour() -> None:
    # Instances 0, 1, 2 coincide: for each of them, positions 2.. hold instances
    # 1, 2 (in instance order, the instance itself among them) with densities 0, 0,
    # then 3 with 5/3 > 0, which stops. Instance 3: 5, 2.5, 5/3, all three.
    x = np.array([0.0, 0.0, 0.0, 5.0])
    c = cards(np.subtract.outer(x, x) ** 2, np.array([0, 0, 1, 1]), Density())
    assert c.tolist() == [0.5, 0.5, 0.5, 1 / 3]


def test_tiny_universes() -> None:
    one = np.zeros((1, 1))
    for rule in (KNearest(3, 0), Adapted(), Density()):
        assert cards(one, np.array([0]), rule).tolist() == [0.0]
        two = np.array([[0.0, 1.0], [1.0, 0.0]])
        assert cards(two, np.array([0, 0]), rule).tolist() == [1.0, 1.0]


def test_dependency_adds_the_cards_in_instance_order() -> None:
    card = np.array([0.1, 0.2, 0.3, 1 / 3])
    assert dependency(card) == (((0.1 + 0.2) + 0.3) + 1 / 3) / 4
    assert dependency(np.zeros(0)) == 0.0


def test_sqrt_count() -> None:
    assert [sqrt_count(p) for p in (0, 1, 2, 3, 6, 7, 12, 13)] == [0, 1, 1, 2, 2, 3, 3, 4]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), m=st.integers(1, 5), n=st.integers(2, 12))
def test_subset_updates_equal_sums_from_scratch(seed: int, m: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    units = [unit_column(np.round(rng.normal(size=n), 1)) for _ in range(m)]
    s = Subset(n)
    for z in units:
        s.append(z, s.plus(z))
    assert np.array_equal(s.Q, squared_distances(units, n))
    k = int(rng.integers(0, m))
    rest = units[:k] + units[k + 1 :]
    assert np.array_equal(s.without(k), squared_distances(rest, n))
    s.remove(k)
    assert np.array_equal(s.Q, squared_distances(rest, n))


def test_non_significance_pass_in_arrival_order() -> None:
    rng = np.random.default_rng(4)
    n = 20
    codes = rng.integers(0, 2, n)
    x = unit_column(rng.normal(size=n))
    noise = unit_column(rng.normal(size=n))
    rule = KNearest(3, majority_class(codes))
    # R = [constant, x, noise, f = x]: the constant adds nothing (removed); then x
    # given noise and f: a copy of f, so R - x = [noise, f] is R with f counted once
    # where x and f were; the pass removes what leaves gamma unchanged.
    members = [np.full(n, 3.0), x, noise, x.copy()]
    s = Subset(n, members)
    g = gamma(s.Q, codes, rule)
    seen: list[tuple[float, float]] = []

    def equal(g_r: float, g_without: float) -> bool:
        seen.append((g_r, g_without))
        return g_without == g_r

    removed, left = non_significant(s, codes, rule, g, equal)
    assert left == gamma(s.Q, codes, rule)
    assert removed[0] == 0 and seen[0] == (g, g)
    want = [members[i] for i in range(4) if i not in removed]
    assert len(s) == len(want) and np.array_equal(s.Q, squared_distances(want, n))
    assert len(seen) == 3  # every member but the newest, once


def test_non_significance_pass_removes_nothing_when_all_matter() -> None:
    s = Subset(5, [unit_column(X), unit_column(X[::-1] ** 2)])
    g = gamma(s.Q, CODES, Density())
    assert non_significant(s, CODES, Density(), g, lambda a, b: False) == ([], g)
    assert len(s) == 2


@pytest.mark.parametrize("rule", [KNearest(2, 1), Adapted(), Density()])
def test_blocks_of_rows_give_the_same_cards(rule: object, monkeypatch: pytest.MonkeyPatch) -> None:
    import featurestream.stats.neighborhood as nb

    rng = np.random.default_rng(9)
    n = 30
    codes = rng.integers(0, 2, n)
    Qr = squared_distances([unit_column(rng.normal(size=n)) for _ in range(3)], n)
    whole = cards(Qr, codes, rule)  # type: ignore[arg-type]
    monkeypatch.setattr(nb, "_BLOCK", 7 * n)
    assert np.array_equal(cards(Qr, codes, rule), whole)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(3, 25),
    m=st.integers(3, 8),
    decimals=st.integers(0, 2),
)
def test_the_nearest_m_are_those_of_a_whole_sort(seed: int, n: int, m: int, decimals: int) -> None:
    # Rounded values make exact and near ties (sums of squares that differ in the last bit).
    rng = np.random.default_rng(seed)
    units = [unit_column(np.round(rng.normal(size=n), decimals)) for _ in range(2)]
    Qr = squared_distances(units, n)
    dist, order = sorted_rows(Qr)
    part_dist, part_order = sorted_rows(Qr, m)
    width = min(m, n)
    assert np.array_equal(part_dist, dist[:, :width])
    assert np.array_equal(part_order[:, : width - 1], order[:, : width - 1])
    codes = rng.integers(0, 2, n)
    for k in (1, m - 2):
        rule = KNearest(k, 1)
        whole = np.array(
            [
                rule.card(dist[i : i + 1], codes[order[i : i + 1]] == codes[i], codes[i : i + 1])
                for i in range(n)
            ]
        ).ravel()
        assert np.array_equal(cards(Qr, codes, rule), whole)


def test_density_neighbourhood_of_the_papers_example() -> None:
    # OFS-Density's paper, x3 on {f1, f2} with plain Euclidean distances: x7 at
    # 1.803, x2 at 3.4, x6 at 4.036, x1 at 5.009, x8 at 7.655 (then x4, x5). Densities
    # 1.803, 1.7, 1.345, 1.252, then 1.531 rises: N(x3) = {x7, x2, x6, x1} (the
    # paper's text stops at the first fall instead, {x7}).
    f = np.array([[3.0, 5, 8, 13, 6, 5, 9, 15], [5.6, 6.9, 5.3, 12.3, 15.2, 2.6, 6.8, 8.4]])
    d = np.array([0, 1, 1, 1, 0, 1, 0, 0])
    Qp = squared_distances(list(f), 8)
    order = sorted_rows(Qp)[1][2]
    assert order[:6].tolist() == [2, 6, 1, 5, 0, 7]
    # x3 is of class 1; of x7, x2, x6, x1 two are: card 1/2.
    assert cards(Qp, d, Density())[2] == 0.5
