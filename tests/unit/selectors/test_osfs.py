"""OSFS and Fast-OSFS (docs/algorithms/osfs.md, "Exact rules").

Hand-checkable streams are built from the orthogonal +-1 patterns of an 8 x 8
Hadamard matrix, tiled four times (n = 32, every pattern still has mean 0 and
the patterns stay orthogonal):

    h1 = [1,-1,1,-1,1,-1,1,-1]  h2 = [1,1,-1,-1,1,1,-1,-1]
    h3 = [1,-1,-1,1,1,-1,-1,1]  h4 = [1,1,1,1,-1,-1,-1,-1]

    y = 2 h1,  f = y + h2,  g = f + h3,  noise = h4

so, with |h|^2 = 1 per row after scaling:

    corr(f, y) = 2/sqrt(5)  = 0.894   W = sqrt(32-3) atanh(0.894) = 7.77
    corr(g, y) = 2/sqrt(6)  = 0.816   W = sqrt(29) atanh(0.816)   = 6.17
    corr(noise, y) = 0                W = 0
    corr(g, y | f) = 0                (g - f = h3 is orthogonal to y and f)
    corr(f, y | g) = 6/sqrt(90) = 0.632   W = sqrt(32-1-3) atanh(0.632) = 3.94

and the critical value at alpha = 0.01 is Phi^-1(0.995) = 2.576: f and g are
relevant, noise is not, g is independent of y given f, f is not given g.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.linalg import hadamard

import featurestream.selectors
from featurestream import codec
from featurestream.errors import InvalidInput, InvalidParameter
from featurestream.selectors import Decision, Eviction, Reason
from featurestream.selectors.osfs import OSFS, FastOSFS, OSFSParams, OSFSState
from featurestream.selectors.osfs_bcf import BCF
from featurestream.stats.columns import cross_dots, standardize_rows
from featurestream.stats.discrete import g2_test
from featurestream.stats.fisher_z import fisher_z, partial_correlation

DATA = Path(__file__).resolve().parents[2] / "data"
CLASSES = [OSFS, FastOSFS]


@pytest.fixture(autouse=True, scope="module")
def _registered():
    """The registry does not list OSFS yet; codec.decode looks selectors up there."""
    with pytest.MonkeyPatch.context() as mp:
        for cls in CLASSES:
            mp.setitem(featurestream.selectors.REGISTRY, cls.name, cls)
        yield


def _load(name: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    d = np.loadtxt(DATA / name, delimiter=",", skiprows=1)
    X = np.ascontiguousarray(d[:, :-1].T)
    return X, d[:, -1].copy(), [f"f{i}" for i in range(X.shape[0])]


def _expected() -> dict:
    return json.loads((DATA / "expected.json").read_text())


H = hadamard(8)
_tile = lambda v: np.tile(v.astype(float), 4)  # noqa: E731
Y = _tile(2 * H[1])
F = Y + _tile(H[2])
G = F + _tile(H[3])
NOISE = _tile(H[4])


def _run(cls, names, X, y=Y, **params):
    sel = cls.start(OSFSParams(**params), y)
    return sel, sel.learn_features(names, np.asarray(X, dtype=float))


# --------------------------------------------------------------------------- conformance


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
def test_wdbc_conformance(cls):
    case = _expected()["feature_streams"][cls.name]
    X, y, names = _load("wdbc.csv")
    sel = cls.start(OSFSParams(**case["params"]), y)
    sel.learn_features(names, X)
    assert [int(n[1:]) for n in sel.selected()] == case["selected"]


def test_wdbc_expected_vectors_are_the_published_ones():
    feature_streams = _expected()["feature_streams"]
    assert feature_streams["osfs"]["selected"] == [21, 22, 27]
    assert feature_streams["fast_osfs"]["selected"] == [20, 21, 23, 27]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
@pytest.mark.parametrize("test", ["g2", "chi2"])
def test_discrete_conformance(cls, test):
    case = _expected()["discrete_feature_streams"][f"{cls.name}_{test}"]
    assert case["params"]["test"] == test
    X, y, names = _load("discrete.csv")
    sel = cls.start(OSFSParams(**case["params"]), y)
    sel.learn_features(names, X)
    assert [int(n[1:]) for n in sel.selected()] == case["selected"] == [2, 11, 20]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
def test_wdbc_one_column_at_a_time_gives_the_same_state(cls):
    X, y, names = _load("wdbc.csv")
    whole = cls.start(OSFSParams(), y)
    d_whole = whole.learn_features(names, X)
    single = cls.start(OSFSParams(), y)
    d_single = [single.learn_feature(n, x) for n, x in zip(names, X, strict=True)]
    assert d_whole == d_single
    assert _bytes(whole) == _bytes(single)


# --------------------------------------------------------------------------- hand-checked streams


def test_osfs_evicts_member_made_redundant_by_later_feature():
    sel, d = _run(OSFS, ["g", "f", "noise"], [G, F, NOISE])
    assert d[0] == Decision("g", True, None, score=pytest.approx(2 / math.sqrt(6), abs=1e-12))
    # f joins BCF = [g, f]; g given {f}: corr 0, independent -> evicted by f.
    # f given {}: BCF without f is empty, so f is not examined.
    assert d[1].accepted and d[1].reason is None
    assert d[1].score == pytest.approx(2 / math.sqrt(5), abs=1e-12)
    assert d[1].evicted == (Eviction("g", Reason.REDUNDANT, by="f"),)
    assert not d[2].accepted and d[2].reason is Reason.IRRELEVANT
    assert d[2].score == pytest.approx(0.0, abs=1e-12)
    assert sel.selected() == ("f",)
    # 3 relevance tests + (g | f).
    assert sel.status() == {
        "features_seen": 3,
        "features_accepted": 2,
        "features_rejected": 1,
        "features_evicted": 1,
        "selected_count": 1,
        "tests_performed": 4,
        "tests_untestable": 0,
    }


def test_osfs_rejects_arrival_that_is_redundant_given_bcf():
    sel, d = _run(OSFS, ["f", "g"], [F, G])
    # BCF = [f, g]: f given {g}: corr 0.632, W = 3.94 >= 2.576, kept;
    # g given {f}: corr 0 -> g itself is removed: rejected as redundant.
    assert d[0].accepted
    assert d[1] == Decision(
        "g", False, Reason.REDUNDANT, score=pytest.approx(2 / math.sqrt(6), abs=1e-12)
    )
    assert sel.selected() == ("f",)
    assert sel.status()["tests_performed"] == 2 + 2
    assert sel.status()["features_evicted"] == 0


def test_fast_osfs_rejects_redundant_arrival_on_the_inner_test():
    sel, d = _run(FastOSFS, ["f", "g"], [F, G])
    # Inner redundancy: ci_search(g, [f]) tries Z = {f}: corr(g, y | f) = 0, independent.
    assert d[1].feature == "g" and not d[1].accepted and d[1].reason is Reason.REDUNDANT
    assert d[1].evicted == () and d[1].by is None
    assert sel.selected() == ("f",)
    assert sel.status()["tests_performed"] == 2 + 1


def test_fast_osfs_outer_test_evicts_with_sets_containing_the_arrival():
    sel, d = _run(FastOSFS, ["g", "f"], [G, F])
    # Inner: ci_search(f, [g]): corr(f, y | g) = 0.632 dependent, f joins.
    # Outer: g with Z containing f: Z = {f}, corr 0: g evicted by f.
    assert d[1].accepted
    assert d[1].evicted == (Eviction("g", Reason.REDUNDANT, by="f"),)
    assert sel.selected() == ("f",)
    assert sel.status()["tests_performed"] == 2 + 1 + 1


@pytest.mark.parametrize(("cls", "tests"), [(OSFS, 14), (FastOSFS, 12)], ids=["osfs", "fast_osfs"])
def test_three_members_count_the_conditioning_sets_tried(cls, tests):
    # a = y + h2, b = y + h5, c = y + h6: each keeps y's signal beyond the others.
    # corr(a, y | b) = 2/3 (W = sqrt(28) atanh(2/3) = 4.26), corr(c, y | a, b) = 2/sqrt(13)
    # = 0.555 (W = sqrt(27) atanh(0.555) = 3.25): nothing is ever independent, so every
    # ci_search runs to the end and the count is the number of sets enumerated.
    # OSFS:      3 relevance + (a|b, b|a) + 3 members x ({.}, {.}, {., .}) = 3 + 2 + 9 = 14.
    # Fast-OSFS: 3 relevance + b: inner b|a, outer a|b; c: inner a, b, ab; outer only sets
    #            holding c: a|c, a|bc, b|c, b|ac                             = 3 + 2 + 3 + 4 = 12.
    a, b, c = Y + _tile(H[2]), Y + _tile(H[5]), Y + _tile(H[6])
    sel, d = _run(cls, ["a", "b", "c"], [a, b, c])
    assert all(x.accepted and not x.evicted for x in d)
    assert sel.status()["tests_performed"] == tests


def test_relevance_is_the_unconditional_fisher_z_with_n_minus_3():
    # corr(x, y) = 0.449 exactly by construction (x = 0.449 h1 + sqrt(1 - 0.449^2) h2):
    # W = sqrt(32 - 3) atanh(0.449) = 2.603 >= 2.576: relevant (with sqrt(32 - 4) it
    # would be 2.558, irrelevant; the threshold is |r| = 0.4455).
    r = 0.449
    x = r * _tile(H[1]) + math.sqrt(1 - r * r) * _tile(H[2])
    for cls in CLASSES:
        _sel, d = _run(cls, ["x"], [x])
        assert d[0].accepted and d[0].score == pytest.approx(r, abs=1e-12)
        assert not fisher_z(x, Y).independent


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
def test_max_k_zero_means_no_conditioning_sets(cls):
    # No Z of size >= 1 is ever tried: every relevant feature stays.
    sel, d = _run(cls, ["g", "f", "noise"], [G, F, NOISE], max_k=0)
    assert [x.accepted for x in d] == [True, True, False]
    assert sel.selected() == ("g", "f")
    assert sel.status()["tests_performed"] == 3


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
@pytest.mark.parametrize("test", ["fisher_z", "g2", "chi2"])
def test_constant_column_is_rejected_before_any_test(cls, test):
    y = np.array([0, 1, 0, 1, 1, 0, 1, 0, 1, 1], dtype=float)
    sel = cls.start(OSFSParams(test=test), y)
    d = sel.learn_features(["c", "z"], [np.full(10, 2.0), np.zeros(10)])
    assert d == [Decision("c", False, Reason.CONSTANT), Decision("z", False, Reason.CONSTANT)]
    assert sel.status()["tests_performed"] == 0
    assert sel.selected() == ()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
def test_fisher_z_needs_more_than_three_rows(cls):
    # n - |S| - 3 = 0: not testable, so even a perfect copy of y is irrelevant.
    sel, d = _run(cls, ["a"], [[1.0, 2.0, 3.0]], y=np.array([1.0, 2.0, 3.0]))
    assert d == [Decision("a", False, Reason.IRRELEVANT, score=None)]
    assert sel.status()["tests_performed"] == 1


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
@pytest.mark.parametrize("test", ["g2", "chi2"])
def test_discrete_relevance_needs_five_rows_per_df(cls, test):
    # Binary a = y with n = 4: df = 1, 4 < 5, not reliable: irrelevant.
    y = np.array([0.0, 0.0, 1.0, 1.0])
    _sel, d = _run(cls, ["a"], [y], y=y, test=test, alpha=0.05)
    assert d == [Decision("a", False, Reason.IRRELEVANT, score=None)]


@pytest.mark.parametrize("test", ["g2", "chi2"])
def test_osfs_conditioning_set_too_large_for_n_is_untestable(test):
    # y, a and b are the same binary column, n = 8. Relevance: df = 1, 8 >= 5;
    # G2 = 16 ln 2 = 11.09 (p = 0.0009), chi2 with correction = 4 x 1.5^2 / 2 = 4.5
    # (p = 0.034): both relevant at alpha = 0.05. Given one binary column df = 2 and
    # 8 < 10: not testable, which counts as independent.
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1], dtype=float)
    sel, d = _run(OSFS, ["a", "b"], [y, y], y=y, test=test, alpha=0.05)
    assert d[1].accepted and d[1].evicted == (Eviction("a", Reason.REDUNDANT, by="b"),)
    assert sel.selected() == ("b",)
    expected_dep = 16 * math.log(2) if test == "g2" else 4.5
    assert d[1].score == pytest.approx(expected_dep, rel=1e-12)
    fast, d = _run(FastOSFS, ["a", "b"], [y, y], y=y, test=test, alpha=0.05)
    assert d[1] == Decision("b", False, Reason.REDUNDANT, score=d[0].score)
    assert fast.selected() == ("a",)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
def test_exact_duplicate_of_a_member_leaves_one_copy(cls):
    rng = np.random.default_rng(1)
    y = rng.standard_normal(60)
    f = y + rng.standard_normal(60)
    sel, d = _run(cls, ["f", "dup"], [f, f.copy()], y=y)
    assert len(sel.selected()) == 1
    assert sum(len(x.evicted) for x in d) + sum(not x.accepted for x in d) == 1


def test_discrete_relevance_score_is_statistic_over_df():
    X, y, names = _load("discrete.csv")
    sel = OSFS.start(OSFSParams(test="g2"), y)
    d = sel.learn_features(names[:3], X[:3])
    for x, col in zip(d, X[:3], strict=True):
        res = g2_test(col, y)
        assert x.accepted == (not res.independent)
        assert x.score == res.statistic / res.df


# --------------------------------------------------------------------------- ci_search order


def _recording_bcf(max_k: int, answers: dict[tuple[int, ...], bool] | None = None):
    bcf = BCF.__new__(BCF)
    bcf.sel = SimpleNamespace(params=OSFSParams(max_k=max_k))
    calls: list[tuple[int, ...]] = []

    def independent(x: int, Z: tuple[int, ...]) -> bool:
        calls.append(tuple(Z))
        return (answers or {}).get(tuple(Z), False)

    bcf.independent = independent  # type: ignore[method-assign]
    return bcf, calls


def test_ci_search_enumerates_sizes_then_combinations_order():
    bcf, calls = _recording_bcf(max_k=3)
    assert bcf.ci_search(2, [0, 1, 3, 4]) is False
    expected = [Z for k in (1, 2, 3) for Z in itertools.combinations([0, 1, 3, 4], k)]
    assert calls == expected


def test_ci_search_caps_size_at_max_k_and_at_b():
    bcf, calls = _recording_bcf(max_k=2)
    bcf.ci_search(0, [1, 2, 3])
    assert max(len(Z) for Z in calls) == 2 and len(calls) == 3 + 3
    bcf, calls = _recording_bcf(max_k=5)
    bcf.ci_search(0, [1, 2])
    assert calls == [(1,), (2,), (1, 2)]


def test_ci_search_must_contain_places_element_last():
    bcf, calls = _recording_bcf(max_k=3)
    bcf.ci_search(1, [0, 2, 3, 4], must_contain=4)
    assert calls == [(4,), (0, 4), (2, 4), (3, 4), (0, 2, 4), (0, 3, 4), (2, 3, 4)]


def test_ci_search_stops_at_first_independent_set():
    bcf, calls = _recording_bcf(max_k=3, answers={(0, 3): True})
    assert bcf.ci_search(1, [0, 2, 3]) is True
    assert calls == [(0,), (2,), (3,), (0, 2), (0, 3)]


# --------------------------------------------------------------------------- fisher_z state


def test_correlation_state_is_the_gram_matrix_of_y_and_bcf():
    X, y, names = _load("wdbc.csv")
    sel = OSFS.start(OSFSParams(), y)
    sel.learn_features(names, X)
    s = sel.state
    y_std = standardize_rows(y)[0]
    Z = np.concatenate([y_std, s.columns])
    # Bit for bit: every entry is one row_dots sum, however it was reached.
    assert np.array_equal(s.corr, cross_dots(Z, Z))
    assert np.array_equal(s.corr, s.corr.T)
    idx = [int(n[1:]) for n in s.selected]
    assert np.allclose(s.corr, np.corrcoef(np.vstack([y, X[idx]])), atol=1e-12, rtol=0)
    assert np.array_equal(s.columns, standardize_rows(X[idx])[0])


def test_relevance_and_partial_correlations_match_raw_fisher_z():
    X, y, names = _load("wdbc.csv")
    sel = FastOSFS.start(OSFSParams(), y)
    d = sel.learn_features(names, X)
    for x, col in zip(d, X, strict=True):
        assert x.score == pytest.approx(fisher_z(col, y).dep, abs=1e-12)
        assert x.accepted <= (not fisher_z(col, y).independent)
    s = sel.state
    idx = [int(n[1:]) for n in s.selected]
    for j in range(len(idx)):
        others = [k for k in range(len(idx)) if k != j]
        raw = fisher_z(X[idx[j]], y, [X[idx[k]] for k in others])
        r = partial_correlation(s.corr, j + 1, 0, [k + 1 for k in others])
        assert r == pytest.approx(raw.r, abs=1e-12)


def test_discrete_state_keeps_codes_and_levels():
    X, y, names = _load("discrete.csv")
    sel = FastOSFS.start(OSFSParams(test="chi2"), y)
    sel.learn_features(names, X)
    s = sel.state
    idx = [int(n[1:]) for n in s.selected]
    assert s.columns.dtype == np.int64 and np.array_equal(s.columns, X[idx].astype(np.int64))
    assert s.levels.tolist() == [int(X[i].max()) + 1 for i in idx]
    assert s.corr.shape == (0, 0)


# --------------------------------------------------------------------------- params and input


def test_params_defaults_and_bounds():
    p = OSFSParams()
    assert (p.test, p.alpha, p.max_k) == ("fisher_z", 0.01, 3)
    assert OSFSParams(max_k=0).max_k == 0
    assert OSFSParams(max_k=2.0).max_k == 2 and isinstance(OSFSParams(max_k=2.0).max_k, int)
    with pytest.raises(InvalidParameter, match=r"'max_k' parameter of OSFS must be an int") as e:
        OSFSParams(max_k=-1)
    assert e.value.parameter == "max_k"
    for bad in ({"alpha": 0.0}, {"alpha": 1.0}, {"test": "su"}, {"max_k": 1.5}):
        with pytest.raises(InvalidParameter):
            OSFSParams(**bad)
    with pytest.raises(InvalidParameter):
        OSFSParams.from_mapping({"delta": 0.1})


def test_requires_discrete_only_for_g2_and_chi2():
    assert not OSFS.requires_discrete(OSFSParams())
    assert OSFS.requires_discrete(OSFSParams(test="g2"))
    assert FastOSFS.requires_discrete(OSFSParams(test="chi2"))


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
def test_discrete_streams_reject_non_codes(cls):
    with pytest.raises(InvalidInput):
        cls.start(OSFSParams(test="g2"), [0.5, 1.0, 0.0])
    sel = cls.start(OSFSParams(test="g2"), [0, 1, 0, 1, 1])
    with pytest.raises(InvalidInput):
        sel.learn_feature("a", [0, 1, -1, 1, 0])
    assert sel.status()["features_seen"] == 0


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
def test_inputs_are_left_alone(cls):
    X = np.vstack([G, F, NOISE])
    y = Y.copy()
    X0, y0 = X.copy(), y.copy()
    sel = cls.start(OSFSParams(), y)
    sel.learn_features(["g", "f", "n"], X)
    assert np.array_equal(X, X0) and np.array_equal(y, y0)
    assert sel.state.y is not y


# --------------------------------------------------------------------------- properties

N = 16


def _bytes(sel) -> bytes:
    return codec.encode(sel.name, sel.params.to_dict(), sel.snapshot())


@st.composite
def streams(draw):
    """A target of codes 0..2 and columns mixing signal, noise, copies and constants."""
    y = np.array(draw(st.lists(st.integers(0, 2), min_size=N, max_size=N)), dtype=float)
    b = draw(st.integers(1, 7))
    cols: list[np.ndarray] = []
    for _ in range(b):
        kind = draw(st.sampled_from(["signal", "signal", "noise", "copy", "constant"]))
        if kind == "copy" and cols:
            cols.append(cols[draw(st.integers(0, len(cols) - 1))].copy())
        elif kind == "constant":
            cols.append(np.full(N, float(draw(st.integers(0, 3)))))
        else:
            noise = np.array(draw(st.lists(st.integers(0, 2), min_size=N, max_size=N)))
            cols.append(y + noise if kind == "signal" else noise.astype(float))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, b - 1)), max_size=3))))
    cuts = [c for c in cuts if 0 < c < b]
    bounds = list(zip([0, *cuts], [*cuts, b], strict=True))
    return y, np.vstack(cols), bounds


settings_cases = st.tuples(
    st.sampled_from(CLASSES),
    st.sampled_from(
        [
            {},
            {"max_k": 1, "alpha": 0.2},
            {"test": "g2", "alpha": 0.2},
            {"test": "chi2", "alpha": 0.3, "max_k": 2},
            {"alpha": 0.3},
        ]
    ),
)


def _feed(cls, params, y, X, bounds):
    sel = cls.start(OSFSParams(**params), y)
    names = [f"c{i}" for i in range(X.shape[0])]
    decisions = []
    for lo, hi in bounds:
        decisions += sel.learn_features(names[lo:hi], X[lo:hi])
    return sel, decisions


@given(stream=streams(), case=settings_cases)
def test_property_batch_equals_singles(stream, case):
    cls, params = case
    y, X, bounds = stream
    batched, d_batched = _feed(cls, params, y, X, bounds)
    single, d_single = _feed(cls, params, y, X, [(i, i + 1) for i in range(X.shape[0])])
    assert d_batched == d_single
    assert _bytes(batched) == _bytes(single)
    for f in dataclasses.fields(OSFSState):
        a, b = getattr(batched.state, f.name), getattr(single.state, f.name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b)


@given(stream=streams(), case=settings_cases)
def test_property_codec_round_trip(stream, case):
    cls, params = case
    y, X, bounds = stream
    sel, _ = _feed(cls, params, y, X, bounds)
    blob = _bytes(sel)
    dec = codec.decode(blob)
    assert dec.selector == cls.name and dec.params == sel.params.to_dict()
    assert codec.encode(dec.selector, dec.params, dec.state) == blob
    assert dec.state.columns.dtype == sel.state.columns.dtype
    s = sel.status()
    assert s["features_seen"] == s["features_accepted"] + s["features_rejected"]
    assert s["selected_count"] == s["features_accepted"] - s["features_evicted"]
    assert set(sel.selected()) <= {f"c{i}" for i in range(X.shape[0])}


@given(stream=streams(), case=settings_cases)
def test_property_replay_reproduces_the_state(stream, case):
    cls, params = case
    y, X, bounds = stream
    names = [f"c{i}" for i in range(X.shape[0])]
    live = cls.start(OSFSParams(**params), y)
    log: list[tuple[list[str], np.ndarray]] = []
    snapshots: list[bytes] = []
    for lo, hi in bounds:
        log.append((names[lo:hi], X[lo:hi].copy()))
        live.learn_features(names[lo:hi], X[lo:hi])
        snapshots.append(_bytes(live))
    replayed = cls.start(OSFSParams(**params), y)
    for (batch_names, batch), expected in zip(log, snapshots, strict=True):
        replayed.learn_features(batch_names, batch)
        assert _bytes(replayed) == expected
    # Resuming from the first snapshot and applying the rest gives the same end state.
    dec = codec.decode(snapshots[0])
    resumed = cls.resume(OSFSParams(**dec.params), dec.state)
    for batch_names, batch in log[1:]:
        resumed.learn_features(batch_names, batch)
    assert _bytes(resumed) == snapshots[-1]
