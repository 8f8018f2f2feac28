"""SAOLA on hand-checkable streams, every edge case of
docs/algorithms/saola.md, and the public vectors."""

from __future__ import annotations

import numpy as np
import pytest

from featurestream.errors import InvalidInput, InvalidParameter
from featurestream.selectors import Reason
from featurestream.selectors.saola import SAOLA, SAOLAParams
from tests import support

Y8 = np.arange(1.0, 9.0)
# With y = 1..8 (centred -3.5..3.5, sum of squares 42):
A = [1, 2, 3, 4, 5, 6, 8, 7]  # swaps the last two values:      r(A, y) = 41/42 = 0.976
B = [2, 1, 3, 4, 5, 6, 8, 7]  # swaps the first two as well:     r(B, y) = 40/42 = 0.952
# and r(A, B) = 41/42. At alpha = 0.05, n = 8: significant iff |r| >= tanh(1.96/sqrt(5)) = 0.704.
NOISE = [1, -1, 1, -1, 1, -1, 1, -1]  # r(NOISE, y) = -4 / sqrt(42 * 8) = -0.218


def start(y: np.ndarray = Y8, **params: object) -> SAOLA:
    return SAOLA.start(SAOLAParams.from_mapping(params), y)


def test_saola_rejects_feature_explained_by_a_stronger_member() -> None:
    sel = start(alpha=0.05)
    a, b = sel.learn_features(["a", "b"], [A, B])
    assert a.accepted and a.score == pytest.approx(41 / 42)
    assert (b.accepted, b.reason, b.by) == (False, Reason.REDUNDANT, "a")
    assert b.score == pytest.approx(40 / 42)
    assert sel.selected() == ("a",)


def test_saola_evicts_weaker_feature() -> None:
    # B first (dep 40/42), then A (dep 41/42): t(A, B) = 41/42 > dep_B, so B goes.
    sel = start(alpha=0.05)
    b, a = sel.learn_features(["b", "a"], [B, A])
    assert b.accepted
    assert a.accepted and [(e.feature, e.reason, e.by) for e in a.evicted] == [
        ("b", Reason.REDUNDANT, "a")
    ]
    assert sel.selected() == ("a",)
    assert sel.status()["features_evicted"] == 1


def test_saola_keeps_feature_when_t_only_ties_dep() -> None:
    # The first column equals y, so t(y-copy, B) == dep_B exactly: "t > dep_f" fails, B stays.
    sel = start(alpha=0.05)
    first, b = sel.learn_features(["ycopy", "b"], [Y8, B])
    assert first.accepted and b.accepted
    assert sel.selected() == ("ycopy", "b")


def test_saola_rejects_irrelevant_feature_with_its_score() -> None:
    sel = start(alpha=0.05)
    (d,) = sel.learn_features(["noise"], [NOISE])
    assert (d.accepted, d.reason) == (False, Reason.IRRELEVANT)
    assert d.score == pytest.approx(4 / np.sqrt(42 * 8), abs=1e-15)


@pytest.mark.parametrize("column", [[3.0] * 8, [0.0] * 8, [0.1] * 8])
def test_saola_rejects_constant_column_first(column: list[float]) -> None:
    sel = start(alpha=0.05)
    (d,) = sel.learn_features(["c"], [column])
    assert (d.accepted, d.reason, d.score) == (False, Reason.CONSTANT, None)


def test_saola_with_three_rows_cannot_test_anything() -> None:
    # n - |S| - 3 = 0: not testable, which counts as independent, hence irrelevant.
    sel = start(np.array([1.0, 2.0, 3.0]), alpha=0.5)
    (d,) = sel.learn_features(["x"], [[1.0, 2.0, 3.0]])
    assert (d.accepted, d.reason) == (False, Reason.IRRELEVANT)


def test_saola_skips_pairs_that_are_independent() -> None:
    # Two relevant columns, uncorrelated with each other: neither affects the other.
    rng = np.random.default_rng(0)
    u, v = rng.normal(size=(2, 400))
    y = u + v
    sel = start(y)
    du, dv = sel.learn_features(["u", "v"], [u, v])
    assert du.accepted and dv.accepted and not dv.evicted


