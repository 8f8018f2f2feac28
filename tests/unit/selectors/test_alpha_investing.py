"""Alpha-investing: conformance, hand-checked decisions, lstsq reference, properties."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from featurestream.errors import InvalidParameter
from featurestream.selectors import REGISTRY, Reason, alpha_investing, alpha_investing_fit
from featurestream.selectors.alpha_investing import AlphaInvesting, AlphaInvestingParams
from featurestream.selectors.alpha_investing_fit import span_tolerance
from tests.unit.selectors.common import assert_round_trip_and_replay, blob

DATA = Path(__file__).resolve().parents[2] / "data"
Y6 = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])


@pytest.fixture(autouse=True, scope="module")
def _registered():
    # The registry does not list the selector yet; codec.decode looks it up there.
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(REGISTRY, AlphaInvesting.name, AlphaInvesting)
        yield


def start(y, **params):
    """A stream under the published rule (sigma2 = SSE_old / n) unless told otherwise:
    the conformance vectors and hand-checked numbers below are that rule's."""
    params.setdefault("variance", "reference")
    return AlphaInvesting.start(AlphaInvestingParams(**params), y)


# --------------------------------------------------------------------------- conformance


def load_wdbc():
    data = np.loadtxt(DATA / "wdbc.csv", delimiter=",", skiprows=1)
    return data[:, :30], data[:, 30]


@pytest.mark.parametrize("batch", [1, 7, 30])
def test_alpha_investing_wdbc_conformance(batch):
    expected = json.loads((DATA / "expected.json").read_text())["feature_streams"][
        "alpha_investing"
    ]
    X, y = load_wdbc()
    sel = start(y, **expected["params"])
    names = [f"f{j}" for j in range(30)]
    for a in range(0, 30, batch):
        sel.learn_features(names[a : a + batch], X[:, a : a + batch].T)
    assert [int(x[1:]) for x in sel.selected()] == expected["selected"]
    assert sel.status()["features_tested"] == 30
    assert sel.status()["selected_count"] == len(expected["selected"])


# --------------------------------------------------------------------------- hand-checked


def test_alpha_investing_hand_checked_stream():
    # y = 1..6, centred: -2.5 -1.5 -0.5 0.5 1.5 2.5, SST = 17.5.
    # a = [1,2,3,4,6,5], centred -2.5 -1.5 -0.5 0.5 2.5 1.5: cross product 16.5,
    #   SSE_new = 17.5 - 16.5^2/17.5, so (SSE_new - SSE_old)/(2 * 17.5/6)
    #   = -(272.25/17.5) / (35/6) = -2.66694; p = 0.069465 < alpha_1 = 0.5/2 = 0.25:
    #   accepted, w = 0.5 + 0.5 - 0.25 = 0.75.
    # c constant: i = 2, alpha_2 = 0.75/4 = 0.1875, w = 0.5625.
    # b = 2a + 1 is in span[1, a]: p = 1 >= alpha_3 = 0.5625/6 = 0.09375, w = 0.46875.
    sel = start(Y6)
    d = sel.learn_features(
        ["a", "c", "b"], [[1, 2, 3, 4, 6, 5], [7, 7, 7, 7, 7, 7], [3, 5, 7, 9, 13, 11]]
    )
    assert [x.accepted for x in d] == [True, False, False]
    assert [x.reason for x in d] == [None, Reason.CONSTANT, Reason.NOT_SIGNIFICANT]
    assert d[0].score == pytest.approx(math.exp(-(16.5**2 / 17.5) / (2 * 17.5 / 6)), rel=1e-12)
    assert d[1].score is None
    assert d[2].score == 1.0
    assert all(not x.evicted for x in d)
    assert sel.selected() == ("a",)
    assert sel.wealth == pytest.approx(0.46875, abs=1e-15)
    assert sel.status() == {
        "features_seen": 3,
        "features_evicted": 0,
        "wealth": sel.wealth,
        "features_tested": 3,
        "features_accepted": 1,
        "features_rejected": 2,
        "selected_count": 1,
        "sse": pytest.approx(17.5 - 16.5**2 / 17.5, rel=1e-12),
    }


