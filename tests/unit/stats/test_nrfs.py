"""NRFS on a window (docs/algorithms/nrfs.md): pieces, determinism, the paper's data."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import linalg
from scipy.spatial import distance
from sklearn.cluster import KMeans
from sklearn.metrics import normalized_mutual_info_score

from featurestream.stats.nrfs import (
    Similarity,
    closest_pair_split,
    density_preserving_sample,
    feature_neighbours,
    local_outlier_factor,
    nrfs,
    remove_noise,
    ridge_coefficients,
    select_by_spectrum,
    spectra,
    subspace_widths,
)
from tests.unit.stats.nrfs_synthetic import make_dataset


def naive_split(Z: np.ndarray) -> tuple[list[int], list[int]]:
    """Step 4 as written: search the closest free pair afresh each time (O(n^3))."""
    free = list(range(Z.shape[0]))
    first: list[int] = []
    second: list[int] = []
    while len(free) >= 2:
        i, j = min(
            itertools.combinations(free, 2),
            key=lambda ij: (np.linalg.norm(Z[ij[0]] - Z[ij[1]]), ij),
        )
        first.append(i)
        second.append(j)
        free.remove(i)
        free.remove(j)
    return sorted(first + free), sorted(second)


def test_closest_pair_split_worked_by_hand() -> None:
    # Six points on a line: 0, 1, 2, 10, 20, 20.5.
    # Closest pair (4, 5) at 0.5: 4 -> first, 5 -> second.
    # Then (0, 1) and (1, 2) tie at 1: the lexicographically first pair (0, 1)
    # wins, 0 -> first, 1 -> second (taking (1, 2) would send 1 to the first half).
    # Left: 2 and 3, distance 8: 2 -> first, 3 -> second.
    Z = np.array([[0.0], [1.0], [2.0], [10.0], [20.0], [20.5]])
    first, second = closest_pair_split(Z)
    assert first.tolist() == [0, 2, 4]
    assert second.tolist() == [1, 3, 5]


@pytest.mark.parametrize("n", [2, 7, 40])
def test_closest_pair_split_matches_naive_search(n: int) -> None:
    rng = np.random.default_rng(n)
    Z = rng.normal(size=(n, 3))
    Z[n // 2] = Z[0]  # a duplicate: a zero distance
    first, second = closest_pair_split(Z)
    assert (first.tolist(), second.tolist()) == naive_split(Z)


def test_density_preserving_sample_sizes() -> None:
    Z = np.random.default_rng(1).normal(size=(100, 2))
    assert density_preserving_sample(Z, 0.25).size == 25  # 100 -> 50 -> 25
    assert density_preserving_sample(Z, 30).size == 25  # 50 > 30, 25 <= 30
    assert density_preserving_sample(Z, 1.0).size == 100
    assert density_preserving_sample(Z, 0.2).size == 13  # 100 -> 50 -> 25 -> 13
    reps = density_preserving_sample(Z, 0.25)
    assert np.all(np.diff(reps) > 0)


def test_feature_neighbourhoods_with_ties() -> None:
    # Standardised columns: f0, f1 (= 2 f0) and f3 (= f0 + 5) coincide, z with
    # |z|^2 = n = 4; f2 = reversed f0 is -z (distance 2|z| = 4); f4 is constant,
    # standardised to 0 (distance |z| = 2 from every other column).
    X = np.array(
        [
            [1.0, 2.0, 4.0, 6.0, 7.0],
            [2.0, 4.0, 3.0, 7.0, 7.0],
            [3.0, 6.0, 2.0, 8.0, 7.0],
            [4.0, 8.0, 1.0, 9.0, 7.0],
        ]
    )
    N = feature_neighbours(X, 3)
    assert N.tolist() == [
        [0, 1, 3],  # distances 0 to f1 and f3: the lower index first
        [1, 0, 3],
        [2, 4, 0],  # f4 at 2, then f0, f1, f3 tie at 4
        [3, 0, 1],
        [4, 0, 1],  # everything at 2
    ]
    assert feature_neighbours(X, 1).tolist() == [[0], [1], [2], [3], [4]]


def test_subspace_widths_are_median_distances() -> None:
    # Column 0: values 0, 1, 3 -> pairwise distances 1, 3, 2 -> median 2.
    # Column 1 is constant -> median 0 -> width 1.
    X = np.array([[0.0, 5.0], [1.0, 5.0], [3.0, 5.0]])
    assert subspace_widths(X, np.array([[0], [1]])).tolist() == [2.0, 1.0]
    # On both columns the distances are the same: still 2.
    assert subspace_widths(X, np.array([[0, 1], [1, 0]])).tolist() == [2.0, 2.0]


@pytest.mark.parametrize(("n", "k"), [(30, 8), (8, 30)])
def test_ridge_primal_equals_dual(n: int, k: int) -> None:
    rng = np.random.default_rng(n * 100 + k)
    B = rng.uniform(size=(3, n, k))
    Y = rng.normal(size=(n, 2))
    lam = 1e-3
    got = ridge_coefficients(B, Y, lam)
    for r in range(3):
        primal = np.linalg.solve(B[r].T @ B[r] + lam * np.eye(k), B[r].T @ Y)
        dual = B[r].T @ np.linalg.solve(B[r] @ B[r].T + lam * np.eye(n), Y)
        np.testing.assert_allclose(primal, dual, rtol=0, atol=1e-10)
        np.testing.assert_allclose(got[r], primal, rtol=0, atol=1e-10)


def test_selection_takes_each_spectrum_in_turn() -> None:
    # c = 3 spectra, h = 4: each spectrum may take ceil(4/3) = 2.
    # Spectrum 0 ranks f0 (0.9), f1 (0.8): takes both.
    # Spectrum 1 ranks f1 (0.95, taken), f2 (0.7), f3 (0.7): takes f2 and f3 (tie:
    # lower index first, both fit). h = 4 reached: spectrum 2 (favouring f4) takes none.
    A = np.array(
        [
            [0.9, 0.1, 0.0],
            [0.8, 0.95, 0.0],
            [0.1, 0.7, 0.0],
            [0.2, 0.7, 0.0],
            [0.0, 0.0, 1.0],
        ]
    )
    assert select_by_spectrum(A, 4) == (0, 1, 2, 3)
    # h = 3, ceil(3/3) = 1 each: f0, then f1 (best of spectrum 1), then f4.
    assert select_by_spectrum(A, 3) == (0, 1, 4)
    # More features asked for than exist: h becomes m = 5, ceil(5/3) = 2 each:
    # f0, f1; then f2, f3 (tied, lower index first); then f4.
    assert select_by_spectrum(A, 9) == (0, 1, 2, 3, 4)
    # h = 5, c = 2, ceil(5/2) = 3: spectrum 0 takes f0, f1, f3, spectrum 1 the rest
    # up to h, f2 then f4.
    assert select_by_spectrum(A[:, :2], 5) == (0, 1, 3, 2, 4)


def test_spectra_solve_the_generalised_problem() -> None:
    X = np.random.default_rng(2).normal(size=(25, 3))
    Y = spectra(X, 2, similarity="gaussian", sigma=1.5)
    W = np.exp(-distance.squareform(distance.pdist(X, "sqeuclidean")) / (2 * 1.5**2))
    D = np.diag(W.sum(axis=1))
    values = linalg.eigh(D - W, D, eigvals_only=True)
    for s in range(2):
        y = Y[:, s]
        lam = float(y @ (D - W) @ y) / float(y @ D @ y)
        assert lam == pytest.approx(values[s + 1], rel=1e-9)
        np.testing.assert_allclose((D - W) @ y, lam * D @ y, atol=1e-12)
        # D-orthogonal to the trivial, constant eigenvector.
        assert abs(float(np.ones(25) @ D @ y)) < 1e-10


def test_noise_removal_drops_the_outlier() -> None:
    rng = np.random.default_rng(4)
    X = np.vstack([rng.normal(size=(49, 2)), [[25.0, 25.0]]])
    kept = remove_noise(X, 0.02)  # floor(0.02 * 50) = 1 instance dropped
    assert kept.tolist() == list(range(49))
    assert remove_noise(X, 0.0).tolist() == list(range(50))


@pytest.mark.parametrize("similarity", ["gaussian", "cosine"])
def test_same_window_same_result(similarity: Similarity) -> None:
    rng = np.random.default_rng(9)
    X = rng.normal(size=(60, 8)) + 3.0
    X[:30, 0] += 4.0
    copy = X.copy()
    a = nrfs(X, 3, clusters=3, representatives=0.5, neighbours=2, similarity=similarity)
    b = nrfs(X, 3, clusters=3, representatives=0.5, neighbours=2, similarity=similarity)
    assert np.array_equal(X, copy)
    assert a.selected == b.selected and len(a.selected) == 3
    assert np.array_equal(a.scores, b.scores)
    assert np.array_equal(a.representatives, b.representatives)
    assert a.scores.shape == (8,) and a.coefficients.shape == (8, 2)


def test_wide_window_uses_the_dual_form() -> None:
    # m + 1 = 41 > n = 30 takes the dual form of the ridge fit; the one feature
    # that separates two groups comes first, and the scores are maxima of
    # L2-normalised columns, so within [0, 1].
    rng = np.random.default_rng(12)
    X = rng.normal(size=(30, 40))
    X[:15, 5] += 6.0
    out = nrfs(X, 5, clusters=2, representatives=5)
    assert len(out.selected) == 5 and out.selected[0] == 5
    assert np.all((out.scores >= 0.0) & (out.scores <= 1.0 + 1e-12))


def test_too_few_instances_is_an_error() -> None:
    with pytest.raises(ValueError, match="clusters"):
        nrfs(np.zeros((3, 2)), 1, clusters=4)


def check_paper_synthetic(seed: int) -> None:
    X, labels = make_dataset(seed)
    out = nrfs(X, 4, representatives=288, neighbours=1)
    assert sorted(out.selected) == [0, 1, 2, 3], f"seed {seed}: {out.selected}"
    # k-means on the four selected features, over all 1280 instances; NMI on the normal ones.
    km = KMeans(n_clusters=4, n_init=10, random_state=seed).fit(X[:, list(out.selected)])
    normal = labels >= 0
    score = normalized_mutual_info_score(labels[normal], km.labels_[normal])
    assert score >= 0.95, f"seed {seed}: NMI {score:.4f}"


@pytest.mark.parametrize(
    "seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)]
)
def test_paper_synthetic_selects_the_four_informative_features(seed: int) -> None:
    check_paper_synthetic(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 130))
def test_paper_synthetic_thirty_data_sets(seed: int) -> None:
    check_paper_synthetic(seed)


def test_local_outlier_factor_equals_the_library_formula() -> None:
    from sklearn.neighbors import LocalOutlierFactor

    Z = np.random.default_rng(21).normal(size=(120, 4))
    ours = local_outlier_factor(Z, 20)
    theirs = -LocalOutlierFactor(n_neighbors=20).fit(Z).negative_outlier_factor_
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_noise_removal_scores_duplicates_as_one_instance() -> None:
    # 25 copies of the origin and 15 scattered instances: counted as separate points
    # the copies would have a density of 1e10 (the library warns, and the suite treats
    # warnings as errors). Scored once, the copies are one ordinary point.
    rng = np.random.default_rng(0)
    X = np.vstack([np.zeros((25, 2)), rng.normal(size=(15, 2))])
    kept = remove_noise(X, 0.1)  # 4 dropped
    assert kept.size == 36 and set(range(25)) <= set(kept.tolist())
    # The dropped ones are the 4 most anomalous of the 16 distinct instances.
    scores = local_outlier_factor(X[24:], 15)
    dropped = sorted(set(range(40)) - set(kept.tolist()))
    assert dropped == sorted(24 + np.argsort(-scores, kind="stable")[:4])
    # All instances equal: every score ties, the highest indices go.
    assert remove_noise(np.ones((40, 3)), 0.1).tolist() == list(range(36))
    out = nrfs(np.vstack([X, X[:5]]), 1, clusters=2, representatives=4)
    assert len(out.selected) == 1
