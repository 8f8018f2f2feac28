"""The drift harness's streams: the truth is what the data says (bench/drift_data.py)."""

from __future__ import annotations

import numpy as np
import pytest

from featurestream.bench.drift_data import DriftSpec, make_stream


def _abs_corr(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    Xc, yc = X - X.mean(0), y - y.mean()
    return np.asarray(np.abs(Xc.T @ yc) / np.sqrt((Xc**2).sum(0) * (yc**2).sum()))


@pytest.mark.parametrize("target", ["binary", "multiclass"])
def test_relevant_features_carry_the_label_in_their_segment_only(target: str) -> None:
    spec = DriftSpec(target=target, segment=4_000, seed=3)
    s = make_stream(spec)
    assert s.y is not None
    for k, concept in enumerate(s.concepts):
        seg = slice(k * 4_000, (k + 1) * 4_000)
        r = _abs_corr(s.X[seg], s.y[seg].astype(float))
        members = concept.groups >= 0
        # |r| of an original with the label: about 0.35 (binary); noise: about 1/sqrt(n).
        assert r[concept.originals].min() > 0.25
        assert r[members].min() > 0.2
        assert r[~members].max() < 0.08
        other = s.concepts[1 - k]
        # The other segment's relevant features are noise here.
        assert r[other.originals].max() < 0.08


def test_the_two_concepts_share_no_feature_and_have_the_declared_sizes() -> None:
    s = make_stream(DriftSpec(segment=100))
    a, b = s.concepts
    assert (a.groups >= 0).sum() == 25 and (b.groups >= 0).sum() == 25
    assert not np.any((a.groups >= 0) & (b.groups >= 0))
    for c in s.concepts:
        assert sorted(c.groups[c.originals].tolist()) == [0, 1, 2, 3, 4]
        assert np.bincount(c.groups[c.groups >= 0]).tolist() == [5, 5, 5, 5, 5]


def test_a_copy_correlates_with_its_own_original() -> None:
    s = make_stream(DriftSpec(segment=5_000, segments=1))
    c = s.concepts[0]
    R = np.corrcoef(s.X.T)
    for j in np.flatnonzero(c.groups >= 0):
        original = c.originals[c.groups[j]]
        if j != original:
            # (x + 0.5 e) / sqrt(1.25) against x: 1 / sqrt(1.25) = 0.894.
            assert R[j, original] == pytest.approx(0.894, abs=0.03)
            others = c.originals[c.originals != original]
            assert np.abs(R[j, others]).max() < 0.06


def test_multiclass_labels_are_three_thirds() -> None:
    s = make_stream(DriftSpec(target="multiclass", segment=9_000, segments=1))
    assert s.y is not None
    counts = np.bincount(s.y)
    assert counts.size == 3 and np.all(np.abs(counts / 9_000 - 1 / 3) < 0.03)


def test_unsupervised_structure_lives_in_the_originals() -> None:
    s = make_stream(DriftSpec(target="unsupervised", segment=5_000, seed=1))
    assert s.y is None
    for k, concept in enumerate(s.concepts):
        X = s.X[k * 5_000 : (k + 1) * 5_000]
        var = X.var(0)
        # An original: loading^2 + 1 = 5; every other feature has unit variance.
        assert np.all(np.abs(var[concept.originals] - 5.0) < 0.4)
        rest = np.setdiff1d(np.arange(100), concept.originals)
        assert np.all(np.abs(var[rest] - 1.0) < 0.1)
        # Two directions carry the originals' covariance (rank 2 plus unit noise).
        ev = np.linalg.eigvalsh(np.cov(X[:, concept.originals].T))[::-1]
        assert ev[1] > 3.0 and ev[2] < 1.3


def test_switch_times_are_exact_for_abrupt_switches() -> None:
    # Without label noise every label is 1[x_R . w > 0] of its own concept, instance by
    # instance, so the data itself says where each concept starts.
    spec = DriftSpec(segment=1_000, segments=3, label_noise=0.0)
    s = make_stream(spec)
    assert s.y is not None
    assert spec.switches == (1_000, 2_000) and spec.n == 3_000 and s.X.shape == (3_000, 100)
    explained = np.array(
        [(s.X[:, c.originals] @ c.signs > 0).astype(np.int64) == s.y for c in s.concepts]
    )
    for k, (lo, hi) in enumerate([(0, 1_000), (1_000, 2_000), (2_000, 3_000)]):
        assert explained[k, lo:hi].all()
        others = np.delete(explained, k, axis=0)[:, lo:hi]
        assert others.mean() < 0.65  # about half, by chance
        assert s.concept_at(lo) is s.concepts[k] and s.concept_at(hi - 1) is s.concepts[k]


def test_gradual_switch_mixes_the_window_with_rising_odds() -> None:
    spec = DriftSpec(switch="gradual", segment=20_000, transition=10_000, seed=2)
    s = make_stream(spec)
    assert s.y is not None and spec.switches == (20_000,)
    old, new = s.concepts
    lo = 15_000

    def mean_r(concept: object, a: int, b: int) -> float:
        r = _abs_corr(s.X[a:b], s.y[a:b].astype(float))  # type: ignore[index]
        return float(r[concept.originals].mean())  # type: ignore[attr-defined]

    # Before the window: old only. Its quarters: the new concept takes over.
    assert mean_r(new, 0, lo) < 0.05
    quarters = [mean_r(new, lo + q * 2_500, lo + (q + 1) * 2_500) for q in range(4)]
    assert quarters == sorted(quarters) and quarters[0] < 0.15 and quarters[3] > 0.25
    assert mean_r(old, 25_000, 40_000) < 0.05
    assert s.concept_at(19_999) is old and s.concept_at(20_000) is new


def test_streams_are_reproducible_from_the_seed() -> None:
    a = make_stream(DriftSpec(target="multiclass", segment=500, seed=7))
    b = make_stream(DriftSpec(target="multiclass", segment=500, seed=7))
    c = make_stream(DriftSpec(target="multiclass", segment=500, seed=8))
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)  # type: ignore[arg-type]
    assert not np.array_equal(a.X, c.X)
    assert all(
        np.array_equal(p.groups, q.groups) for p, q in zip(a.concepts, b.concepts, strict=True)
    )


@pytest.mark.parametrize(
    "kwargs",
    [{"target": "ranking"}, {"switch": "sudden"}, {"copies": 99}, {"segment": 0},
     {"switch": "gradual", "transition": 0}],
)  # fmt: skip
def test_bad_specs_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        DriftSpec(**kwargs)  # type: ignore[arg-type]
