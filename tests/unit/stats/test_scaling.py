"""Running standardisation against a plain row-by-row Welford loop."""

from __future__ import annotations

import numpy as np
import pytest

from featurestream.stats import scaling
from featurestream.stats.scaling import standardise_running


def welford_loop(
    count: int, mean: np.ndarray, M2: np.ndarray, X: np.ndarray
) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """docs/algorithms/fires.md, `scale: "standard"`, transcribed one instance at a time."""
    mean = mean.copy()
    M2 = M2.copy()
    Z = np.zeros_like(X)
    for i, x in enumerate(X):
        count += 1
        delta = x - mean
        mean = mean + delta / count
        M2 = M2 + delta * (x - mean)
        var = M2 / count
        for j in range(x.shape[0]):
            Z[i, j] = (x[j] - mean[j]) / np.sqrt(var[j]) if var[j] > 0 else 0.0
    return Z, count, mean, M2


def test_two_instances_worked_by_hand() -> None:
    # Feature 0 sees 1 then 3: after the first row mean 1, variance 0 -> 0;
    # after the second mean 2, M2 = 2, variance 2/2 = 1, so (3 - 2)/1 = 1.
    # Feature 1 is constant (5, 5): always variance 0 -> 0.
    X = np.array([[1.0, 5.0], [3.0, 5.0]])
    out = standardise_running(0, np.zeros(2), np.zeros(2), X)
    assert out.Z.tolist() == [[0.0, 0.0], [1.0, 0.0]]
    assert out.count == 2
    assert out.mean.tolist() == [2.0, 5.0]
    assert out.M2.tolist() == [2.0, 0.0]


def test_each_instance_counts_itself() -> None:
    # Continuing from (count 2, mean 2, M2 2) with x = 5: mean 3, M2 = 2 + 3*2 = 8,
    # variance 8/3, z = 2 / sqrt(8/3) = sqrt(1.5).
    out = standardise_running(2, np.array([2.0]), np.array([2.0]), np.array([[5.0]]))
    assert out.Z[0, 0] == pytest.approx(np.sqrt(1.5), rel=1e-15)
    assert out.M2[0] == pytest.approx(8.0, rel=1e-15)


# The loop itself only resolves x - mean to ulp(offset), so 1e-12 agreement is
# asked where offset / spread is moderate (here up to 100 / 0.1): at an offset of
# 1e6 both computations carry errors near 1e-9 relative to the spread.
@pytest.mark.parametrize("offset", [0.0, 100.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_row_by_row_loop_across_batches(seed: int, offset: float) -> None:
    rng = np.random.default_rng(seed)
    d = 7
    X = offset + rng.normal(scale=rng.uniform(0.1, 10.0, size=d), size=(300, d))
    X[:, 3] = 2.5  # a constant feature stays 0 throughout
    X[:40, 5] = 0.0  # zero variance for a while, then not
    count, mean, M2 = 0, np.zeros(d), np.zeros(d)
    ref_count, ref_mean, ref_M2 = 0, np.zeros(d), np.zeros(d)
    for lo, hi in [(0, 1), (1, 50), (50, 51), (51, 300)]:
        out = standardise_running(count, mean, M2, X[lo:hi])
        Z_ref, ref_count, ref_mean, ref_M2 = welford_loop(ref_count, ref_mean, ref_M2, X[lo:hi])
        np.testing.assert_allclose(out.Z, Z_ref, rtol=1e-12, atol=1e-12)
        count, mean, M2 = out.count, out.mean, out.M2
        assert count == ref_count
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(M2, ref_M2, rtol=1e-12, atol=1e-12)
    assert np.all(out.Z[:, 3] == 0.0)


def test_batch_equals_rows_one_at_a_time() -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 4))
    whole = standardise_running(0, np.zeros(4), np.zeros(4), X)
    count, mean, M2 = 0, np.zeros(4), np.zeros(4)
    rows = []
    for x in X:
        out = standardise_running(count, mean, M2, x[None, :])
        rows.append(out.Z[0])
        count, mean, M2 = out.count, out.mean, out.M2
    np.testing.assert_allclose(whole.Z, np.array(rows), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(whole.M2, M2, rtol=1e-12)


def test_inputs_left_alone_and_empty_batch() -> None:
    mean = np.array([1.0, 2.0])
    M2 = np.array([3.0, 4.0])
    X = np.array([[1.0, 1.0]])
    standardise_running(3, mean, M2, X)
    assert mean.tolist() == [1.0, 2.0] and M2.tolist() == [3.0, 4.0]
    assert X.tolist() == [[1.0, 1.0]]
    empty = standardise_running(3, mean, M2, np.zeros((0, 2)))
    assert empty.Z.shape == (0, 2) and empty.count == 3
    assert empty.mean is not mean and empty.mean.tolist() == [1.0, 2.0]


def test_a_wide_batch_in_column_blocks_gives_the_bits_of_one_piece(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(9)
    n, d = 50, 1500  # 75,000 values: more than one block
    X = rng.normal(size=(n, d)) * rng.uniform(0.01, 100.0, size=d) + rng.normal(size=d) * 1e3
    X[:, :7] = 2.5  # variance 0: maps to 0
    for count, mean, M2 in [(0, np.zeros(d), np.zeros(d)), (9, X[0] + 1.0, np.full(d, 4.0))]:
        blocked = standardise_running(count, mean, M2, X)
        monkeypatch.setattr(scaling, "_BLOCK_ELEMENTS", n * d)
        whole = standardise_running(count, mean, M2, X)
        monkeypatch.undo()
        assert np.array_equal(blocked.Z, whole.Z)
        assert np.array_equal(blocked.mean, whole.mean) and np.array_equal(blocked.M2, whole.M2)
        assert blocked.count == whole.count == count + n
