"""K-OFSD (docs/algorithms/k_ofsd.md): every rule on small data, by hand and against a
plain transcription of the rules (tests/unit/selectors/rough_set_reference.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from featurestream.errors import InvalidInput, InvalidParameter
from featurestream.selectors import KOFSD, KOFSDParams, Reason
from featurestream.selectors.targets import resolve_target
from tests.unit.selectors import rough_set_reference as ref
from tests.unit.selectors.common import assert_round_trip_and_replay, blob

ALPHA = 0.5


def start(y: Any, k: int = 5) -> KOFSD:
    t = resolve_target(list(y))
    return KOFSD.start(KOFSDParams(k=k), t.y, t.n_classes)


def reference_run(X: np.ndarray, y: list[int], k: int) -> tuple[list[Any], list[str]]:
    """The rules of K-OFSD, written out: (name, accepted, reason, evicted) and the selection."""
    ones = sum(y)
    card = ref.k_nearest(k, y[0] if 2 * ones == len(y) else int(2 * ones > len(y)))
    S: list[int] = []
    dep_last = 0.0
    singles: list[tuple[float, int]] = []
    out: list[Any] = []
    for i, name, g in ref.arrivals(X, y, card, out):
        singles.append((g, i))
        if g <= ALPHA:
            out.append((name, False, Reason.IRRELEVANT, []))
        elif g > dep_last:
            out.append((name, True, None, [f"f{j}" for j in S]))
            S, dep_last = [i], g
        else:
            d = ref.gamma([X[j] for j in [*S, i]], y, card)
            if d > dep_last:
                S.append(i)
                dep_last = d
                out.append((name, True, None, []))
            else:
                out.append((name, False, Reason.NOT_SIGNIFICANT, []))
    if S:
        return out, [f"f{j}" for j in S]
    m = int(np.floor(np.sqrt(len(X)) + 0.5))
    best = sorted(singles, key=lambda t: (-t[0], t[1]))[:m]
    return out, [f"f{j}" for _, j in best]


def run(X: np.ndarray, y: Any, k: int, step: int = 1) -> tuple[list[Any], list[str], KOFSD]:
    return ref.run(start(y, k), X, step)


def data(seed: int, n: int = 24, b: int = 12) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    y = [int(v) for v in (rng.random(n) < 0.35)]
    X = rng.normal(size=(b, n))  # no near ties (the transcription has no tolerance)
    for j in range(0, b, 3):
        X[j] += 1.5 * np.array(y) * rng.random()
    return X, y


# --------------------------------------------------------------------------- by hand


def test_replace_all_and_not_significant_by_hand() -> None:
    # K = 1: card(i) = 1 when i's nearest neighbour shares its class.
    # y = [0, 0, 0, 0, 1, 1]; a = 0..5: instance 4's nearest (3 and 5 tie at 1,
    # instance order) is 3, of the other class; all others match: g = 5/6.
    # b puts the two 1s apart: every nearest matches, g = 1 > 5/6: b replaces a.
    # c = a reversed: g = 5/6 <= 1, and no set beats 1: not significant.
    y = [0, 0, 0, 0, 1, 1]
    X = np.array(
        [
            [0.0, 1, 2, 3, 4, 5],
            [0.0, 1, 2, 3, 10, 11],
            [5.0, 4, 3, 2, 1, 0],
            [2.0, 2, 2, 2, 2, 2],
        ]
    )
    sel = start(y, k=1)
    d = sel.learn_features(["a", "b", "c", "k"], X)
    assert [(x.feature, x.accepted, x.reason, x.score) for x in d] == [
        ("a", True, None, 5 / 6),
        ("b", True, None, 1.0),
        ("c", False, Reason.NOT_SIGNIFICANT, 5 / 6),
        ("k", False, Reason.CONSTANT, None),
    ]
    assert d[1].evicted[0].feature == "a" and d[1].evicted[0].reason == Reason.REDUNDANT
    assert d[1].evicted[0].by == "b"
    assert sel.selected() == ("b",) and sel.state.dep_last == 1.0
    assert sel.status()["dep_last"] == 1.0


def test_a_feature_that_raises_the_dependency_joins_and_stays() -> None:
    # K = 1, y = [0, 0, 0, 0, 0, 1, 1, 1]. a alone: 6 of 8 nearest neighbours share
    # the class, g = 0.75; c alone as well, 0.75 <= dep_last = 0.75, so c does not
    # replace a; together they depend 0.875 > 0.75: c joins, dep_last = 0.875.
    y = [0, 0, 0, 0, 0, 1, 1, 1]
    a = np.array([4.0, 5, 5, 0, 3, 0, 2, 0])
    c = np.array([1.0, 3, 5, 1, 2, 3, 4, 4])
    card = ref.k_nearest(1, 0)
    assert ref.gamma([a], y, card) == ref.gamma([c], y, card) == 0.75
    assert ref.gamma([a, c], y, card) == 0.875
    sel = start(y, k=1)
    d = sel.learn_features(["a", "c"], np.array([a, c]))
    assert [(x.accepted, x.reason, x.evicted) for x in d] == [(True, None, ()), (True, None, ())]
    assert sel.selected() == ("a", "c") and sel.state.dep_last == 0.875
    # a reversed alone depends 0.875 too: not above dep_last, so it replaces nothing;
    # with a and c it does not raise 0.875: not significant, and S stays.
    e = sel.learn_feature("e", a[::-1].copy())
    assert (e.accepted, e.reason, e.score) == (False, Reason.NOT_SIGNIFICANT, 0.875)
    assert sel.selected() == ("a", "c")


def test_empty_selection_falls_back_to_the_largest_single_dependencies() -> None:
    # Nothing exceeds 0.5: p = 5 arrivals (one constant), round(sqrt(5)) = 2 features
    # of largest single dependency; the two tied at the top keep arrival order.
    y = [0, 0, 0, 0, 1, 1]
    X = np.array(
        [
            [0.0, 1, 0, 1, 0, 1],
            [1.0, 0, 1, 0, 1, 0],
            [0.0, 1, 0, 1, 0, 1],
            [3.0, 3, 3, 3, 3, 3],
            [0.0, 9, 4, 1, 2, 7],
        ]
    )
    sel = start(y, k=3)
    d = sel.learn_features([f"f{i}" for i in range(5)], X)
    scores = [x.score for x in d]
    assert all(not x.accepted for x in d)
    expected = [ref.gamma([x], y, ref.k_nearest(3, 0)) for x in X[[0, 1, 2, 4]]]
    assert [scores[i] for i in (0, 1, 2, 4)] == expected
    assert max(expected) <= ALPHA
    order = sorted(range(4), key=lambda i: (-expected[i], i))[:2]
    names = [["f0", "f1", "f2", "f4"][i] for i in order]
    assert list(sel.selected()) == names
    assert [f.score for f in sel.selected_features()] == [expected[i] for i in order]
    # Once something is selected the fallback is gone for good.
    sel.learn_feature("g", np.array([0.0, 1, 2, 3, 10, 11]))
    assert sel.selected() == ("g",) and sel.state.arrived == ()


def test_no_arrival_selects_nothing() -> None:
    assert start([0, 1, 1]).selected() == ()


# ------------------------------------------------------------- against the rules


@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("seed", range(6))
def test_decisions_follow_the_written_out_rules(seed: int, k: int) -> None:
    X, y = data(seed)
    got, selected, _ = run(X, y, k)
    want, want_selected = reference_run(X, y, k)
    assert got == want
    assert selected == want_selected


def test_every_rule_is_exercised_by_the_reference_data() -> None:
    reasons: set[Any] = set()
    largest = 0
    for seed in range(6):
        for k in (1, 2, 5):
            X, y = data(seed)
            decisions, selected, _ = run(X, y, k)
            largest = max(largest, len(selected))
            for _, accepted, reason, evicted in decisions:
                reasons.add("replace" if evicted else "accept" if accepted else reason)
    assert {"replace", "accept", Reason.IRRELEVANT, Reason.NOT_SIGNIFICANT} <= reasons
    # Only the add-and-keep rule makes S hold more than one feature.
    assert largest >= 2


# ------------------------------------------------------------------ invariances


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    labels=st.sampled_from([(0, 1), (1, 0), (5, 7), (7, 5), ("neg", "pos"), ("pos", "neg")]),
)
def test_relabelled_classes_give_the_same_decisions(seed: int, labels: tuple[Any, Any]) -> None:
    X, y = data(seed % 1000, n=20, b=8)
    base = run(X, y, 2)[:2]
    relabelled = [labels[v] for v in y]
    # Either label may be the one written first.
    assert run(X, relabelled, 2)[:2] == base


def test_a_tie_of_class_counts_takes_the_class_that_comes_first() -> None:
    y = [0, 0, 0, 1, 1, 1]
    for labels in (
        y,
        [1 - v for v in y],
        ["b" if v else "a" for v in y],
        ["a" if v else "b" for v in y],
    ):
        sel = start(labels)
        assert sel.codes[sel.rule.majority] == sel.codes[0]  # type: ignore[union-attr]
    assert start([7, 7, 5, 7]).rule.majority == 1  # type: ignore[union-attr]


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 999), swap=st.booleans())
def test_relabelling_a_tie_of_class_counts_changes_nothing(seed: int, swap: bool) -> None:
    X, _ = data(seed, n=20, b=8)
    y = [int(v) for v in np.random.default_rng(seed).permutation(np.repeat([0, 1], 10))]
    base = run(X, y, 3)[:2]
    assert run(X, [("x", "a")[v] if swap else 1 - v for v in y], 3)[:2] == base


@pytest.mark.parametrize("seed", range(3))
def test_a_batch_equals_one_by_one_and_replays(seed: int) -> None:
    X, y = data(seed)
    one = run(X, y, 2, step=1)
    batch = run(X, y, 2, step=len(X))
    assert one[:2] == batch[:2] and blob(one[2]) == blob(batch[2])
    names = [f"f{i}" for i in range(len(X))]
    assert_round_trip_and_replay(lambda: start(y, 2), names, X, [0, 3, 4, 9, len(X)])


# ------------------------------------------------------------------------ refusals


def test_refuses_a_multiclass_target_naming_those_that_accept_it() -> None:
    t = resolve_target([0, 1, 2, 1])
    with pytest.raises(InvalidInput, match="accept multi-class targets: alpha_investing"):
        KOFSD.start(KOFSDParams(), t.y, t.n_classes)


def test_refuses_a_continuous_target() -> None:
    t = resolve_target([0.5, 1.5, 2.5], "continuous")
    with pytest.raises(InvalidInput, match="does not accept a continuous target") as e:
        KOFSD.start(KOFSDParams(), t.y, t.n_classes)
    assert "accept multi-class targets: alpha_investing" in str(e.value)
    assert e.value.field == "target"
    # Two values read as continuous are two classes.
    two = resolve_target([0.5, 1.5, 0.5], "continuous")
    assert KOFSD.start(KOFSDParams(), two.y).selected() == ()


def test_refuses_more_instances_than_it_computes_distances_for() -> None:
    with pytest.raises(InvalidInput, match="at most 5000 instances"):
        KOFSD.start(KOFSDParams(), np.tile([0.0, 1.0], 2501))


def test_k_is_checked() -> None:
    with pytest.raises(InvalidParameter, match="'k' parameter of K-OFSD"):
        KOFSDParams(k=0)
