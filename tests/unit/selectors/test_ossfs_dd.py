"""OSSFS-DD (docs/algorithms/ossfs_dd.md): every rule on small data checked by hand.

The expectations are computed here from the definitions with the project's
raw-data Fisher z test and plain numpy (mean and standard deviation of the
relevances so far), not with the selector's own arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from featurestream.errors import InvalidParameter
from featurestream.selectors import OSSFSDD, OSSFSDDParams, Reason
from featurestream.selectors.targets import resolve_target
from featurestream.stats.entropy import mutual_information
from featurestream.stats.fisher_z import fisher_z
from tests.unit.selectors.common import assert_round_trip_and_replay, blob


def start(y: Any, n_classes: int = 0, **params: Any) -> OSSFSDD:
    return OSSFSDD.start(OSSFSDDParams(**params), np.asarray(y, dtype=float), n_classes)


def gamma_z(x: np.ndarray, y: np.ndarray, given_: list[np.ndarray] | None = None) -> float:
    """|W| of the Fisher z test from raw data (stats/fisher_z.py, covariance form)."""
    return abs(fisher_z(x, y, given_ or [], alpha=0.05).statistic)


def thresholds(gammas: list[float], k1: float = 1.0, k2: float = 2.0) -> tuple[float, float]:
    mu, sigma = float(np.mean(gammas)), float(np.std(gammas, ddof=1))
    return mu + k1 * sigma, mu + k2 * sigma


def suppressor_stream(n: int = 100, seed: int = 2) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Two noise columns first, then a and b (y = a - b with a, b correlated 0.8), then noise c.

    a and b are weak alone (r about 0.3) and together explain y.
    """
    rng = np.random.default_rng(seed)
    common = rng.normal(size=n)
    a = common + 0.5 * rng.normal(size=n)
    b = common + 0.5 * rng.normal(size=n)
    y = a - b + 0.01 * rng.normal(size=n)
    X = np.vstack([rng.normal(size=n), rng.normal(size=n), a, b, rng.normal(size=n)])
    return X, y, ["n0", "n1", "a", "b", "c"]


# ----------------------------------------------------------------------- parameters


def test_defaults_are_the_papers() -> None:
    p = OSSFSDDParams()
    assert (p.k1, p.k2, p.pool_size, p.measure, p.alpha) == (1.0, 2.0, 100, "z", 0.05)


@pytest.mark.parametrize(
    "bad", [{"k1": 2.0, "k2": 2.0}, {"k1": 3.0}, {"pool_size": 1}, {"measure": "su"}]
)
def test_bad_parameters_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidParameter):
        OSSFSDDParams.from_mapping(bad)


# ----------------------------------------------------------------------- the rules


def test_the_first_two_features_are_accepted_whatever_they_are() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=30)
    sel = start(y)
    noise = rng.normal(size=(2, 30))
    d = sel.learn_features(["u", "v"], noise)
    assert [x.accepted for x in d] == [True, True]
    assert sel.selected() == ("u", "v")
    for x, col in zip(d, noise, strict=True):
        assert x.score is not None and math.isclose(x.score, gamma_z(col, y), rel_tol=1e-9)


def test_a_constant_column_is_rejected_and_takes_no_place_among_the_relevances() -> None:
    rng = np.random.default_rng(1)
    y = rng.normal(size=20)
    sel = start(y)
    d = sel.learn_features(["k", "u", "v"], np.vstack([np.full(20, 3.0), rng.normal(size=(2, 20))]))
    assert d[0].reason is Reason.CONSTANT and d[0].score is None
    # The two after it are the first two.
    assert [x.accepted for x in d[1:]] == [True, True]
    assert sel.state.relevances == 2


def test_thresholds_follow_the_mean_and_deviation_of_all_relevances() -> None:
    rng = np.random.default_rng(6)
    n = 60
    y = rng.normal(size=n)
    X = rng.normal(size=(12, n))
    X[5] += 0.3 * y
    X[9] += 0.6 * y
    sel = start(y)
    d = sel.learn_features([f"x{i}" for i in range(12)], X)
    gammas = [gamma_z(x, y) for x in X]
    for t in range(2, 12):
        low, high = thresholds(gammas[: t + 1])
        if gammas[t] <= low:
            assert d[t].reason is Reason.IRRELEVANT, t
        elif gammas[t] >= high:
            assert d[t].accepted or d[t].reason is Reason.REDUNDANT, t
        else:
            assert d[t].reason is Reason.UNDETERMINED, t
    assert math.isclose(sel.state.mean, float(np.mean(gammas)), rel_tol=1e-12)
    assert math.isclose(sel.state.m2 / 11, float(np.var(gammas, ddof=1)), rel_tol=1e-9)
    # All three outcomes occur here: x9 is a candidate, x5 waits, the rest are discarded.
    assert [x.reason for x in d].count(Reason.IRRELEVANT) == 8
    assert d[5].reason is Reason.UNDETERMINED and d[9].accepted


