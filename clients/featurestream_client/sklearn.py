"""A scikit-learn selector backed by a featurestream server stream.

``fit(X, y)`` creates a stream with the target ``y`` and posts the columns of
``X`` in order; the server's online selector decides each column, and the
estimator keeps the columns it selected (``SelectorMixin`` semantics:
``transform`` keeps them in their original order). ``partial_fit`` posts new
columns of the same training rows to the same stream. Parameters live only in
``__init__`` and the stream is created in ``fit``, so the estimator clones
cleanly inside ``Pipeline``, ``GridSearchCV`` and ``cross_val_score``.

Needs scikit-learn (the ``sklearn`` extra).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator  # type: ignore[import-untyped, unused-ignore]
from sklearn.feature_selection import SelectorMixin  # type: ignore[import-untyped, unused-ignore]
from sklearn.utils.validation import check_is_fitted, validate_data  # type: ignore[import-untyped, unused-ignore]

from featurestream_client.client import DEFAULT_URL, Client
from featurestream_client.errors import StreamNotFound
from featurestream_client.models import Decision


class FeatureStreamSelector(SelectorMixin, BaseEstimator):  # type: ignore[misc]
    """Select features with a featurestream server's online feature-stream selector.

    Parameters
    ----------
    url : str
        Base URL of the featurestream server.
    algorithm : str
        A feature-stream algorithm (``saola``, ``osfs``, ``fast_osfs``,
        ``alpha_investing``, ``grafting``...; see ``GET /v1/algorithms``).
    params : dict, optional
        The algorithm's parameters (defaults fill the rest).
    stream_id : str, optional
        Id of the stream ``fit`` creates (default: a new id each fit; leave it
        unset for cross-validation, where every fold fits its own stream).
    chunk_size : int
        Columns per request.
    api_key : str, optional
        Bearer key, when the server requires one.
    timeout : float
        Seconds to wait for the server.
    keep_stream : bool
        Keep the stream on the server after ``fit`` (needed by
        ``partial_fit``); with False it is deleted once the selection is read.

    Attributes
    ----------
    stream_id_ : str
        The stream the last ``fit`` created.
    selected_ : tuple of str
        Names of the selected features, in the selector's own order.
    decisions_ : tuple of Decision
        The server's decision for each column posted, in order.
    feature_names_ : list of str
        The names the columns were posted under (``feature_names_in_`` when
        ``X`` has column names, else ``x0``, ``x1``, ...).
    n_features_in_ : int
        Columns seen (grows with ``partial_fit``).

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline  # doctest: +SKIP
    >>> from sklearn.linear_model import LogisticRegression  # doctest: +SKIP
    >>> pipe = make_pipeline(FeatureStreamSelector(url=url), LogisticRegression())  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        algorithm: str = "saola",
        params: Mapping[str, Any] | None = None,
        stream_id: str | None = None,
        chunk_size: int = 2000,
        api_key: str | None = None,
        timeout: float = 30.0,
        keep_stream: bool = True,
    ) -> None:
        self.url = url
        self.algorithm = algorithm
        self.params = params
        self.stream_id = stream_id
        self.chunk_size = chunk_size
        self.api_key = api_key
        self.timeout = timeout
        self.keep_stream = keep_stream

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.required = True
        return tags

    def _client(self) -> Client:
        return Client(
            self.url, api_key=self.api_key, timeout=self.timeout, chunk_columns=self.chunk_size
        )

    def fit(self, X: Any, y: Any) -> FeatureStreamSelector:
        """Create a stream with target ``y`` and post every column of ``X``, in order."""
        if y is None:
            raise ValueError(f"{type(self).__name__} needs y (the stream's target).")
        X, y = validate_data(self, X, y, accept_sparse="csc", dtype=np.float64)
        names = self._input_names(X)
        with self._client() as client:
            self._check_algorithm(client)
            previous = getattr(self, "stream_id_", None)
            if previous is not None:
                # Refitting replaces the stream this estimator made before.
                with contextlib.suppress(StreamNotFound):
                    client.delete_stream(previous)
            stream = client.create_stream(
                self.algorithm, target=y, params=dict(self.params or {}), id=self.stream_id
            )
            self.stream_id_ = stream.id
            result = stream.add_features(X, names=names)
            if not self.keep_stream:
                stream.delete()
        self.feature_names_ = list(names)
        self.decisions_: tuple[Decision, ...] = result.decisions
        self.selected_ = tuple(result.selected)
        self.n_samples_fit_ = int(X.shape[0])
        return self

    def partial_fit(self, X: Any, y: Any = None) -> FeatureStreamSelector:
        """Post new columns (of the same training rows) to the stream.

        Before the first ``fit`` this is ``fit(X, y)``. Afterwards ``X`` holds
        only the new columns; ``y`` is not needed. ``transform`` then expects
        the old and the new columns, in that order.
        """
        if not hasattr(self, "stream_id_"):
            return self.fit(X, y)
        if not self.keep_stream:
            raise ValueError("partial_fit needs keep_stream=True: the stream was deleted.")
        frame_names = getattr(X, "columns", None)
        had_names = hasattr(self, "feature_names_in_")
        if had_names != (frame_names is not None):
            raise ValueError(
                "partial_fit needs the same kind of X as fit: a DataFrame with column names "
                "if fit had one, an array otherwise."
            )
        from sklearn.utils import check_array  # type: ignore[import-untyped, unused-ignore]

        values = check_array(X, accept_sparse="csc", dtype=np.float64)
        if values.shape[0] != self.n_samples_fit_:
            raise ValueError(
                f"partial_fit adds columns of the {self.n_samples_fit_} training rows; "
                f"X has {values.shape[0]} rows."
            )
        start = len(self.feature_names_)
        if frame_names is not None:
            new = [str(c) for c in frame_names]
        else:
            new = [f"x{i}" for i in range(start, start + values.shape[1])]
        with self._client() as client:
            result = client.stream(self.stream_id_).add_features(values, names=new)
        self.feature_names_ = self.feature_names_ + new
        self.decisions_ = self.decisions_ + result.decisions
        self.selected_ = tuple(result.selected)
        self.n_features_in_ = len(self.feature_names_)
        if frame_names is not None:
            self.feature_names_in_ = np.asarray(self.feature_names_, dtype=object)
        return self

    def _get_support_mask(self) -> npt.NDArray[np.bool_]:
        check_is_fitted(self, "selected_")
        chosen = set(self.selected_)
        return np.array([name in chosen for name in self.feature_names_], dtype=bool)

    def _input_names(self, X: Any) -> list[str]:
        names = getattr(self, "feature_names_in_", None)
        if names is not None:
            return [str(n) for n in names]
        return [f"x{i}" for i in range(X.shape[1])]

    def _check_algorithm(self, client: Client) -> None:
        kinds = {a.name: a.kind for a in client.algorithms()}
        if self.algorithm not in kinds:
            raise ValueError(
                f"Unknown algorithm {self.algorithm!r}; the server hosts {sorted(kinds)}."
            )
        if kinds[self.algorithm] != "features":
            feature_algorithms = sorted(k for k, v in kinds.items() if v == "features")
            raise ValueError(
                f"{self.algorithm!r} selects over instance streams; {type(self).__name__} "
                f"needs a feature-stream algorithm: one of {feature_algorithms}."
            )


__all__ = ["FeatureStreamSelector"]
