"""Canonical sparse form: duplicates that cancel leave no explicit zero behind."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from featurestream.selectors.ofs import OFS, OFSParams
from featurestream.stats.sparse import Columns, canonical_csr


def _cancelling() -> tuple[np.ndarray, sp.csr_matrix]:
    """Rows as dense arrays, and as CSR holding an extra +0.5/-0.5 pair at one place.

    Built directly from (data, indices, indptr), so scipy keeps the duplicates
    (a COO matrix would sum them on conversion).
    """
    dense = np.array([[1.0, 0.0, 2.0, 0.0], [0.0, 3.0, 0.0, 4.0]])
    data = np.array([1.0, 0.5, -0.5, 2.0, 3.0, 4.0])
    indices = np.array([0, 1, 1, 2, 1, 3])
    M = sp.csr_matrix((data, indices, np.array([0, 4, 6])), shape=dense.shape)
    assert M.nnz == 6  # the duplicates are really there
    return dense, M


def test_cancelling_duplicates_leave_no_explicit_zero() -> None:
    dense, csr = _cancelling()
    M = canonical_csr(csr)
    assert M.nnz == 4 and (M.data != 0).all()
    assert np.array_equal(M.toarray(), dense)
    a, b = Columns.from_sparse(csr), Columns.from_dense(dense)
    for field in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(a, field), getattr(b, field))


def test_ofs_reads_cancelling_duplicates_as_the_dense_rows() -> None:
    dense, csr = _cancelling()
    names = ["a", "b", "c", "d"]
    one = OFS.start(OFSParams(num_features=2), names)
    two = OFS.start(OFSParams(num_features=2), names)
    u1 = one.learn_instances(dense, [1, 0])
    u2 = two.learn_instances(csr, [1, 0])
    assert u1 == u2 and np.array_equal(one.state.w, two.state.w)
