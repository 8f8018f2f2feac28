"""group-SAOLA (docs/algorithms/group_saola.md): hand-checked cases, conformance, properties.

Most hand cases use y = 1..8 and columns that are permutations of 1..8, so a
Pearson correlation is Spearman's rho = 1 - 6 sum(d^2) / (8 * 63) = 1 - sum(d^2) / 84,
d being the differences of ranks. With n = 8 and alpha = 0.05 a pair is dependent
when sqrt(5) * atanh(|r|) >= 1.96, i.e. |r| >= 0.704.

    y  = [1, 2, 3, 4, 5, 6, 7, 8]
    F  = [1, 2, 3, 4, 5, 6, 8, 7]   dep 1 - 2/84  = 0.976
    F2 = [1, 2, 3, 4, 5, 7, 8, 6]   dep 1 - 6/84  = 0.929   t(F2, F) = 1 - 2/84  = 0.976
    H  = [2, 1, 3, 4, 5, 6, 8, 7]   dep 1 - 4/84  = 0.952   t(F, H)  = 1 - 2/84  = 0.976
    K  = [1, 3, 2, 4, 6, 5, 7, 8]   dep 1 - 4/84  = 0.952   t(F, K)  = 1 - 6/84  = 0.929
                                                            t(H, K)  = 1 - 10/84 = 0.881
    NOISE = [1, -1, 1, -1, 1, -1, 1, -1]  |r| = 4 / sqrt(8 * 42) = 0.218 (irrelevant)
    STEP  = [1, 1, -1, -1, 1, 1, -1, -1]  |r| = 8 / sqrt(8 * 42) = 0.436 (irrelevant)
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import featurestream.selectors
from featurestream import codec
from featurestream.errors import InvalidInput, InvalidParameter
from featurestream.selectors import Decision, Eviction, Reason
from featurestream.selectors.group_saola import GroupSAOLA, GroupSAOLAParams
from featurestream.stats.columns import row_dots, standardize_rows
from featurestream.stats.entropy import symmetrical_uncertainty
from featurestream.stats.fisher_z import fisher_z_independent
from tests.unit.selectors.common import blob

DATA = Path(__file__).resolve().parents[2] / "data"

Y = np.arange(1.0, 9.0)
F = [1.0, 2, 3, 4, 5, 6, 8, 7]
F2 = [1.0, 2, 3, 4, 5, 7, 8, 6]
H = [2.0, 1, 3, 4, 5, 6, 8, 7]
K = [1.0, 3, 2, 4, 6, 5, 7, 8]
NOISE = [1.0, -1, 1, -1, 1, -1, 1, -1]
STEP = [1.0, 1, -1, -1, 1, 1, -1, -1]


@pytest.fixture(autouse=True, scope="module")
def _registered() -> Iterator[None]:
    # The registry does not list group_saola yet; codec.decode looks classes up there.
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(featurestream.selectors.REGISTRY, GroupSAOLA.name, GroupSAOLA)
        yield


def start(y: Any = Y, **params: Any) -> GroupSAOLA:
    params.setdefault("alpha", 0.05)
    return GroupSAOLA.start(GroupSAOLAParams.from_mapping(params), y)


def outcome(decisions: Sequence[Decision]) -> list[tuple[Any, ...]]:
    return [
        (d.feature, d.accepted, d.reason and d.reason.value, d.by, [e.feature for e in d.evicted])
        for d in decisions
    ]


# --------------------------------------------------------------------------- hand-checked


def test_group_saola_intra_group_rejects_later_redundant_feature() -> None:
    # F2 meets F inside the group: dep_F = 0.976 >= dep_F2 = 0.929 and
    # t(F2, F) = 0.976 > min(0.929, 0.976): F2 is redundant, named by F.
    sel = start()
    d = sel.learn_features(["f", "f2"], [F, F2], groups=["g", "g"])
    assert outcome(d) == [("f", True, None, None, []), ("f2", False, "redundant", "f", [])]
    assert d[0].group == d[1].group == "g"
    assert d[1].score == pytest.approx(1 - 6 / 84)
    assert sel.selected_groups() == (("g", ("f",)),)


def test_group_saola_intra_group_removes_earlier_weaker_member() -> None:
    # Reversed order: F arrives second, dep_F > dep_F2 and t = 0.976 > min = 0.929,
    # so F2 leaves the group. Same-group removals are not evictions: F2's own
    # decision says who removed it, F lists no evictions.
    sel = start()
    d = sel.learn_features(["f2", "f"], [F2, F], groups=["g", "g"])
    assert outcome(d) == [("f2", False, "redundant", "f", []), ("f", True, None, None, [])]
    assert sel.status()["features_evicted"] == 0
    assert sel.status()["features_rejected"] == 1


def test_group_saola_irrelevant_group_is_rejected() -> None:
    # NOISE (0.218) and STEP (0.436) are below 0.704; a constant column is rejected first.
    sel = start()
    d = sel.learn_features(
        ["noise", "step", "flat"], [NOISE, STEP, [3.0] * 8], groups=["g", "g", "g"]
    )
    assert outcome(d) == [
        ("noise", False, "irrelevant", None, []),
        ("step", False, "irrelevant", None, []),
        ("flat", False, "constant", None, []),
    ]
    assert d[0].score == pytest.approx(4 / np.sqrt(8 * 42))
    assert d[1].score == pytest.approx(8 / np.sqrt(8 * 42))
    assert d[2].score is None
    st_ = sel.status()
    assert (st_["groups_seen"], st_["groups_selected"], st_["groups_rejected"]) == (1, 0, 1)
    assert sel.selected() == ()


def test_group_saola_later_group_evicts_part_of_earlier_group() -> None:
    # g1 = [H, K]: t(H, K) = 0.881 < min(0.952, 0.952), both stay.
    # g2 = [F]: dep_F = 0.976 >= dep_H and t(F, H) = 0.976 > 0.952 evicts H;
    # t(F, K) = 0.929 is not > min(0.976, 0.952), so K stays and g1 survives.
    sel = start()
    d1 = sel.learn_features(["h", "k"], [H, K], groups=["g1", "g1"])
    assert outcome(d1) == [("h", True, None, None, []), ("k", True, None, None, [])]
    d2 = sel.learn_features(["f"], [F], groups=["g2"])
    assert outcome(d2) == [("f", True, None, None, ["h"])]
    assert d2[0].evicted == (Eviction("h", Reason.REDUNDANT, by="f"),)
    assert sel.selected_groups() == (("g1", ("k",)), ("g2", ("f",)))
    assert [(f.name, f.group) for f in sel.selected_features()] == [("k", "g1"), ("f", "g2")]
    assert [f.score for f in sel.selected_features()] == pytest.approx([1 - 4 / 84, 1 - 2 / 84])
    st_ = sel.status()
    assert st_["features_evicted"] == 1
    assert st_["groups_dropped"] == 0
    assert st_["selected_groups"] == [
        {"name": "g1", "features": ["k"]},
        {"name": "g2", "features": ["f"]},
    ]


def test_group_saola_emptied_earlier_group_is_dropped() -> None:
    # g1 = [H] alone; g2 = [F] evicts H (as above), leaving g1 empty.
    sel = start()
    sel.learn_features(["h"], [H], groups=["g1"])
    d = sel.learn_features(["f"], [F], groups=["g2"])
    assert outcome(d) == [("f", True, None, None, ["h"])]
    assert sel.selected_groups() == (("g2", ("f",)),)
    st_ = sel.status()
    assert (st_["groups_selected"], st_["groups_dropped"], st_["groups_rejected"]) == (1, 1, 0)


def test_group_saola_earlier_stronger_feature_rejects_newcomer_group() -> None:
    # g1 = [F]; g2 = [H]: dep_F = 0.976 > dep_H = 0.952 and t = 0.976 > min = 0.952,
    # so H is removed from G' and g2, now empty, is rejected.
    sel = start()
    sel.learn_features(["f"], [F], groups=["g1"])
    d = sel.learn_features(["h"], [H], groups=["g2"])
    assert outcome(d) == [("h", False, "redundant", "f", [])]
    assert sel.selected_groups() == (("g1", ("f",)),)
    assert sel.status()["groups_rejected"] == 1


def test_group_saola_ties_favour_earlier_within_group_and_newcomer_across_groups() -> None:
    # An exact duplicate has the same dep bit for bit and t(F, F) = 1 > 0.976.
    # Within a group the test is dep_g >= dep_f (the earlier member rejects the copy);
    # across groups it is dep_h > dep_f to remove f, dep_f >= dep_h to remove h.
    sel = start()
    d = sel.learn_features(["a", "a_copy"], [F, F], groups=["g1", "g1"])
    assert outcome(d) == [("a", True, None, None, []), ("a_copy", False, "redundant", "a", [])]
    d = sel.learn_features(["b"], [F], groups=["g2"])
    assert outcome(d) == [("b", True, None, None, ["a"])]
    assert sel.selected_groups() == (("g2", ("b",)),)


def test_group_saola_comparisons_are_strict_at_the_bound() -> None:
    # g2 holds y itself. Its standardised column is y's, bit for bit, so
    # t(y, H) = sum(u_y * u_H) is exactly dep_H = 0.952: t > min(dep_f, dep_H) is
    # false and H stays although y is more relevant (a ">=" would evict it).
    sel = start()
    sel.learn_features(["h"], [H], groups=["g1"])
    d = sel.learn_features(["y"], [Y], groups=["g2"])
    assert outcome(d) == [("y", True, None, None, [])]
    assert sel.selected_groups() == (("g1", ("h",)), ("g2", ("y",)))


def test_group_saola_su_on_discrete_codes() -> None:
    # y = [0,0,0,0,1,1,1,1], A = [0,0,0,1,1,1,1,1]: H(y) = ln 2 = 0.6931,
    # H(A) = -(3/8 ln 3/8 + 5/8 ln 5/8) = 0.6616, joint counts (3, 1, 4):
    # H(A, y) = 0.9743, I = 0.3804, SU = 2 I / (H(A) + H(y)) = 0.5616.
    # Z = [0,1,0,1,0,1,0,1] is independent of y: SU = 0 <= delta.
    # Within g1, A's copy has the same SU and SU(copy, A) = 1 > 0.5616: rejected.
    # g2 = [B], another copy of A: the tie goes to the newcomer, A is evicted.
    y = np.array([0.0, 0, 0, 0, 1, 1, 1, 1])
    A = [0.0, 0, 0, 1, 1, 1, 1, 1]
    Z = [0.0, 1, 0, 1, 0, 1, 0, 1]
    sel = start(y, test="su", delta=0.1)
    d = sel.learn_features(["a", "z", "a2"], [A, Z, A], groups=["g1", "g1", "g1"])
    assert outcome(d) == [
        ("a", True, None, None, []),
        ("z", False, "irrelevant", None, []),
        ("a2", False, "redundant", "a", []),
    ]
    assert d[0].score == pytest.approx(0.5616, abs=1e-4)
    assert d[1].score == pytest.approx(0.0, abs=1e-12)
    d = sel.learn_features(["b"], [A], groups=["g2"])
    assert outcome(d) == [("b", True, None, None, ["a"])]
    assert sel.selected_groups() == (("g2", ("b",)),)
    assert sel.status()["groups_dropped"] == 1


def test_group_saola_su_requires_integer_codes() -> None:
    sel = start(np.array([0.0, 1, 0, 1]), test="su")
    with pytest.raises(InvalidInput):
        sel.learn_features(["x"], [[0.5, 1, 0, 1]], groups=["g"])


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "groups",
    [None, ["g", "g", None], ["g", "h", "g"]],
    ids=["no-groups", "missing-entry", "not-contiguous"],
)
def test_group_saola_rejects_bad_groups(groups: list[str | None] | None) -> None:
    sel = start()
    with pytest.raises(InvalidInput) as err:
        sel.learn_features(["h", "k", "f"], [H, K, F], groups=groups)
    assert err.value.field == "groups"
    assert sel.status()["features_seen"] == 0
    assert sel.status()["groups_seen"] == 0


def test_group_saola_rejects_group_seen_in_earlier_call() -> None:
    sel = start()
    sel.learn_features(["f"], [F], groups=["g1"])
    before = blob(sel)
    with pytest.raises(InvalidInput) as err:
        sel.learn_features(["h", "k"], [H, K], groups=["g2", "g1"])
    assert err.value.field == "groups"
    # All or nothing: the valid g2 in the same request was not applied either.
    assert blob(sel) == before
    # The rejected g2 is still free to arrive.
    assert sel.learn_features(["h"], [H], groups=["g2"])[0].group == "g2"


def test_group_saola_rejects_group_of_only_irrelevant_features_again() -> None:
    # A rejected group's name is still taken: groups arrive whole, once.
    sel = start()
    sel.learn_features(["noise"], [NOISE], groups=["g"])
    with pytest.raises(InvalidInput):
        sel.learn_features(["f"], [F], groups=["g"])


def test_group_saola_learn_feature_single_group() -> None:
    sel = start()
    d = sel.learn_feature("f", F, group="g")
    assert (d.feature, d.accepted, d.group) == ("f", True, "g")
    with pytest.raises(InvalidInput):
        sel.learn_feature("h", H)


def test_group_saola_params() -> None:
    with pytest.raises(InvalidParameter, match="group-SAOLA") as err:
        GroupSAOLAParams(alpha=1.5)
    assert err.value.parameter == "alpha"
    with pytest.raises(InvalidParameter) as err:
        GroupSAOLAParams.from_mapping({"bound": "max"})
    assert err.value.parameter == "bound"
    with pytest.raises(InvalidParameter):
        GroupSAOLAParams(test="g2")
    assert GroupSAOLAParams().to_dict() == {
        "test": "fisher_z",
        "alpha": 0.01,
        "delta": 0.0,
        "untestable": "independent",
    }
    assert GroupSAOLA.uses_groups is True
    assert GroupSAOLA.requires_discrete(GroupSAOLAParams(test="su"))
    assert not GroupSAOLA.requires_discrete(GroupSAOLAParams())


def test_group_saola_leaves_inputs_alone() -> None:
    X = np.array([H, K, F])
    groups = ["g1", "g1", "g2"]
    sel = start()
    sel.learn_features(["h", "k", "f"], X, groups=groups)
    assert np.array_equal(X, np.array([H, K, F]))
    assert groups == ["g1", "g1", "g2"]


# --------------------------------------------------------------------------- conformance


def _wdbc() -> tuple[np.ndarray, np.ndarray]:
    D = np.loadtxt(DATA / "wdbc.csv", delimiter=",", skiprows=1)
    return np.ascontiguousarray(D[:, :30].T), np.ascontiguousarray(D[:, 30])


def test_group_saola_conformance_wdbc() -> None:
    vector = json.loads((DATA / "expected.json").read_text())["feature_streams"]["group_saola"]
    X, y = _wdbc()
    names = [f"f{i}" for i in range(30)]
    runs = []
    for group_name, members in zip(vector["group_names"], vector["groups"], strict=True):
        runs.append(([names[i] for i in members], X[members], [group_name] * len(members)))

    def run(batches: list[list[int]]) -> tuple[GroupSAOLA, list[Decision]]:
        sel = GroupSAOLA.start(GroupSAOLAParams.from_mapping(vector["params"]), y)
        decisions: list[Decision] = []
        for batch in batches:
            decisions += sel.learn_features(
                [n for g in batch for n in runs[g][0]],
                np.concatenate([runs[g][1] for g in batch]),
                [x for g in batch for x in runs[g][2]],
            )
        return sel, decisions

    whole, d_whole = run([[0, 1, 2, 3, 4, 5]])
    expected = [f"f{i}" for i in vector["selected"]]
    assert list(whole.selected()) == expected
    assert [g for g, _ in whole.selected_groups()] == ["g4", "g5"]
    assert [d.group for d in d_whole] == [f"g{i // 5}" for i in range(30)]
    for batches in ([[0], [1], [2], [3], [4], [5]], [[0, 1], [2, 3, 4], [5]]):
        sel, d = run(batches)
        assert d == d_whole
        assert blob(sel) == blob(whole)


# --------------------------------------------------------------------------- properties

N = 24


@st.composite
def group_streams(draw: st.DrawFn, discrete: bool) -> dict[str, Any]:
    """y, columns built from two latent factors (plus copies and constants), groups, cuts."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5))
    b = sum(sizes)
    latent = rng.standard_normal((2, N))
    y = latent[0] + 0.5 * rng.standard_normal(N)
    cols: list[np.ndarray] = []
    for j in range(b):
        kind = draw(st.sampled_from(["mix", "mix", "copy", "noise", "constant"]))
        if kind == "copy" and cols:
            cols.append(cols[draw(st.integers(0, len(cols) - 1))].copy())
        elif kind == "constant":
            cols.append(np.full(N, float(j)))
        elif kind == "noise":
            cols.append(rng.standard_normal(N))
        else:
            w = rng.standard_normal(2)
            cols.append(w @ latent + 0.3 * rng.standard_normal(N))
    X = np.array(cols)
    if discrete:
        # Three levels by tertiles; y in two levels.
        X = np.array([np.searchsorted(np.quantile(c, [1 / 3, 2 / 3]), c) for c in X], float)
        y = (y > np.median(y)).astype(float)
    group_names = [f"g{k}" for k in range(len(sizes))]
    groups = [g for g, size in zip(group_names, sizes, strict=True) for _ in range(size)]
    # Batch boundaries may only fall between groups.
    cuts = sorted(draw(st.sets(st.integers(1, len(sizes) - 1))) if len(sizes) > 1 else set())
    return {"y": y, "X": X, "sizes": sizes, "groups": groups, "cuts": cuts}


