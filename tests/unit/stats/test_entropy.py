"""Symmetrical uncertainty against an independent computation with scipy.stats.entropy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from featurestream.stats.entropy import entropy, joint_entropy, symmetrical_uncertainty


def reference_su(a: np.ndarray, b: np.ndarray) -> float:
    table = np.zeros((a.max() + 1, b.max() + 1))
    np.add.at(table, (a, b), 1)
    ha = stats.entropy(table.sum(axis=1))
    hb = stats.entropy(table.sum(axis=0))
    hab = stats.entropy(table.ravel())
    return 0.0 if ha + hb == 0 else 2 * (ha + hb - hab) / (ha + hb)


def test_su_matches_reference() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, 500)
    b = (a + rng.integers(0, 2, 500)) % 3
    assert symmetrical_uncertainty(a, b) == pytest.approx(reference_su(a, b), abs=1e-12)
    assert entropy(a) == pytest.approx(stats.entropy(np.bincount(a)), abs=1e-12)
    assert joint_entropy(a, a) == pytest.approx(entropy(a), abs=1e-12)


def test_su_edge_cases() -> None:
    # A copy has SU 1, independent halves have SU 0, two constants have SU 0 (H = 0).
    assert symmetrical_uncertainty([0, 1, 1, 0], [0, 1, 1, 0]) == pytest.approx(1.0)
    assert symmetrical_uncertainty([0, 0, 1, 1], [0, 1, 0, 1]) == 0.0
    assert symmetrical_uncertainty([2, 2, 2], [0, 0, 0]) == 0.0


codes = arrays(np.int64, 30, elements=st.integers(0, 3))


@given(codes, codes)
def test_su_is_symmetric_and_in_unit_interval(a: np.ndarray, b: np.ndarray) -> None:
    s = symmetrical_uncertainty(a, b)
    assert s == pytest.approx(symmetrical_uncertainty(b, a), abs=1e-12)
    assert -1e-12 <= s <= 1 + 1e-12
    assert s == pytest.approx(reference_su(a, b), abs=1e-9)