def test_alpha_investing_first_feature_is_i_equal_1():
    # b = [2,1,3,6,4,5], centred -1.5 -2.5 -0.5 2.5 0.5 1.5: cross product with y
    # 13.5, r^2 = 13.5^2 / 17.5^2 = 0.5951, p = exp(-6 r^2 / 2) = 0.1677.
    # Tested as feature 1: alpha_1 = 0.5/2 = 0.25 > p, accepted. An implementation
    # that counts the intercept as feature 1 tests it at 0.5/4 = 0.125 and rejects.
    sel = start(Y6)
    (d,) = sel.learn_features(["b"], [[2, 1, 3, 6, 4, 5]])
    assert d.score == pytest.approx(math.exp(-3 * (13.5 / 17.5) ** 2), rel=1e-12)
    assert d.accepted
    assert sel.wealth == pytest.approx(0.5 + 0.5 - 0.25, abs=1e-15)


def test_alpha_investing_constant_columns_count_and_cost_wealth():
    # Same a as above (p = 0.069465). After a constant column it is feature i = 2 with
    # w = 0.5 - 0.5/2 = 0.25, alpha_2 = 0.25/4 = 0.0625 < p: rejected. Not counting
    # the constant (alpha = 0.25) or not charging it (alpha = 0.5/4 = 0.125)
    # would accept it.
    sel = start(Y6)
    d = sel.learn_features(["c", "a"], [[3, 3, 3, 3, 3, 3], [1, 2, 3, 4, 6, 5]])
    assert d[0].reason is Reason.CONSTANT
    assert not d[1].accepted and d[1].reason is Reason.NOT_SIGNIFICANT
    assert d[1].score == pytest.approx(math.exp(-(16.5**2 / 17.5) / (2 * 17.5 / 6)), rel=1e-12)
    assert sel.status()["features_tested"] == 2
    assert sel.wealth == pytest.approx(0.25 - 0.0625, abs=1e-15)


def test_alpha_investing_span_tolerance_is_tight():
    # y = a + e with e orthogonal to [1, a]. x2 = a + 1e-7 e adds the direction e
    # (relative size 1e-7 >> the span tolerance), which explains y exactly:
    # SSE_new = 0, p = exp(-n/2) = exp(-3) = 0.0498 < alpha_2 = 0.75/4. A tolerance
    # of 1e-6 would call x2 collinear with a and reject it.
    a = np.array([1.0, 2.0, 3.0, 4.0, 6.0, 5.0])
    e = np.array([1.0, -1.0, -1.0, 1.0, 0.0, 0.0])
    e -= e.mean()
    ac = a - a.mean()
    e -= (e @ ac) / (ac @ ac) * ac
    y = a + e
    sel = start(y)
    d = sel.learn_features(["a", "x2", "dup"], [a, a + 1e-7 * e, 3.0 * a - 2.0])
    assert d[0].accepted
    assert d[1].accepted
    assert d[1].score == pytest.approx(math.exp(-3.0), rel=1e-6)
    assert d[2].reason is Reason.NOT_SIGNIFICANT and d[2].score == 1.0
    assert span_tolerance(6) < 1e-13


def test_alpha_investing_perfect_fit_rejects_with_p_1():
    # y = 2a + 1 is fitted exactly once a is in: SSE_old = 0 (up to rounding), so
    # sigma2 = 0 and step 2 reads 0/0. Convention: p = 1, rejected, no NaN.
    a = np.array([1.0, 2.0, 3.0, 4.0, 6.0, 5.0])
    sel = start(2.0 * a + 1.0)
    d = sel.learn_features(["a", "z"], [a, [1, -1, 1, -1, 1, -1]])
    assert d[0].accepted and d[0].score == pytest.approx(math.exp(-3.0), rel=1e-9)
    assert not d[1].accepted and d[1].score == 1.0
    assert d[1].reason is Reason.NOT_SIGNIFICANT


def test_alpha_investing_constant_target_accepts_nothing():
    sel = start(np.full(6, 4.0))
    d = sel.learn_features(["a"], [[1, 2, 3, 4, 6, 5]])
    assert not d[0].accepted and d[0].score == 1.0
    assert math.isfinite(sel.wealth)


