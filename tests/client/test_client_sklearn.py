"""The scikit-learn adapter: SelectorMixin semantics, Pipeline, cross_val_score, clones."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import featurestream_client as fc
from featurestream_client import Client, FeatureStreamSelector
from tests import support
from tests.client.live import LiveServer

NAMES = support.names(30)


def test_fit_selects_and_transforms_in_original_order(
    live: LiveServer, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    sel = FeatureStreamSelector(
        url=live.url, params={"alpha": 0.01}, chunk_size=7, keep_stream=True
    )
    assert sel.fit(X, y) is sel
    assert set(sel.selected_) == {"x21", "x27"} and len(sel.decisions_) == 30
    assert np.flatnonzero(sel.get_support()).tolist() == [21, 27]
    np.testing.assert_array_equal(sel.transform(X), X[:, [21, 27]])
    assert sel.get_feature_names_out().tolist() == ["x21", "x27"]
    with Client(live.url) as c:
        stream = c.stream(sel.stream_id_)
        assert set(stream.selected().names) == {"x21", "x27"}
        assert len([e for e in stream.iter_events() if e.type == "batch"]) == 5


def test_dataframes_keep_their_column_names(
    live: LiveServer, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    frame = pd.DataFrame(X, columns=NAMES)
    sel = FeatureStreamSelector(url=live.url).fit(frame, pd.Series(y))
    assert sel.get_feature_names_out().tolist() == ["f21", "f27"]
    out = sel.set_output(transform="pandas").transform(frame)
    assert list(out.columns) == ["f21", "f27"]
    sparse = FeatureStreamSelector(url=live.url).fit(sp.csr_matrix(X), y)
    assert sparse.get_support().tolist() == sel.get_support().tolist()
    assert [d.accepted for d in sparse.decisions_] == [d.accepted for d in sel.decisions_]


def test_in_a_pipeline_with_cross_validation(
    live: LiveServer, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    pipe = make_pipeline(
        FeatureStreamSelector(url=live.url, params={"alpha": 0.01}, keep_stream=False),
        StandardScaler(),
        LogisticRegression(),
    )
    with Client(live.url) as c:
        before = {s.id for s in c.streams()}
        scores = cross_val_score(pipe, X, y, cv=KFold(3, shuffle=True, random_state=0))
        assert {s.id for s in c.streams()} == before  # keep_stream=False cleans up
    assert scores.shape == (3,) and scores.min() > 0.85
    fitted = pipe.fit(X, y)
    assert fitted.predict(X).shape == (569,)
    assert fitted[0].get_support().sum() == 2


def test_clones_share_parameters_not_streams(
    live: LiveServer, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    sel = FeatureStreamSelector(url=live.url, params={"alpha": 0.05})
    copy = clone(sel)
    assert copy.get_params() == sel.get_params() and not hasattr(copy, "stream_id_")
    sel.fit(X, y)
    copy.fit(X, y)
    assert sel.stream_id_ != copy.stream_id_ and sel.selected_ == copy.selected_
    first = sel.stream_id_
    sel.fit(X, y)  # refit: the stream it made before is replaced
    with Client(live.url) as c, pytest.raises(fc.StreamNotFound):
        c.stream(first).selected()


def test_partial_fit_posts_new_columns_of_the_same_rows(
    live: LiveServer, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    sel = FeatureStreamSelector(url=live.url)
    sel.partial_fit(X[:, :20], y)  # the first call is a fit
    assert sel.n_features_in_ == 20 and set(sel.selected_) <= set(sel.feature_names_)
    sel.partial_fit(X[:, 20:])
    assert sel.n_features_in_ == 30 and set(sel.selected_) == {"x21", "x27"}
    full = FeatureStreamSelector(url=live.url).fit(X, y)
    assert sel.decisions_ == full.decisions_
    np.testing.assert_array_equal(sel.transform(X), full.transform(X))
    with pytest.raises(ValueError, match="rows"):
        sel.partial_fit(X[:10, :2])


def test_only_feature_stream_algorithms_and_a_target(live: LiveServer) -> None:
    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match="feature-stream algorithm"):
        FeatureStreamSelector(url=live.url, algorithm="ofs").fit(X, np.ones(20))
    with pytest.raises(ValueError, match="Unknown algorithm"):
        FeatureStreamSelector(url=live.url, algorithm="nope").fit(X, np.ones(20))
    with pytest.raises(ValueError, match="needs y"):
        FeatureStreamSelector(url=live.url).fit(X, None)
    with pytest.raises(fc.InvalidParameter):
        FeatureStreamSelector(url=live.url, params={"alpha": 3}).fit(X, np.arange(20.0))


def test_the_adapters_wait_longer_than_the_servers_time_budget() -> None:
    """A request over the budget (30 s) must reach its 413 (then split), not time out."""
    from featurestream.config import Settings
    from featurestream_client.sklearn import (
        FeatureStreamInstanceSelector,
        FeatureStreamSelector,
    )

    budget = Settings().request_time_budget
    assert FeatureStreamSelector().timeout > budget
    assert FeatureStreamInstanceSelector().timeout > budget