Request = tuple[list[str], np.ndarray, list[str]]


def _requests(stream: dict[str, Any], cuts: Sequence[int]) -> list[Request]:
    """The stream's groups posted as requests, cut before the group indices in ``cuts``."""
    bounds = np.cumsum([0, *stream["sizes"]]).tolist()
    edges = [0, *cuts, len(stream["sizes"])]
    return [
        (
            [f"x{i}" for i in range(bounds[a], bounds[b])],
            stream["X"][bounds[a] : bounds[b]].copy(),
            list(stream["groups"][bounds[a] : bounds[b]]),
        )
        for a, b in itertools.pairwise(edges)
    ]


def _feed(sel: GroupSAOLA, stream: dict[str, Any], cuts: Sequence[int]) -> list[Decision]:
    decisions: list[Decision] = []
    for names, X, groups in _requests(stream, cuts):
        decisions += sel.learn_features(names, X, groups)
    return decisions


PARAMS = [{"alpha": 0.05}, {"alpha": 0.2}, {"test": "su"}]


def reference(
    y: np.ndarray, X: np.ndarray, groups: list[str], params: dict[str, Any]
) -> tuple[list[tuple[str, list[str]]], dict[str, tuple[Any, ...]]]:
    """docs/algorithms/group_saola.md written as literally as possible: scalar loops, H-major.

    Uses the same scalar statistics as the selector (a dot product of standardised
    columns, or SU), so only the control flow is under test.
    """
    p = GroupSAOLAParams.from_mapping(params)
    n = y.shape[0]
    su = p.test == "su"
    U = standardize_rows(X)[0]
    yU = standardize_rows(y)[0][0]

    def relevance(i: int) -> float | None:
        if X[i].max() == X[i].min():
            return None
        if su:
            d = symmetrical_uncertainty(X[i], y)
            return d if d > p.delta else -d - 1.0
        r = float(np.clip(row_dots(U[[i]], yU)[0], -1, 1))
        return abs(r) if not fisher_z_independent(r, n, 0, p.alpha) else -abs(r) - 1.0

    def t(f: int, g: int) -> float | None:
        if su:
            v = symmetrical_uncertainty(X[f], X[g])
            return v if v > p.delta else None
        r = float(np.clip(row_dots(U[[g]], U[f])[0], -1, 1))
        return None if fisher_z_independent(r, n, 0, p.alpha) else abs(r)

    out: dict[str, tuple[Any, ...]] = {}
    selected: list[tuple[str, list[int]]] = []
    dep: dict[int, float] = {}
    order = list(dict.fromkeys(groups))
    for gname in order:
        G = [i for i, g in enumerate(groups) if g == gname]
        S: list[int] = []
        for f in G:
            d = relevance(f)
            if d is None:
                out[f"x{f}"] = (False, "constant", None, ())
                continue
            if d < 0:
                out[f"x{f}"] = (False, "irrelevant", None, ())
                continue
            dep[f] = d
            rejected = False
            for g in list(S):
                tv = t(f, g)
                if tv is None:
                    continue
                if dep[g] >= d and tv > min(d, dep[g]):
                    out[f"x{f}"] = (False, "redundant", f"x{g}", ())
                    rejected = True
                    break
                if d > dep[g] and tv > min(d, dep[g]):
                    S.remove(g)
                    out[f"x{g}"] = (False, "redundant", f"x{f}", ())
            if not rejected:
                S.append(f)
        Gp = list(S)
        evicted: dict[int, list[str]] = {f: [] for f in Gp}
        removed: dict[int, str] = {}
        for _, H in selected:
            for f in list(Gp):
                if f not in Gp:
                    continue
                for h in list(H):
                    tv = t(f, h)
                    if tv is None:
                        continue
                    if dep[h] > dep[f] and tv > min(dep[f], dep[h]):
                        Gp.remove(f)
                        removed[f] = f"x{h}"
                        break
                    if dep[f] >= dep[h] and tv > min(dep[f], dep[h]):
                        H.remove(h)
                        evicted[f].append(f"x{h}")
        selected = [(g, H) for g, H in selected if H]
        for f in S:
            ev = tuple(evicted[f])
            out[f"x{f}"] = (
                (False, "redundant", removed[f], ev) if f in removed else (True, None, None, ev)
            )
        if Gp:
            selected.append((gname, Gp))
    return [(g, [f"x{i}" for i in H]) for g, H in selected], out


