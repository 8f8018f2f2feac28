"""Column arithmetic: correct values, and identical bits under any batching."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from featurestream.stats.columns import (
    correlations,
    cross_dots,
    is_constant_rows,
    row_dots,
    standardize_rows,
)

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


def test_standardised_dots_are_pearson_correlations() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5, 50))
    U, constant = standardize_rows(X)
    assert not constant.any()
    np.testing.assert_allclose(cross_dots(U, U), np.corrcoef(X), atol=1e-12)
    np.testing.assert_allclose(correlations(U, U[0]), np.corrcoef(X)[0], atol=1e-12)


def test_constant_rows_use_peak_to_peak_not_variance() -> None:
    # The mean of three 0.1s is not exactly 0.1; the row is constant all the same.
    X = np.array([[0.1, 0.1, 0.1], [0.0, 0.0, 1e-300]])
    assert is_constant_rows(X).tolist() == [True, False]
    U, constant = standardize_rows(X)
    assert constant.tolist() == [True, False] and not U[0].any()


@given(
    arrays(np.float64, st.tuples(st.integers(1, 9), st.integers(1, 40)), elements=finite),
    st.data(),
)
def test_row_and_cross_dots_do_not_depend_on_batch_shape(
    A: np.ndarray, data: st.DataObject
) -> None:
    B = data.draw(arrays(np.float64, (data.draw(st.integers(1, 7)), A.shape[1]), elements=finite))
    full = cross_dots(A, B)
    for i in range(A.shape[0]):
        assert np.array_equal(full[i], row_dots(B, A[i]))
        assert np.array_equal(full[i], cross_dots(A[i : i + 1], B)[0])
        for j in range(B.shape[0]):
            assert full[i, j] == cross_dots(A[i : i + 1], B[j : j + 1])[0, 0]


@given(arrays(np.float64, st.tuples(st.integers(1, 8), st.integers(2, 30)), elements=finite))
def test_standardize_rows_is_row_by_row(X: np.ndarray) -> None:
    U, c = standardize_rows(X)
    for i in range(X.shape[0]):
        Ui, ci = standardize_rows(X[i])
        assert np.array_equal(U[i], Ui[0]) and c[i] == ci[0]