def test_saola_compare_scans_s_in_order_and_evicts_before_rejecting() -> None:
    sel = start(alpha=0.05)
    # g1 is weaker and explained by f (t = 0.6 > dep_g1 = 0.3): evicted; then g2 rejects f.
    first, evict = sel._compare(0.5, np.array([0.3, 0.9]), np.array([0.6, 0.8]))
    assert first == 1 and evict.tolist() == [True, False]
    # Rejected at the first member: the scan stops, nothing is evicted.
    first, evict = sel._compare(0.5, np.array([0.9, 0.3]), np.array([0.8, 0.6]))
    assert first == 0 and evict.tolist() == [False, False]
    # Untestable pairs (NaN) are skipped.
    first, evict = sel._compare(0.5, np.array([0.9, 0.3]), np.array([np.nan, 0.6]))
    assert first is None and evict.tolist() == [False, True]


def test_saola_max_bound_uses_the_larger_dep() -> None:
    saola, smax = start(alpha=0.05), start(alpha=0.05, bound="max")
    # dep_f = 0.5, dep_g = 0.9, t = 0.7: SAOLA rejects (0.7 > 0.5); SAOLA-max needs t > 0.9.
    assert saola._compare(0.5, np.array([0.9]), np.array([0.7]))[0] == 0
    assert smax._compare(0.5, np.array([0.9]), np.array([0.7]))[0] is None
    # dep_f = 0.9 > dep_g = 0.5, t = 0.7: SAOLA evicts g (0.7 > 0.5); SAOLA-max does not.
    assert saola._compare(0.9, np.array([0.5]), np.array([0.7]))[1].tolist() == [True]
    assert smax._compare(0.9, np.array([0.5]), np.array([0.7]))[1].tolist() == [False]


def test_saola_max_features_keeps_the_most_relevant() -> None:
    rng = np.random.default_rng(1)
    u, v = rng.normal(size=(2, 300))
    y = 2 * u + v  # u is more relevant than v; u and v are independent
    sel = start(y, max_features=1)
    dv, du = sel.learn_features(["v", "u"], [v, u])
    assert dv.accepted
    assert du.accepted and [(e.feature, e.reason) for e in du.evicted] == [
        ("v", Reason.MAX_FEATURES)
    ]
    # A weaker newcomer is turned away by the cap.
    sel = start(y, max_features=1)
    du, dv = sel.learn_features(["u", "v"], [u, v])
    assert du.accepted and (dv.accepted, dv.reason) == (False, Reason.MAX_FEATURES)
    assert sel.selected() == ("u",)


def test_duplicate_column_fisher_z_rejects_but_su_keeps() -> None:
    # fisher_z: dep_g >= dep_f (equal) and t = 1 > dep_f: the copy is redundant.
    y = np.array([0, 1, 0, 1, 1, 0, 1, 0, 1, 1] * 3, dtype=float)
    x = np.array([0, 1, 0, 1, 1, 0, 1, 1, 1, 0] * 3, dtype=float)
    fz = start(y, alpha=0.05)
    first, copy = fz.learn_features(["x", "x2"], [x, x])
    assert first.accepted and (copy.reason, copy.by) == (Reason.REDUNDANT, "x")
    # su: rejection needs dep_g > dep_f strictly; equal SU keeps both.
    su = start(y, test="su")
    first, copy = su.learn_features(["x", "x2"], [x, x])
    assert first.accepted and copy.accepted


def test_su_delta_threshold_rejects_weak_features() -> None:
    y = np.array([0, 1, 0, 1, 1, 0, 1, 0], dtype=float)
    x = np.array([0, 1, 0, 1, 1, 0, 0, 1], dtype=float)
    from featurestream.stats.entropy import symmetrical_uncertainty

    su = symmetrical_uncertainty(x, y)
    assert 0 < su < 0.5
    assert start(y, test="su", delta=su / 2).learn_feature("x", x).accepted
    d = start(y, test="su", delta=su).learn_feature("x", x)  # SU <= delta: irrelevant
    assert (d.accepted, d.reason) == (False, Reason.IRRELEVANT)