@pytest.mark.parametrize(
    ("name", "value"), [("w0", 0.0), ("w0", 1.5), ("dw", -0.1), ("dw", 2.0), ("w0", "x")]
)
def test_alpha_investing_rejects_bad_params(name, value):
    with pytest.raises(InvalidParameter) as err:
        AlphaInvestingParams(**{name: value})
    assert err.value.parameter == name


def test_alpha_investing_leaves_inputs_alone():
    rng = np.random.default_rng(3)
    y = rng.normal(size=20)
    X = rng.normal(size=(4, 20))
    y0, X0 = y.copy(), X.copy()
    sel = start(y)
    sel.learn_features(list("abcd"), X)
    assert np.array_equal(y, y0) and np.array_equal(X, X0)


# --------------------------------------------------------------------------- lstsq reference


def test_alpha_investing_matches_lstsq_at_every_prefix():
    rng = np.random.default_rng(7)
    n, d = 60, 25
    X = rng.normal(size=(d, n)) * rng.uniform(0.1, 50.0, size=(d, 1)) + rng.normal(size=(d, 1))
    X[5] = X[1] - 2.0 * X[3]  # in the span once 1 and 3 are in
    X[9] = 4.0  # constant
    y = X[0] - 0.02 * X[3] + 0.3 * X[7] + 0.5 * rng.normal(size=n) + 10.0
    sel = start(y, w0=1.0, dw=1.0)
    wealth = 1.0
    for j in range(d):
        before = sel.state
        alpha = wealth / (2 * (j + 1))
        (dec,) = sel.learn_features([f"x{j}"], X[j])
        S = [int(s[1:]) for s in sel.selected()]
        A = np.column_stack([np.ones(n), *(X[k] for k in S)])
        coef = np.linalg.lstsq(A, y, rcond=None)[0]
        r_ref = y - A @ coef
        sse_ref = float(r_ref @ r_ref)
        st_ = sel.state
        assert st_.sse == pytest.approx(sse_ref, rel=1e-9)
        assert np.abs(st_.residual - r_ref).max() <= 1e-9 * np.abs(r_ref).max()
        # Q is an orthonormal basis of span[1, S].
        assert st_.Q.shape == (1 + len(S), n)
        assert np.abs(st_.Q @ st_.Q.T - np.eye(1 + len(S))).max() < 1e-12
        assert np.abs(A - st_.Q.T @ (st_.Q @ A)).max() < 1e-9 * np.abs(A).max()
        # The p-value of this arrival, from two fresh fits.
        if dec.reason is not Reason.CONSTANT:
            B = np.column_stack([np.ones(n), *(X[k] for k in S if k != j), X[j]])
            r_new = y - B @ np.linalg.lstsq(B, y, rcond=None)[0]
            diff = float(r_new @ r_new) - before.sse
            assert math.log(dec.score) == pytest.approx(
                diff / (2 * before.sse / n), rel=1e-6, abs=1e-9
            )
        # Wealth arithmetic of step 3.
        wealth = wealth + 1.0 - alpha if dec.accepted else wealth - alpha
        assert sel.wealth == pytest.approx(wealth, rel=1e-14)
        assert dec.accepted == (dec.score is not None and dec.score < alpha)
    assert sel.status()["features_tested"] == d
    assert "x5" not in sel.selected() and "x9" not in sel.selected()


# --------------------------------------------------------------------------- properties

N = 9
values = st.one_of(
    st.integers(-3, 3).map(float),
    st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
)
columns = st.lists(arrays(np.float64, N, elements=values), min_size=1, max_size=8)
params = st.sampled_from(
    [{}, {"w0": 1.0, "dw": 1.0}, {"w0": 0.05, "dw": 0.0}, {"variance": "residual", "w0": 1.0}]
)


def with_repeats(cols, data):
    """Some arrivals repeat or rescale an earlier one, so in-span columns occur."""
    out = list(cols)
    for k in range(len(out)):
        if k and data.draw(st.booleans()):
            src = data.draw(st.integers(0, k - 1))
            out[k] = out[src] * data.draw(st.sampled_from([1.0, -2.0, 0.5])) + 1.0
    return np.array(out)