def test_a_stronger_arrival_evicts_a_dependent_weaker_member() -> None:
    # 20 noise columns, then h = y + 1.5 e, f = y + 0.4 e'. Given f, h still says
    # something of y (the test rejects), but gamma(h) + gamma(h | f) < 2 beta: the pair
    # is redundant and h, the weaker, leaves.
    rng = np.random.default_rng(1)
    n = 100
    y = rng.normal(size=n)
    X = np.vstack([rng.normal(size=(20, n)), y + 1.5 * rng.normal(size=n)])
    f = y + 0.4 * rng.normal(size=n)
    names = [f"n{i}" for i in range(20)] + ["h"]
    sel = start(y)
    sel.learn_features(names, X)
    assert "h" in sel.state.selected
    d = sel.learn_feature("f", f)
    gammas = [gamma_z(x, y) for x in (*X, f)]
    _, beta = thresholds(gammas)
    h = X[20]
    assert not fisher_z(h, y, [f], alpha=0.05).independent
    assert gammas[20] + gamma_z(h, y, [f]) < 2 * beta
    assert d.accepted and [e.feature for e in d.evicted] == ["h"]
    assert d.evicted[0].reason is Reason.REDUNDANT and d.evicted[0].by == "f"
    assert "h" not in sel.selected() and "f" in sel.selected()


def test_a_weaker_redundant_arrival_leaves_and_names_the_member() -> None:
    X, y, _ = suppressor_stream()
    sel = start(y)
    t = sel._tests
    h = replace(t.member("h", X[2]), gamma=5.0)
    f = replace(t.member("f", X[3]), gamma=4.0)
    gamma_h, independent = t.given([h], f)
    assert not independent[0]  # a says much of y given b
    beta = (5.0 + float(gamma_h[0])) / 2 + 1.0  # the pair falls short of 2 beta
    sc = [h]
    d = sel._candidate(f, sc, beta)
    assert (d.accepted, d.reason, d.by) == (False, Reason.REDUNDANT, "h")
    assert [m.name for m in sc] == ["h"]


def test_a_redundant_pair_of_equal_relevance_drops_the_earlier_member() -> None:
    X, y, _ = suppressor_stream()
    sel = start(y)
    t = sel._tests
    h = replace(t.member("h", X[2]), gamma=5.0)
    f = replace(t.member("f", X[3]), gamma=5.0)
    gamma_h, _ = t.given([h], f)
    sc = [h]
    d = sel._candidate(f, sc, (5.0 + float(gamma_h[0])) / 2 + 1.0)
    assert d.accepted and [e.feature for e in d.evicted] == ["h"]
    assert [m.name for m in sc] == ["f"]


def test_a_member_independent_of_y_given_the_arrival_is_passed_over() -> None:
    # A copy of a member: given it, the member's residual is 0 (not testable,
    # independent), so neither leaves.
    X, y, _ = suppressor_stream()
    sel = start(y)
    t = sel._tests
    h = replace(t.member("h", X[2]), gamma=5.0)
    f = replace(t.member("f", X[2].copy()), gamma=6.0)
    sc = [h]
    d = sel._candidate(f, sc, 100.0)
    assert d.accepted and not d.evicted and [m.name for m in sc] == ["h", "f"]


def test_a_full_pool_is_flushed_and_a_pair_strong_together_joins() -> None:
    # k1 = -3, k2 = 3: with fewer than 11 relevances no value is 3 deviations from
    # their mean, so every arrival after the first two waits in the pool.
    X, y, names = suppressor_stream()
    sel = start(y, k1=-3.0, k2=3.0, pool_size=3)
    d = sel.learn_features(names, X)
    assert [x.reason for x in d[2:]] == [Reason.UNDETERMINED] * 3
    gammas = [gamma_z(x, y) for x in X]
    _, beta = thresholds(gammas, -3.0, 3.0)
    a, b = X[2], X[3]
    assert not fisher_z(b, y, [a], alpha=0.05).independent
    assert gammas[2] + gamma_z(a, y, [b]) > 2 * beta
    assert sel.state.selected == ("n0", "n1", "a", "b")
    assert sel.state.pool == () and sel.state.flushes == 1
    assert sel.selected() == ("n0", "n1", "a", "b")
    # The status counts the flush's tests: a against b and c, b against c.
    assert sel.status()["tests_performed"] == 3


def test_the_selection_shows_what_a_flush_of_the_pool_would_add() -> None:
    X, y, names = suppressor_stream()
    sel = start(y, k1=-3.0, k2=3.0, pool_size=100)
    sel.learn_features(names, X)
    assert sel.state.selected == ("n0", "n1") and sel.state.pool == ("a", "b", "c")
    before = blob(sel)
    assert sel.selected() == ("n0", "n1", "a", "b")
    assert [f.score for f in sel.selected_features()][2:] == list(sel.state.pool_dep[:2])
    # Looking changes nothing and counts no tests.
    assert blob(sel) == before and sel.status()["tests_performed"] == 0
    # A finished stream gives the batch result: what a flush at the end gives.
    flushed = start(y, k1=-3.0, k2=3.0, pool_size=3)
    flushed.learn_features(names, X)
    assert flushed.selected() == sel.selected()


