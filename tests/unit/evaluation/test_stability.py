"""Jaccard and Nogueira's stability against direct computations from their formulas."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from featurestream.errors import InvalidInput
from featurestream.evaluation.stability import (
    consecutive_jaccard,
    jaccard,
    nogueira,
    nogueira_from_matrix,
    selection_matrix,
)


def reference_nogueira(Z: np.ndarray) -> float:
    """Phi written out feature by feature, as in Nogueira et al. (2018), Eq. (4)."""
    M, d = Z.shape
    k_bar = sum(Z[i].sum() for i in range(M)) / M
    s2 = []
    for f in range(d):
        p_f = Z[:, f].sum() / M
        s2.append(M / (M - 1) * p_f * (1 - p_f))
    return float(1 - (sum(s2) / d) / ((k_bar / d) * (1 - k_bar / d)))


def test_jaccard_counts_shared_over_union() -> None:
    assert jaccard({"a", "b", "c"}, {"b", "c", "d", "e"}) == pytest.approx(2 / 5)
    assert jaccard({"a"}, {"b"}) == 0.0
    assert jaccard({"a", "b"}, ["b", "a", "a"]) == 1.0
    assert jaccard(set(), {"a"}) == 0.0


def test_jaccard_of_two_empty_selections_is_one() -> None:
    assert jaccard(set(), set()) == 1.0


def test_consecutive_jaccard_pairs_neighbours() -> None:
    sels = [{"a"}, {"a", "b"}, set(), set()]
    assert consecutive_jaccard(sels) == [0.5, 0.0, 1.0]
    assert consecutive_jaccard([{"a"}]) == []


def test_nogueira_worked_example() -> None:
    # Four selections over d = 5 features (a..e):
    #   {a, b}, {a, b, c}, {a, c}, {a, b, d}
    # p = (4/4, 3/4, 2/4, 1/4, 0), k_bar = (2 + 3 + 2 + 3) / 4 = 2.5.
    # s_f^2 = 4/3 p (1 - p): a 0, b 4/3 * 3/16 = 1/4, c 4/3 * 1/4 = 1/3,
    #   d 1/4, e 0; mean = (1/4 + 1/3 + 1/4) / 5 = (5/6) / 5 = 1/6.
    # k_bar/d = 1/2, denominator 1/4, so Phi = 1 - (1/6)/(1/4) = 1/3.
    sels = [{"a", "b"}, {"a", "b", "c"}, {"a", "c"}, {"a", "b", "d"}]
    assert nogueira(sels, ["a", "b", "c", "d", "e"]) == pytest.approx(1 / 3, abs=1e-12)


def test_nogueira_reaches_its_bounds() -> None:
    # Identical selections: 1. Two disjoint halves: the minimum -1/(M-1) = -1.
    assert nogueira([{"a", "c"}] * 3, ["a", "b", "c"]) == pytest.approx(1.0)
    assert nogueira([{"a", "b"}, {"c", "d"}], ["a", "b", "c", "d"]) == pytest.approx(-1.0)


def test_nogueira_degenerate_denominator_is_one() -> None:
    # k_bar = 0 (all empty) or k_bar = d (all full): the selections are identical.
    assert nogueira([set(), set(), set()], ["a", "b"]) == 1.0
    assert nogueira([{"a", "b"}, {"a", "b"}], ["a", "b"]) == 1.0
    assert nogueira([set(), set()], []) == 1.0
    assert nogueira_from_matrix(np.zeros((4, 0))) == 1.0


def test_nogueira_needs_two_selections() -> None:
    with pytest.raises(InvalidInput):
        nogueira([{"a"}], ["a", "b"])
    with pytest.raises(InvalidInput):
        nogueira_from_matrix(np.zeros((0, 3)))


def test_nogueira_rejects_bad_input() -> None:
    with pytest.raises(InvalidInput):
        nogueira([{"a"}, {"z"}], ["a", "b"])
    with pytest.raises(InvalidInput):
        selection_matrix([{"a"}], ["a", "a"])
    with pytest.raises(InvalidInput):
        nogueira_from_matrix([[0, 2], [1, 0]])
    with pytest.raises(InvalidInput):
        nogueira_from_matrix([1, 0, 1])


def test_names_and_matrix_inputs_agree() -> None:
    universe = ["x1", "x2", "x3", "x4"]
    sels = [{"x1", "x2"}, {"x2"}, {"x2", "x4"}]
    Z = selection_matrix(sels, universe)
    np.testing.assert_array_equal(Z, [[1, 1, 0, 0], [0, 1, 0, 0], [0, 1, 0, 1]])
    assert nogueira(sels, universe) == nogueira_from_matrix(Z)
    assert nogueira_from_matrix(Z.astype(bool)) == nogueira_from_matrix(Z)


binary = arrays(
    np.int8,
    st.tuples(st.integers(2, 8), st.integers(1, 8)),
    elements=st.integers(0, 1),
)


@given(binary)
def test_nogueira_matches_formula_on_random_matrices(Z: np.ndarray) -> None:
    M, d = Z.shape
    k_bar = Z.sum() / M
    if k_bar in (0, d):
        assert nogueira_from_matrix(Z) == 1.0
    else:
        phi = nogueira_from_matrix(Z)
        assert phi == pytest.approx(reference_nogueira(Z), abs=1e-12)
        assert -1 / (M - 1) - 1e-12 <= phi <= 1 + 1e-12


@given(binary, st.randoms(use_true_random=False))
def test_nogueira_is_invariant_under_permuted_features(Z: np.ndarray, rnd: random.Random) -> None:
    perm = list(range(Z.shape[1]))
    rnd.shuffle(perm)
    assert nogueira_from_matrix(Z[:, perm]) == pytest.approx(nogueira_from_matrix(Z), abs=1e-12)


@given(
    st.sets(st.sampled_from("abcdefgh")),
    st.integers(2, 6),
    st.sets(st.sampled_from("ijkl")),
)
def test_nogueira_of_identical_selections_is_one(
    selection: set[str], M: int, unselected: set[str]
) -> None:
    universe = sorted(selection | unselected)
    assert nogueira([set(selection)] * M, universe) == pytest.approx(1.0, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sets(st.sampled_from("abcdefgh"), max_size=8), min_size=2, max_size=6),
    st.integers(min_value=0, max_value=5),
)
def test_nogueira_by_counts_equals_the_matrix_estimator(
    selections: list[set[str]], extra: int
) -> None:
    """Counting over the selected features gives the estimator of the whole M x d matrix."""
    from featurestream.evaluation.stability import nogueira_over

    universe = [*"abcdefgh", *(f"z{i}" for i in range(extra))]
    assert nogueira_over(selections, len(universe)) == pytest.approx(
        nogueira(selections, universe), abs=1e-12
    )
    with pytest.raises(InvalidInput):
        nogueira_over(selections[:1], len(universe))
