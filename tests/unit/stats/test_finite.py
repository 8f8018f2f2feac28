"""all_finite: the one-pass finiteness check against ``np.isfinite(A).all()``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from featurestream.stats.finite import all_finite


@settings(max_examples=200, deadline=None)
@given(
    rows=st.integers(1, 90),
    cols=st.integers(1, 90),
    bad=st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.sampled_from([np.nan, np.inf, -np.inf, 1e308, -1e308, 0.0, -0.0, 5e-324]),
        ),
        max_size=4,
    ),
    one_d=st.booleans(),
    transpose=st.booleans(),
)
def test_all_finite_agrees_with_isfinite(
    rows: int, cols: int, bad: list[tuple[int, float]], one_d: bool, transpose: bool
) -> None:
    A = np.random.default_rng(rows * 97 + cols).normal(size=(rows, cols)) * 1e3
    for at, value in bad:
        A.flat[at % A.size] = value
    if transpose:
        A = A.T  # not C-contiguous
    if one_d:
        A = A.reshape(-1)
    assert all_finite(A) == bool(np.isfinite(A).all())


def test_sums_that_overflow_are_checked_exactly() -> None:
    A = np.full((100, 100), 1e308)  # every row sum overflows, every value is finite
    assert all_finite(A)
    A[3, 4] = np.inf
    assert not all_finite(A)
    A[3, 4] = np.nan
    assert not all_finite(A)
    assert all_finite(np.zeros((0, 5)))