@given(y=arrays(np.float64, N, elements=values), cols=columns, p=params, data=st.data())
def test_alpha_investing_batch_equals_singles(y, cols, p, data):
    X = with_repeats(cols, data)
    names = [f"f{k}" for k in range(len(X))]
    one = start(y, **p)
    singles = [one.learn_feature(nm, x) for nm, x in zip(names, X, strict=True)]
    cut = data.draw(st.integers(0, len(X)))
    many = start(y, **p)
    batched = many.learn_features(names[:cut], X[:cut]) + many.learn_features(names[cut:], X[cut:])
    assert batched == singles
    assert blob(many) == blob(one)
    for field in ("Q", "residual", "p_values", "y"):
        assert np.array_equal(getattr(many.state, field), getattr(one.state, field))


@given(y=arrays(np.float64, N, elements=values), cols=columns, p=params, data=st.data())
def test_alpha_investing_codec_round_trip_and_replay(y, cols, p, data):
    X = with_repeats(cols, data)
    names = [f"f{k}" for k in range(len(X))]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(X)), max_size=3)))
    assert_round_trip_and_replay(lambda: start(y, **p), names, X, [0, *cuts, len(X)])


@given(y=arrays(np.float64, N, elements=values), cols=columns, p=params, data=st.data())
def test_alpha_investing_wealth_stays_positive(y, cols, p, data):
    X = with_repeats(cols, data)
    sel = start(y, **p)
    for k, x in enumerate(X):
        w = sel.wealth
        i = k + 1
        (dec,) = sel.learn_features([f"f{k}"], x[None, :])
        assert sel.wealth > 0.0
        # alpha_i <= 1/2 under the parameter bounds, so p = 1 is never accepted.
        assert w / (2 * i) <= 0.5
        if dec.accepted:
            assert dec.score is not None and dec.score < w / (2 * i)
    assert sel.status()["features_tested"] == len(X)


# --------------------------------------------------------------------------- sparse path


def _lstsq_log_p(y, S_cols, x, sse_old):
    n = y.shape[0]
    B = np.column_stack([np.ones(n), *S_cols, x])
    r_new = y - B @ np.linalg.lstsq(B, y, rcond=None)[0]
    return (float(r_new @ r_new) - sse_old) / (2 * sse_old / n)