def test_su_needs_integer_codes() -> None:
    with pytest.raises(InvalidInput):
        start(np.array([0.0, 1.5, 1.0, 0.0]), test="su")
    sel = start(np.array([0.0, 1.0, 1.0, 0.0]), test="su")
    with pytest.raises(InvalidInput):
        sel.learn_feature("x", [0.0, -1.0, 1.0, 0.0])


@pytest.mark.parametrize(
    ("names", "X", "field"),
    [
        (["a"], [[1.0, 2, 3, 4, 5, 6, 7, np.nan]], "features[0].values"),
        (["a"], [[1.0, 2, 3, 4, 5, 6, 7, np.inf]], "features[0].values"),
        (["a"], [[1.0, 2, 3]], "features"),
        (["a", "a"], [A, B], "features"),
        (["a", "b"], [A], "features"),
    ],
)
def test_saola_invalid_input_changes_nothing(
    names: list[str], X: list[list[float]], field: str
) -> None:
    sel = start(alpha=0.05)
    sel.learn_feature("first", B)
    before = sel.snapshot()
    with pytest.raises(InvalidInput) as info:
        sel.learn_features(names, X)
    assert info.value.field == field
    assert sel.snapshot() is before


def test_saola_leaves_inputs_alone() -> None:
    X = np.array([A, B, NOISE], dtype=float)
    y = Y8.copy()
    keep_X, keep_y = X.copy(), y.copy()
    sel = start(y, alpha=0.05)
    sel.learn_features(["a", "b", "n"], X)
    assert np.array_equal(X, keep_X) and np.array_equal(y, keep_y)


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"alpha": 0}, "alpha"),
        ({"alpha": 1}, "alpha"),
        ({"alpha": "0.1"}, "alpha"),
        ({"test": "g2"}, "test"),
        ({"bound": "min"}, "bound"),
        ({"max_features": 0}, "max_features"),
        ({"max_features": 1.5}, "max_features"),
        ({"delta": 1.0}, "delta"),
        ({"alfa": 0.1}, "alfa"),
    ],
)
def test_saola_rejects_bad_params(params: dict[str, object], parameter: str) -> None:
    with pytest.raises(InvalidParameter) as info:
        SAOLAParams.from_mapping(params)
    assert info.value.parameter == parameter


def test_saola_param_message_shape() -> None:
    with pytest.raises(
        InvalidParameter,
        match=r"The 'alpha' parameter of SAOLA must be a float "
        r"in the range \(0, 1\)\. Got 1\.5 instead\.",
    ):
        SAOLAParams(alpha=1.5)


@pytest.mark.parametrize("key", ["saola", "saola_max"])
def test_public_vectors_wdbc(key: str) -> None:
    case = support.expected()["feature_streams"][key]
    X, y = support.wdbc()
    sel = SAOLA.start(SAOLAParams.from_mapping(case["params"]), y)
    sel.learn_features(support.names(30), X)
    assert sel.selected() == tuple(f"f{i}" for i in case["selected"])
    # One column at a time gives the same.
    one = SAOLA.start(SAOLAParams.from_mapping(case["params"]), y)
    for i in range(30):
        one.learn_feature(f"f{i}", X[i])
    assert one.selected() == sel.selected()


def test_public_vector_discrete_su() -> None:
    case = support.expected()["discrete_feature_streams"]["saola_su"]
    X, y = support.discrete()
    sel = SAOLA.start(SAOLAParams.from_mapping(case["params"]), y)
    sel.learn_features(support.names(30), X)
    assert sel.selected() == tuple(f"f{i}" for i in case["selected"])


def test_discrete_codes_are_capped_so_tables_stay_small() -> None:
    from featurestream.selectors.checks import MAX_LEVELS

    y = np.array([0.0, 1.0, 1.0, 0.0])
    sel = start(y, test="su")
    with pytest.raises(InvalidInput, match="levels"):
        sel.learn_feature("x", [0.0, float(MAX_LEVELS), 1.0, 0.0])
    assert sel.learn_feature("x", [0.0, float(MAX_LEVELS - 1), 1.0, 0.0]).feature == "x"