@pytest.mark.parametrize("params", PARAMS, ids=["fisher_z", "fisher_z-0.2", "su"])
@given(data=st.data())
def test_group_saola_matches_literal_reference(params: dict[str, Any], data: st.DataObject) -> None:
    stream = data.draw(group_streams(params.get("test") == "su"))
    sel = start(stream["y"], **params)
    decisions = _feed(sel, stream, stream["cuts"])
    ref_groups, ref_out = reference(stream["y"], stream["X"], stream["groups"], params)
    assert [(g, list(f)) for g, f in sel.selected_groups()] == ref_groups
    got = {
        d.feature: (
            d.accepted,
            d.reason and d.reason.value,
            d.by,
            tuple(e.feature for e in d.evicted),
        )
        for d in decisions
    }
    assert got == ref_out


@pytest.mark.parametrize("params", PARAMS, ids=["fisher_z", "fisher_z-0.2", "su"])
@given(data=st.data())
def test_group_saola_groups_batch_equals_one_group_per_call(
    params: dict[str, Any], data: st.DataObject
) -> None:
    stream = data.draw(group_streams(params.get("test") == "su"))
    batched = start(stream["y"], **params)
    d_batched = _feed(batched, stream, stream["cuts"])
    single = start(stream["y"], **params)
    d_single = _feed(single, stream, range(1, len(stream["sizes"])))
    assert d_batched == d_single
    assert blob(batched) == blob(single)
    for a, b in zip(
        (batched.state.dep, batched.state.columns),
        (single.state.dep, single.state.columns),
        strict=True,
    ):
        assert np.array_equal(a, b)
    st_ = batched.status()
    assert st_["groups_seen"] == len(stream["sizes"])
    assert st_["groups_seen"] == (
        st_["groups_selected"] + st_["groups_rejected"] + st_["groups_dropped"]
    )
    assert st_["features_accepted"] + st_["features_rejected"] == st_["features_seen"]


