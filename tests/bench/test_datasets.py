"""The benchmark data sets: shapes, sparsity, determinism and the planted features."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

from featurestream.bench.datasets import (
    FEATURE_SPECS,
    INSTANCE_SPECS,
    feature_spec,
    instance_spec,
    make_features,
    make_instances,
)
from featurestream.selectors import SAOLA, SAOLAParams


def test_full_specs_have_the_papers_shapes() -> None:
    assert (FEATURE_SPECS["dorothea"].n, FEATURE_SPECS["dorothea"].b) == (800, 100_000)
    assert (FEATURE_SPECS["thrombin"].n, FEATURE_SPECS["thrombin"].b) == (2_000, 139_351)
    assert (FEATURE_SPECS["news20"].n, FEATURE_SPECS["news20"].b) == (9_996, 1_355_191)
    assert FEATURE_SPECS["news20"].nnz == 4_500_000
    assert (FEATURE_SPECS["dense"].n, FEATURE_SPECS["dense"].b) == (2_000, 20_000)
    assert INSTANCE_SPECS["stream-d1000"].d == 1_000
    assert INSTANCE_SPECS["stream-d100000"].d == 100_000


def test_dorothea_is_binary_csc_with_about_one_percent_non_zeros() -> None:
    d = make_features(feature_spec("dorothea"))
    assert scipy.sparse.issparse(d.X) and d.X.format == "csc"
    assert d.X.shape == (800, 100_000)
    assert 0.008 <= d.nnz / (800 * 100_000) <= 0.011
    assert set(np.unique(d.X.data).tolist()) == {1.0}
    assert set(np.unique(d.y).tolist()) == {0.0, 1.0}
    assert len(d.relevant) == 10 and len(d.stands_for) == 30


@pytest.mark.parametrize("name", ["dorothea", "thrombin", "news20", "dense"])
def test_same_seed_same_data_other_seed_other_data(name: str) -> None:
    spec = feature_spec(name, quick=True)
    a, b, c = make_features(spec, 3), make_features(spec, 3), make_features(spec, 4)
    if spec.sparse:
        assert (a.X != b.X).nnz == 0 and (a.X != c.X).nnz > 0
    else:
        assert np.array_equal(a.X, b.X) and not np.array_equal(a.X, c.X)
    assert np.array_equal(a.y, b.y) and a.relevant == b.relevant


def test_scaled_spec_keeps_the_density() -> None:
    spec = FEATURE_SPECS["thrombin"].scaled(500, 10_000)
    d = make_features(spec)
    density = d.nnz / (500 * 10_000)
    assert abs(density - 0.007) < 0.002


def test_news20_rows_are_unit_length_positive_values() -> None:
    d = make_features(feature_spec("news20", quick=True))
    assert d.X.data.min() > 0
    norms = np.sqrt(np.asarray(d.X.multiply(d.X).sum(axis=1)).ravel())
    assert np.allclose(norms[norms > 0], 1.0)


def test_copies_are_redundant_with_their_original() -> None:
    d = make_features(feature_spec("dorothea", quick=True), seed=5)
    index = {n: i for i, n in enumerate(d.names)}
    dense = d.X.toarray()
    for copy, original in d.stands_for.items():
        if copy == original:
            continue
        r_copy = np.corrcoef(dense[:, index[copy]], dense[:, index[original]])[0, 1]
        r_y = np.corrcoef(dense[:, index[original]], d.y)[0, 1]
        assert r_copy > 0.8 and r_y > 0.1


def test_recall_counts_a_feature_found_through_its_copy() -> None:
    d = make_features(feature_spec("dorothea", quick=True))
    first = d.relevant[0]
    copy = next(c for c, o in d.stands_for.items() if o == first and c != first)
    assert d.recall([copy]) == d.recall([first]) == 1 / len(d.relevant)
    assert d.recall([first, copy]) == 1 / len(d.relevant)
    noise = next(n for n in d.names if n not in d.stands_for)
    assert d.recall([noise]) == 0.0


def test_saola_finds_the_planted_features_and_drops_copies() -> None:
    d = make_features(feature_spec("thrombin", quick=True))
    sel = SAOLA.start(SAOLAParams(), d.y)
    sel.learn_features(d.names, d.columns(0, d.b))
    chosen = sel.selected()
    assert d.recall(chosen) == 1.0
    planted = [n for n in chosen if n in d.stands_for]
    # One representative per planted feature: copies are redundant.
    assert len(planted) == len({d.stands_for[n] for n in planted})


def test_columns_are_feature_major_as_selectors_take_them() -> None:
    d = make_features(feature_spec("dorothea", quick=True))
    part = d.columns(10, 25)
    assert part.shape == (15, d.n) and part.format == "csr"
    assert np.array_equal(part.toarray(), d.X[:, 10:25].toarray().T)
    dense = make_features(feature_spec("dense", quick=True))
    block = dense.columns(0, 7)
    assert block.shape == (7, dense.n) and block.flags.c_contiguous


def test_sparse_instances_are_csr_float32_exact_with_planted_features() -> None:
    s = make_instances(instance_spec("stream-d100000", quick=True))
    assert s.X.format == "csr" and s.X.shape == (200, 2_000)
    assert np.array_equal(s.X.data, s.X.data.astype(np.float32).astype(np.float64))
    cols = [s.names.index(r) for r in s.relevant]
    assert (np.diff(s.X[:, cols].tocsc().indptr) == s.X.shape[0]).all()  # always present
    assert set(np.unique(s.y).tolist()) == {-1.0, 1.0}
    dense = make_instances(instance_spec("stream-d1000", quick=True))
    assert isinstance(dense.X, np.ndarray) and dense.rows(0, 5, "float32").dtype == np.float32


def test_instance_recall() -> None:
    s = make_instances(instance_spec("stream-d1000", quick=True))
    assert s.recall(s.relevant[:5]) == 0.5
    assert s.recall(["nope"]) == 0.0