def test_pool_features_that_find_no_partner_are_gone_after_the_flush() -> None:
    rng = np.random.default_rng(7)
    y = rng.normal(size=40)
    sel = start(y, k1=-3.0, k2=3.0, pool_size=4)
    sel.learn_features([f"x{i}" for i in range(6)], rng.normal(size=(6, 40)))
    assert sel.state.flushes == 1 and sel.state.pool == ()
    assert sel.selected() == ("x0", "x1")


# ----------------------------------------------------------------------- measures


def test_mi_measure_scores_mutual_information_and_pairs_xor() -> None:
    # y = a xor b: each alone carries no information, together all of it.
    rng = np.random.default_rng(3)
    n = 80
    a, b = rng.integers(0, 2, (2, n))
    y = (a ^ b).astype(float)
    X = np.vstack([rng.integers(0, 2, (2, n)), a, b, rng.integers(0, 2, n)]).astype(float)
    sel = start(y, measure="mi", k1=-3.0, k2=3.0, pool_size=3)
    d = sel.learn_features(["n0", "n1", "a", "b", "c"], X)
    for x, col in zip(d, X, strict=True):
        assert x.score is not None
        assert math.isclose(x.score, mutual_information(col, y), rel_tol=1e-12, abs_tol=1e-15)
    assert sel.selected() == ("n0", "n1", "a", "b")
    assert OSSFSDD.score_kind(sel.params).kind == "mutual_information"


def test_mi_measure_refuses_non_codes() -> None:
    from featurestream.errors import InvalidInput

    sel = start([0.0, 1, 0, 1], measure="mi")
    with pytest.raises(InvalidInput):
        sel.learn_feature("x", [0.5, 1, 2, 3])


def test_multiclass_relevance_is_the_largest_over_the_class_indicators() -> None:
    rng = np.random.default_rng(9)
    n = 60
    labels = rng.integers(0, 3, n)
    x = (labels == 2) + rng.normal(size=n)
    t = resolve_target(labels.tolist(), "multiclass")
    sel = start(t.y, t.n_classes)
    d = sel.learn_feature("x", x)
    want = max(gamma_z(x, (labels == k).astype(float)) for k in range(3))
    assert d.score is not None and math.isclose(d.score, want, rel_tol=1e-9)


# ----------------------------------------------------------------------- properties


def _run(y: Any, X: np.ndarray, n_classes: int = 0, **params: Any) -> tuple[Any, ...]:
    sel = start(y, n_classes, **params)
    d = sel.learn_features([f"x{i}" for i in range(X.shape[0])], X)
    return tuple(d), sel.selected_features()


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["z", "mi"]), st.integers(3, 5))
def test_relabelling_the_classes_changes_nothing(seed: int, measure: str, k: int) -> None:
    rng = np.random.default_rng(seed)
    n = 40
    labels = rng.integers(0, k, n)
    X = rng.integers(0, 3, (10, n)).astype(float)
    X[3] = (X[3] + labels) % 3
    X[6] = (labels == 1) + X[6]
    perm = rng.permutation(k)
    out = []
    for lab in (labels, perm[labels] + 10):
        t = resolve_target(lab.tolist(), "multiclass" if k > 2 else "binary")
        out.append(_run(t.y, X, t.n_classes, measure=measure, k1=0.0, k2=0.5, pool_size=3))
    assert out[0] == out[1]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["z", "mi"]))
def test_swapping_the_two_labels_of_a_binary_target_changes_nothing(
    seed: int, measure: str
) -> None:
    rng = np.random.default_rng(seed)
    n = 30
    y = rng.integers(0, 2, n).astype(float)
    X = rng.integers(0, 3, (10, n)).astype(float)
    X[2] = (X[2] + y) % 3
    a = _run(y, X, measure=measure, k1=0.0, k2=0.5, pool_size=3)
    b = _run(1.0 - y, X, measure=measure, k1=0.0, k2=0.5, pool_size=3)
    assert a == b


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.integers(1, 13), max_size=4),
    st.sampled_from([{}, {"measure": "mi"}, {"k1": -3.0, "k2": 3.0, "pool_size": 3}]),
)
def test_batches_and_replay_give_the_same_bits(
    seed: int, cuts: list[int], params: dict[str, Any]
) -> None:
    rng = np.random.default_rng(seed)
    n = 24
    y = rng.integers(0, 2, n).astype(float)
    X = rng.integers(0, 3, (14, n)).astype(float)
    X[4] = (X[4] + y) % 3
    X[8] = X[4]
    names = [f"x{i}" for i in range(14)]
    bounds = [0, *sorted(set(cuts)), 14]
    assert_round_trip_and_replay(lambda: start(y, **params), names, X, bounds)
    one = start(y, **params)
    for i in range(14):
        one.learn_features(names[i : i + 1], X[i : i + 1])
    whole = start(y, **params)
    whole.learn_features(names, X)
    assert blob(one) == blob(whole) and one.selected_features() == whole.selected_features()