@pytest.mark.parametrize("params", PARAMS, ids=["fisher_z", "fisher_z-0.2", "su"])
@given(data=st.data())
def test_group_saola_codec_round_trip_and_resume(
    params: dict[str, Any], data: st.DataObject
) -> None:
    stream = data.draw(group_streams(params.get("test") == "su"))
    n_groups = len(stream["sizes"])
    pause = data.draw(st.integers(0, n_groups))
    requests = _requests(stream, sorted({pause} - {0, n_groups}))
    # Snapshot after the first `pause` groups (0: the fresh state).
    head, tail = (requests[:1], requests[1:]) if pause < n_groups else (requests, [])
    if pause == 0:
        head, tail = [], requests
    sel = start(stream["y"], **params)
    for request in head:
        sel.learn_features(*request)
    raw = blob(sel)
    decoded = codec.decode(raw)
    assert decoded.selector == "group_saola"
    assert codec.encode(decoded.selector, decoded.params, decoded.state) == raw
    resumed = GroupSAOLA.resume(GroupSAOLAParams.from_mapping(decoded.params), decoded.state)
    assert resumed.selected_groups() == sel.selected_groups()
    assert resumed.status() == sel.status()
    # Resumed and uninterrupted selectors continue identically.
    for request in tail:
        assert resumed.learn_features(*request) == sel.learn_features(*request)
    assert blob(resumed) == blob(sel)


@pytest.mark.parametrize("params", PARAMS, ids=["fisher_z", "fisher_z-0.2", "su"])
@given(data=st.data())
def test_group_saola_replay_reproduces_state(params: dict[str, Any], data: st.DataObject) -> None:
    stream = data.draw(group_streams(params.get("test") == "su"))
    live = start(stream["y"], **params)
    log: list[Request] = []
    for request in _requests(stream, stream["cuts"]):
        live.learn_features(*request)
        log.append(request)
    replayed = start(stream["y"], **params)
    for request in log:
        replayed.learn_features(*request)
    assert blob(replayed) == blob(live)
    assert replayed.status() == live.status()