def test_alpha_investing_sparse_batch_matches_dense_singles_and_lstsq():
    # Sparse binary columns (the dorothea shape) are tested from their non-zeros;
    # columns mostly inside span[1, S] (a near-copy of an accepted column, in the
    # same batch) go through dense Gram-Schmidt. Either way: one sparse batch
    # decides bit for bit like dense columns one at a time, and like lstsq.
    import scipy.sparse as sp

    rng = np.random.default_rng(11)
    n, d = 200, 120
    X = (rng.random((d, n)) < 0.05).astype(float)
    X[3] = (rng.random(n) < 0.5).astype(float)
    y = 3.0 * X[3] + rng.normal(size=n) * 0.5
    X[4] = X[3].copy()
    X[4][:2] += 0.1  # almost all inside span[1, x3]: the dense path
    X[7] = 2.0 * X[3] + 1.0  # exactly in the span
    X[8] = 0.0  # constant
    names = [f"x{j}" for j in range(d)]
    one = start(y, w0=1.0, dw=1.0)
    singles = []
    for j in range(d):
        before = one.state
        S_cols = [X[int(s[1:])] for s in one.selected()]
        (dec,) = one.learn_features([names[j]], X[j][None, :])
        singles.append(dec)
        if dec.reason is Reason.CONSTANT or dec.score == 1.0:
            continue
        ref = _lstsq_log_p(y, S_cols, X[j], before.sse)
        assert math.log(dec.score) == pytest.approx(ref, rel=1e-9, abs=1e-12)
    many = start(y, w0=1.0, dw=1.0)
    dense_rows = []
    real = alpha_investing_fit._dense_exponents

    def spy(P, *args):
        dense_rows.append(P.shape[0])
        return real(P, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(alpha_investing_fit, "_dense_exponents", spy)
        batched = many.learn_features(names, sp.csr_matrix(X))
    assert sum(dense_rows) == 2  # x4 and x7, after x3 joined the basis mid-batch
    assert batched == singles
    assert blob(many) == blob(one)
    assert singles[3].accepted and not singles[4].accepted
    assert singles[7].score == 1.0 and singles[8].reason is Reason.CONSTANT


# --------------------------------------------------------------------------- residual variance


def test_the_default_is_the_residual_variance_rule():
    assert AlphaInvestingParams().variance == "residual"
    # A stream stored before the parameter existed keeps the published rule.
    assert AlphaInvestingParams.from_stored({"w0": 0.5, "dw": 0.5}).variance == "reference"


def test_residual_variance_divides_by_the_degrees_of_freedom_by_hand():
    # 14 rows, y = 1..14 (SST = 227.5), column a = y with rows 13 and 14 swapped:
    # centred cross product with y = 227.5 - 1 = 226.5. SSE_new - SSE_old =
    # -226.5^2 / 227.5; sigma2 = SSE_old / (n - |S| - 1) = 227.5 / 13, where the
    # published rule divides by n = 14.
    y = np.arange(1.0, 15.0)
    a = y.copy()
    a[[12, 13]] = a[[13, 12]]
    drop = 226.5**2 / 227.5
    for variance, dof in (("residual", 13), ("reference", 14)):
        (d,) = start(y, variance=variance).learn_features(["a"], [a])
        assert d.score == pytest.approx(math.exp(-drop / (2 * 227.5 / dof)), rel=1e-12)
        assert d.accepted


def test_residual_variance_accepts_nothing_that_leaves_fewer_than_the_margin():
    # n = 14 rows: [1, S, f] must leave n - (|S| + 2) >= 10 residual degrees of
    # freedom, so at most 3 features are accepted (|S| = 2 before the third),
    # however strong the rest are; the published rule takes all six.
    rng = np.random.default_rng(2)
    X = rng.normal(size=(6, 14))
    y = X.T @ np.array([27.0, 9.0, 3.0, 1.0, 0.3, 0.1]) + 0.01 * rng.normal(size=14)
    names = [f"x{k}" for k in range(6)]
    assert alpha_investing.RESIDUAL_MARGIN == 10
    sound = start(y, variance="residual")
    d = sound.learn_features(names, X)
    assert sound.selected() == ("x0", "x1", "x2")
    # x3 would pass its test but the fit is saturated: wealth after three
    # acceptances 0.5 + 3 * 0.5 - (0.25 + 0.1875 + 1.0625 / 6), alpha_4 = that / 8.
    alpha_4 = (2.0 - 0.25 - 0.1875 - 1.0625 / 6) / 8
    assert d[3].score < alpha_4
    assert all(x.reason is Reason.NOT_SIGNIFICANT for x in d[3:])
    published = start(y, variance="reference")
    published.learn_features(names, X)
    assert published.selected() == tuple(names)


def test_pure_noise_at_saturation_selects_at_most_a_few():
    """n = 40 rows, 200 pure-noise columns, 20 streams. Alpha-investing's wealth
    rule bounds the expected number of false acceptances under the complete null
    by dw / (1 - dw) = 1 with the default w0 = dw = 0.5 (E V <= w0 + dw E V), so
    the streams average at most 1 and none selects more than 3."""
    counts = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        y, X = rng.normal(size=40), rng.normal(size=(200, 40))
        sel = AlphaInvesting.start(AlphaInvestingParams(), y)
        sel.learn_features([f"f{k}" for k in range(200)], X)
        counts.append(len(sel.selected()))
    assert np.mean(counts) <= 1.0 and max(counts) <= 3


def test_many_weak_copies_of_the_target_take_less_noise_than_the_published_rule():
    """lung_small-like: 40 rows, 100 noisy copies of y and 100 noise columns,
    shuffled. The published rule's SSE_old / n shrinks as the fit nears
    saturation, so it keeps accepting; the residual rule stays far below n."""
    totals = {"residual": [0, 0], "reference": [0, 0]}
    for seed in range(4):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(200, 40))
        y = rng.normal(size=40)
        X[:100] = y + rng.normal(size=(100, 40))
        order = rng.permutation(200)
        for variance, total in totals.items():
            sel = start(y, variance=variance)
            sel.learn_features([f"f{k}" for k in order], X[order])
            total[0] += len(sel.selected())
            total[1] += sum(int(f[1:]) >= 100 for f in sel.selected())
    assert totals["residual"][0] < totals["reference"][0]
    assert totals["residual"][1] < totals["reference"][1]
    assert totals["residual"][0] <= 4 * 40 // 2
