"""k-best (docs/algorithms/kbest.md): scores from decayed sums, the top k, targets, forgetting."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from river import feature_selection, stats
from sklearn.feature_selection import f_classif

from featurestream import codec
from featurestream.errors import InvalidInput
from featurestream.selectors import KBest, KBestParams
from featurestream.stats.kbest import INFINITE_F


def start(d: int = 4, target_type: str = "auto", **params: Any) -> KBest:
    params.setdefault("num_features", 2)
    return KBest.start(KBestParams(**params), [f"f{i}" for i in range(d)], target_type=target_type)


def blob(sel: KBest) -> bytes:
    return codec.encode(sel.name, sel.params.to_dict(), sel.state)


def rel(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def regression(n: int = 200, d: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) + 3.0
    y = 2.0 * X[:, 1] - X[:, 4] + rng.normal(size=n) + 0.5
    return X, y


def classes(n: int = 240, d: int = 6, k: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    X = rng.normal(size=(n, d))
    X[:, 2] += y
    X[:, 5] -= 0.5 * (y == 1)
    return X, y


# ------------------------------------------------------------------ scores


def test_correlation_of_a_continuous_target_is_river_select_k_best() -> None:
    X, y = regression()
    sel = start(6, "continuous", num_features=3)
    sel.learn_instances(X, y)
    river_sel = feature_selection.SelectKBest(stats.PearsonCorr(), k=3, use_abs=True)
    for xi, yi in zip(X, y, strict=True):
        river_sel.learn_one(dict(enumerate(xi)), yi)
    expected = np.array([abs(river_sel.leaderboard[j]) for j in range(6)])
    assert rel(sel.scores(), expected) < 1e-9
    top = sorted(range(6), key=lambda j: -expected[j])[:3]
    assert list(sel.selected()) == [f"f{j}" for j in top]


def test_binary_correlation_is_abs_pearson_r_with_the_codes() -> None:
    X, y = classes(k=2)
    sel = start(6, num_features=2)
    sel.learn_instances(X, y)
    expected = [abs(np.corrcoef(X[:, j], y)[0, 1]) for j in range(6)]
    assert sel.state.target_type == "binary" and sel.score_used() == "correlation"
    assert rel(sel.scores(), expected) < 1e-9


def test_anova_is_f_classif() -> None:
    X, y = classes()
    sel = start(6, score="anova")
    sel.learn_instances(X, y)
    assert rel(sel.scores(), f_classif(X, y)[0]) < 1e-9
    assert sel.selected()[0] == "f2"


def test_auto_turns_to_anova_from_the_third_class() -> None:
    X, y = classes()
    sel = start(6, target_type="multiclass")
    two = y < 2
    sel.learn_instances(X[two][:20], y[two][:20])
    assert sel.score_used() == "correlation" and sel.status()["score"] == "correlation"
    sel.learn_instances(X, y)
    assert sel.score_used() == "anova"
    assert KBest.score_kind(sel.params).kind == "abs_correlation_or_f_statistic"


def test_correlation_of_classes_is_the_largest_over_the_indicators() -> None:
    X, y = classes()
    sel = start(6, score="correlation")
    sel.learn_instances(X, y)
    expected = [max(abs(np.corrcoef(X[:, j], y == k)[0, 1]) for k in range(3)) for j in range(6)]
    assert rel(sel.scores(), expected) < 1e-9


def test_a_constant_feature_scores_zero_and_a_class_function_scores_the_largest_f() -> None:
    y = np.array([0, 0, 1, 1, 2, 2])
    X = np.stack([np.full(6, 3.0), y * 2.0 + 1.0, np.arange(6.0)], axis=1)
    sel = start(3, score="anova", num_features=3)
    sel.learn_instances(X, y)
    f = sel.scores()
    assert f[0] == 0.0 and f[1] == INFINITE_F and 0.0 < f[2] < INFINITE_F
    corr = start(3, score="correlation", num_features=3)
    corr.learn_instances(X, y)
    assert corr.scores()[0] == 0.0


def test_a_constant_target_scores_every_feature_zero() -> None:
    sel = start(3, "continuous")
    sel.learn_instances(np.arange(12.0).reshape(4, 3), [2.5, 2.5, 2.5, 2.5])
    assert sel.scores().tolist() == [0.0, 0.0, 0.0]
    # One class only: no indicator varies, no F.
    for score in ("correlation", "anova"):
        one = start(3, score=score)
        one.learn_instances(np.arange(12.0).reshape(4, 3), [1, 1, 1, 1])
        assert one.scores().tolist() == [0.0, 0.0, 0.0]


# ------------------------------------------------------------------ selection


def test_nothing_is_selected_before_the_first_instance_and_ties_go_to_the_lower_index() -> None:
    sel = start(4, num_features=2)
    assert sel.selected() == ()
    X = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    sel.learn_instances(X, [1, 0])  # f0 and f2 correlate perfectly, f3 too (negatively)
    assert sel.selected() == ("f0", "f2")
    assert [f.score for f in sel.selected_features()] == [1.0, 1.0]


def test_more_features_asked_than_there_are_selects_all() -> None:
    sel = start(3, num_features=10)
    sel.learn_instances(np.eye(3), [0, 1, 1])
    assert len(sel.selected()) == 3


# ------------------------------------------------------------------ forgetting


@pytest.mark.parametrize("h", [0.3, 2.0, 7.5])
def test_forgetting_weighs_each_instance_by_two_to_minus_its_age_over_h(h: float) -> None:
    # 200 instances cross several epochs of the sums' unit for these half-lives.
    X, y = regression(n=200)
    sel = start(6, "continuous", half_life=h)
    for lo in range(0, 200, 37):
        sel.learn_instances(X[lo : lo + 37], y[lo : lo + 37])
    w = 2.0 ** (-np.arange(199, -1, -1) / h)
    W = w.sum()
    mx, my = w @ X / W, w @ y / W
    cov = w @ ((X - mx) * (y - my)[:, None])
    vx, vy = w @ ((X - mx) ** 2), w @ ((y - my) ** 2)
    assert rel(sel.scores(), np.abs(cov) / np.sqrt(vx * vy)) < 1e-9
    total = W * 2.0 ** (-(200 - sel.state.epoch_start) / h)
    assert rel([sel.state.weight * 2.0 ** (-(200 - sel.state.epoch_start) / h)], [W]) < 1e-12
    assert total > 0.0


def test_forgetting_follows_a_change_of_the_relevant_feature() -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 4))
    y = np.where(np.arange(600) < 300, X[:, 0], X[:, 3]) + 0.1 * rng.normal(size=600)
    keep, forget = (
        start(4, "continuous", num_features=1),
        start(4, "continuous", num_features=1, half_life=50.0),
    )
    for sel in (keep, forget):
        sel.learn_instances(X, y)
    assert forget.selected() == ("f3",)
    assert abs(keep.scores()[0] - keep.scores()[3]) < 0.2  # the whole history mixes both


def test_anova_degrees_of_freedom_use_the_decayed_weight() -> None:
    X, y = classes(n=90)
    sel = start(6, score="anova", half_life=10.0)
    sel.learn_instances(X, y)
    w = 2.0 ** (-np.arange(89, -1, -1) / 10.0)
    N, K = w.sum(), 3
    m = w @ X / N
    ssb = sum(
        w[y == k].sum() * (w[y == k] @ X[y == k] / w[y == k].sum() - m) ** 2 for k in range(K)
    )
    ssw = sum(
        w[y == k] @ (X[y == k] - w[y == k] @ X[y == k] / w[y == k].sum()) ** 2 for k in range(K)
    )
    assert rel(sel.scores(), (ssb / (K - 1)) / (ssw / (N - K))) < 1e-9


# ------------------------------------------------------------------ batches, sparse, replay


@pytest.mark.parametrize("params", [{}, {"half_life": 0.4}, {"half_life": 3.0, "score": "anova"}])
def test_a_batch_equals_its_instances_one_by_one_dense_and_sparse(params: dict[str, Any]) -> None:
    X, y = classes(n=150)
    X[np.abs(X) < 0.8] = 0.0
    # Declared: a first batch of one instance would resolve auto to a binary target.
    whole, single, sparse = (start(6, "multiclass", **params) for _ in range(3))
    whole.learn_instances(X, y)
    for i in range(150):
        single.learn_instances(X[i : i + 1], y[i : i + 1])
    sparse.learn_instances(sp.csr_matrix(X[:80]), y[:80])
    sparse.learn_instances(sp.csr_matrix(X[80:]), y[80:])
    assert blob(whole) == blob(single)
    assert sparse.selected() == whole.selected()
    assert rel(sparse.scores(), whole.scores()) < 1e-12


def test_a_sparse_batch_equals_its_sparse_instances_one_by_one() -> None:
    X, y = regression(n=60)
    X[X < 3.5] = 0.0
    whole, single = start(6, "continuous", half_life=1.0), start(6, "continuous", half_life=1.0)
    whole.learn_instances(sp.csr_matrix(X), y)
    for i in range(60):
        single.learn_instances(sp.csr_matrix(X[i : i + 1]), y[i : i + 1])
    assert blob(whole) == blob(single)


def test_the_sums_unit_is_folded_every_32_half_lives() -> None:
    sel = start(2, "continuous", half_life=2.0)
    sel.learn_instances(np.ones((70, 2)) * np.arange(70.0)[:, None], np.arange(70.0))
    assert sel.state.epoch_start == 64
    sel.learn_instances(np.ones((1, 2)), [1.0])
    assert sel.state.epoch_start == 64 and sel.instances_seen == 71


# ------------------------------------------------------------------ targets and refusals


@settings(max_examples=25, deadline=None)
@given(st.permutations([0, 1, 2]), st.booleans(), st.sampled_from(["auto", "correlation", "anova"]))
def test_relabelled_classes_give_the_same_selection_and_scores(
    perm: list[int], as_strings: bool, score: str
) -> None:
    X, y = classes(n=90)
    labels: list[Any] = [perm[v] for v in y]
    if as_strings:
        labels = [f"c{v}" for v in labels]
    a, b = start(6, score=score), start(6, score=score)
    a.learn_instances(X[:40], y[:40])
    a.learn_instances(X[40:], y[40:])
    b.learn_instances(X[:40], labels[:40])
    b.learn_instances(X[40:], labels[40:])
    assert a.selected() == b.selected()
    assert a.scores().tobytes() == b.scores().tobytes()


def test_two_classes_score_alike_whichever_labels_they_have() -> None:
    X, y = classes(k=2)
    runs = []
    for labels in (y, 1 - y, np.where(y == 1, "yes", "no"), y * 2 + 5):
        sel = start(6)
        sel.learn_instances(X, list(labels))
        runs.append(sel.scores().tobytes())
    assert len(set(runs)) == 1


def test_anova_refuses_a_continuous_target_and_changes_nothing() -> None:
    with pytest.raises(InvalidInput, match="anova"):
        start(3, "continuous", score="anova")
    sel = start(3, score="anova")
    before = blob(sel)
    with pytest.raises(InvalidInput, match="continuous"):
        sel.learn_instances(np.eye(3), [0.5, 1.5, 2.25])
    assert blob(sel) == before


def test_a_binary_stream_refuses_a_third_class_and_a_continuous_one_strings() -> None:
    sel = start(3, "binary")
    sel.learn_instances(np.eye(3)[:2], [0, 1])
    before = blob(sel)
    with pytest.raises(InvalidInput, match="binary"):
        sel.learn_instances(np.eye(3)[:1], [2])
    assert blob(sel) == before
    cont = start(3, "continuous")
    with pytest.raises(InvalidInput):
        cont.learn_instances(np.eye(3)[:1], ["a"])


def test_numbers_after_strings_are_refused() -> None:
    sel = start(3)
    sel.learn_instances(np.eye(3)[:2], ["a", "b"])
    with pytest.raises(InvalidInput, match="all numbers or all strings"):
        sel.learn_instances(np.eye(3)[:1], [1])


def test_a_class_first_seen_later_gets_its_sums_at_its_sorted_place() -> None:
    X, y = classes(n=60)
    late, early = start(6, "multiclass", score="anova"), start(6, "multiclass", score="anova")
    order = np.argsort(y == 0, kind="stable")  # class 0 (the lowest label) comes last
    late.learn_instances(X[order], y[order])
    early.learn_instances(X[order][:1], y[order][:1])
    early.learn_instances(X[order][1:], y[order][1:])
    assert late.state.classes == (0, 1, 2)
    assert blob(late) == blob(early)
    assert rel(late.scores(), f_classif(X, y)[0]) < 1e-9


def test_labels_are_needed() -> None:
    with pytest.raises(InvalidInput, match="labels"):
        start(3).learn_instances(np.eye(3))
