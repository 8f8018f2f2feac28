"""OFS-A3M (docs/algorithms/ofs_a3m.md): the paper's example, every rule by hand, and the
rules against a plain transcription (tests/unit/selectors/rough_set_reference.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from featurestream.errors import InvalidInput
from featurestream.selectors import OFSA3M, OFSA3MParams, Reason
from featurestream.selectors.targets import resolve_target
from tests.unit.selectors import rough_set_reference as ref

# The example data set of the paper (its Table 1): four features, eight instances,
# the class d = -1 / +1.
TABLE1 = np.array(
    [
        [3.0, 5, 8, 13, 6, 5, 9, 15],
        [5.6, 6.9, 5.3, 12.3, 15.2, 2.6, 6.8, 8.4],
        [-66.0, 95, -28, -35, 72, 42, -33, 15],
        [3.05, 4.84, 5.89, 6.14, 6.55, 10.94, 23.85, 23.85],
    ]
)
TABLE1_D = [-1, 1, 1, 1, -1, 1, -1, -1]


def start(y: Any) -> OFSA3M:
    t = resolve_target(list(y))
    return OFSA3M.start(OFSA3MParams(), t.y, t.n_classes)


def reference_run(X: np.ndarray, y: list[int]) -> tuple[list[Any], list[str]]:
    """The rules of OFS-A3M, written out: (name, accepted, reason, evicted), selection."""
    S: list[int] = []
    dep_set = dep_mean = 0.0
    out: list[Any] = []
    for i, name, g in ref.arrivals(X, y, ref.adapted, out):
        if not g > dep_mean:
            out.append((name, False, Reason.IRRELEVANT, []))
            continue
        d = ref.gamma([X[j] for j in [*S, i]], y, ref.adapted)
        if d < dep_set:
            out.append((name, False, Reason.NOT_SIGNIFICANT, []))
            continue
        S.append(i)
        gone: list[str] = []
        if d > dep_set:
            dep_set = d
        else:
            R = list(S)
            g_r = d
            for h in S[:-1]:
                rest = [j for j in R if j != h]
                g_without = ref.gamma([X[j] for j in rest], y, ref.adapted)
                if g_r != 0 and (g_r - g_without) / g_r == 0:
                    R, g_r = rest, g_without
                    gone.append(f"f{h}")
            S = R
        dep_mean = dep_set / len(S)
        out.append((name, True, None, gone))
    return out, [f"f{j}" for j in S]


def run(X: np.ndarray, y: Any, step: int = 1) -> tuple[list[Any], list[str], OFSA3M]:
    return ref.run(start(y), X, step)


def data(seed: int, n: int = 16, b: int = 12, classes: int = 2) -> tuple[np.ndarray, list[int]]:
    """Weak columns, and columns that separate the classes (so that the dependency of a
    set reaches 1 and stays there: the non-significance pass)."""
    rng = np.random.default_rng(seed)
    y = [int(v) for v in rng.permutation(np.arange(n) % classes)]
    X = rng.normal(size=(b, n))  # no near ties (the transcription has no tolerance)
    for j in range(1, b, 3):
        X[j] = 10.0 * (1 + j) * np.array(y) + 0.01 * rng.random(n)
    return X, y


# ------------------------------------------------------------------ the paper's example


def test_the_example_of_the_paper() -> None:
    # The paper's walk-through: gamma_f1 = 0.2625, gamma_f2 = 0.33542,
    # gamma_{f1, f2} = 0.32292, gamma_f3 = 0.29464, gamma_f4 = 0.6 and
    # gamma_{f1, f2, f4} = 0.55357; the selection {f1, f2, f4}.
    sel = start(TABLE1_D)
    d = sel.learn_features(["f1", "f2", "f3", "f4"], TABLE1)
    assert [round(x.score, 5) for x in d] == [0.2625, 0.33542, 0.29464, 0.6]
    assert sel.selected() == ("f1", "f2", "f4")
    assert round(sel.state.dep_set, 5) == 0.55357
    # f3 passes the mean dep_set / |S| = 0.32292 / 2, but {f1, f2, f3} depends
    # 0.3125 < 0.32292: not significant (the paper stops it at the mean of the
    # single dependencies, 0.29896).
    assert d[2].reason == Reason.NOT_SIGNIFICANT
    assert ref.gamma(list(TABLE1[:3]), [int(v > 0) for v in TABLE1_D], ref.adapted) == 0.3125


# --------------------------------------------------------------------------- by hand


def test_the_non_significance_pass_by_hand() -> None:
    # w: one outlier, weak (0.4375). a separates the classes: {w, a} depends 1.
    # b separates them too: g = 1 > dep_mean = 1/2 and {w, a, b} depends 1 =
    # dep_set: the pass, in arrival order: {a, b} still depends 1, w goes; then
    # {b} depends 1, a goes. S = {b}, dep_mean = 1.
    y = np.array([0.0, 0, 0, 0, 1, 1, 1, 1])
    noise = np.array([0.01, 0.03, 0.02, 0.05, 0.04, 0.07, 0.06, 0.08])
    X = np.array([[0, 0, 0, 0, 0, 0, 0, 5.0], 10 * y + noise, 20 * y + noise[::-1]])
    sel = start(y)
    d = sel.learn_features(["w", "a", "b"], X)
    assert [(x.feature, x.accepted, x.score) for x in d] == [
        ("w", True, 0.4375),
        ("a", True, 1.0),
        ("b", True, 1.0),
    ]
    assert [(e.feature, e.reason, e.by) for e in d[2].evicted] == [
        ("w", Reason.REDUNDANT, "b"),
        ("a", Reason.REDUNDANT, "b"),
    ]
    assert sel.selected() == ("b",)
    assert (sel.state.dep_set, sel.state.dep_mean, sel.state.passes) == (1.0, 1.0, 1)
    # A fourth separating column: g = 1 is not above dep_mean = 1: irrelevant.
    assert sel.learn_feature("c", 5 * y + noise).reason == Reason.IRRELEVANT


def test_the_pass_reaches_the_checkpoint_between_its_dependencies() -> None:
    # The pass of the example above: b (item 2) has two members to weigh.
    y = np.array([0.0, 0, 0, 0, 1, 1, 1, 1])
    noise = np.array([0.01, 0.03, 0.02, 0.05, 0.04, 0.07, 0.06, 0.08])
    X = np.array([[0, 0, 0, 0, 0, 0, 0, 5.0], 10 * y + noise, 20 * y + noise[::-1]])
    calls: list[int] = []
    start(y).learn_features(["w", "a", "b"], X, checkpoint=calls.append)
    assert calls == [0, 1, 2, 2, 2]


def test_a_pass_at_dependency_zero_removes_nothing() -> None:
    # sig = (gamma_R - gamma_{R - h}) / gamma_R is undefined at gamma_R = 0.
    from featurestream.selectors.ofs_a3m import _no_significance

    assert not _no_significance(0.0, 0.0)
    assert _no_significance(0.5, 0.5) and not _no_significance(0.5, 0.25)


# ------------------------------------------------------------- against the rules


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("seed", range(8))
def test_decisions_follow_the_written_out_rules(seed: int, classes: int) -> None:
    X, y = data(seed, classes=classes)
    got, selected, _ = run(X, y)
    want, want_selected = reference_run(X, y)
    assert got == want
    assert selected == want_selected


def test_every_rule_is_exercised_by_the_reference_data() -> None:
    seen: set[Any] = set()
    for seed in range(8):
        for classes in (2, 3):
            X, y = data(seed, classes=classes)
            for _, accepted, reason, evicted in run(X, y)[0]:
                seen.add("pass" if evicted else "accept" if accepted else reason)
    assert {"pass", "accept", Reason.IRRELEVANT, Reason.NOT_SIGNIFICANT} <= seen


def test_refuses_a_continuous_target() -> None:
    t = resolve_target([0.5, 1.5, 2.5], "continuous")
    with pytest.raises(InvalidInput, match='declare its classes \\(target_type "binary" or'):
        OFSA3M.start(OFSA3MParams(), t.y, t.n_classes)
