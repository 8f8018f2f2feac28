"""OFS-Density (docs/algorithms/ofs_density.md): every rule by hand and against a plain
transcription of the rules (tests/unit/selectors/rough_set_reference.py)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from featurestream.errors import InvalidInput
from featurestream.selectors import OFSDensity, OFSDensityParams, Reason
from featurestream.selectors.targets import resolve_target
from tests.unit.selectors import rough_set_reference as ref
from tests.unit.selectors.test_ofs_a3m import TABLE1, TABLE1_D, data


def start(y: Any) -> OFSDensity:
    t = resolve_target(list(y))
    return OFSDensity.start(OFSDensityParams(), t.y, t.n_classes)


def mean(gs: list[float]) -> float:
    total = 0.0
    for g in gs:
        total += g
    return total / len(gs)


def reference_run(X: np.ndarray, y: list[int]) -> tuple[list[Any], list[str], int]:
    """The rules of OFS-Density, written out: the decisions, the selection, and how
    many passes were taken back."""
    S: list[int] = []
    single: dict[int, float] = {}
    dep_set = dep_mean = 0.0
    undone = 0
    out: list[Any] = []

    def gamma(members: list[int]) -> float:
        return ref.gamma([X[j] for j in members], y, ref.density)

    for i, name, g in ref.arrivals(X, y, ref.density, out):
        single[i] = g
        if g < dep_mean:
            out.append((name, False, Reason.IRRELEVANT, []))
            continue
        d = gamma([*S, i])
        if d > dep_set:
            S.append(i)
            dep_set, dep_mean = d, mean([single[j] for j in S])
            out.append((name, True, None, []))
        elif dep_set > 0 and abs(d - dep_set) / dep_set <= 0.05:
            S.append(i)
            R, g_r, gone = list(S), d, []
            for h in S[:-1]:
                rest = [j for j in R if j != h]
                g_without = gamma(rest)
                if g_r - g_without <= 0:
                    R, g_r = rest, g_without
                    gone.append(f"f{h}")
            if g_r >= dep_set:
                S = R
                dep_set, dep_mean = g_r, mean([single[j] for j in S])
            else:
                undone += 1
                gone = []
            out.append((name, True, None, gone))
        else:
            out.append((name, False, Reason.NOT_SIGNIFICANT, []))
    return out, [f"f{j}" for j in S], undone


def weak(seed: int, classes: int = 2) -> tuple[np.ndarray, list[int]]:
    """Weak columns only (noise): passes that lower the dependency, and are taken back."""
    rng = np.random.default_rng(seed)
    y = [int(v) for v in rng.permutation(np.arange(16) % classes)]
    return rng.normal(size=(12, 16)), y


def run(X: np.ndarray, y: Any, step: int = 1) -> tuple[list[Any], list[str], OFSDensity]:
    return ref.run(start(y), X, step)


# --------------------------------------------------------------------------- by hand


def test_the_paper_data_by_the_rules() -> None:
    # f1: 0.39583 >= 0, raises 0: accepted, dep_mean 0.39583. f2 (0.16667) and f3
    # (0.15417) are below it. f4: 0.625, and {f1, f4} depends within 5% of 0.39583:
    # the pass: {f4} alone depends 0.625 >= that, so f1 goes; 0.625 >= dep_set
    # keeps the pass, dep_set = dep_mean = 0.625.
    y = [int(v > 0) for v in TABLE1_D]
    sel = start(TABLE1_D)
    d = sel.learn_features(["f1", "f2", "f3", "f4"], TABLE1)
    assert [round(x.score, 5) for x in d] == [0.39583, 0.16667, 0.15417, 0.625]
    assert [x.reason for x in d] == [None, Reason.IRRELEVANT, Reason.IRRELEVANT, None]
    both = ref.gamma([TABLE1[0], TABLE1[3]], y, ref.density)
    assert abs(both - d[0].score) / d[0].score <= 0.05 and both <= d[0].score
    assert [(e.feature, e.by) for e in d[3].evicted] == [("f1", "f4")]
    assert sel.selected() == ("f4",)
    assert (sel.state.dep_set, sel.state.dep_mean, sel.state.passes) == (0.625, 0.625, 1)


def test_the_first_feature_of_dependency_zero_is_not_significant() -> None:
    # x = [0, 1, 10, 11], y = [0, 1, 0, 1]: each instance's nearest is at 1, of the
    # other class, and the next density (9/2 or 10/2) exceeds 1: N(i) is that one
    # neighbour, g = 0, which does not rise above dep_set = 0 (and dep_set = 0 has no
    # "within 5%").
    sel = start([0, 1, 0, 1])
    d = sel.learn_feature("x", np.array([0.0, 1.0, 10.0, 11.0]))
    assert (d.accepted, d.reason, d.score) == (False, Reason.NOT_SIGNIFICANT, 0.0)


# ------------------------------------------------------------- against the rules


@pytest.mark.parametrize("make", [data, weak])
@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("seed", range(10))
def test_decisions_follow_the_written_out_rules(seed: int, classes: int, make: Any) -> None:
    X, y = make(seed, classes=classes)
    got, selected, sel = run(X, y)
    want, want_selected, undone = reference_run(X, y)
    assert got == want
    assert selected == want_selected
    assert sel.state.passes_undone == undone


def test_every_rule_is_exercised_by_the_reference_data() -> None:
    seen: set[Any] = set()
    undone = 0
    for seed in range(10):
        for classes, make in itertools.product((2, 3), (data, weak)):
            X, y = make(seed, classes=classes)
            decisions, _, sel = run(X, y)
            undone += sel.state.passes_undone
            for _, accepted, reason, evicted in decisions:
                seen.add("pass" if evicted else "accept" if accepted else reason)
    assert {"pass", "accept", Reason.IRRELEVANT, Reason.NOT_SIGNIFICANT} <= seen
    assert undone > 0


def test_refuses_a_continuous_target() -> None:
    t = resolve_target([0.5, 1.5, 2.5, 3.5], "continuous")
    with pytest.raises(InvalidInput, match="does not accept a continuous target"):
        OFSDensity.start(OFSDensityParams(), t.y, t.n_classes)
