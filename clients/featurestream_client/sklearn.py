"""A scikit-learn selector backed by a featurestream server stream.

``FeatureStreamSelector.fit(X, y)`` creates a feature stream with the target
``y`` and posts the columns of ``X`` in order; the server's online selector
decides each column, and the estimator keeps the columns it selected
(``SelectorMixin`` semantics: ``transform`` keeps them in their original
order). ``partial_fit`` posts new columns of the same training rows to the same
stream. ``FeatureStreamInstanceSelector`` is its twin for instance-stream
algorithms (``ofs``, ``fsds``...): the feature space is fixed and
``partial_fit`` posts more rows.

The streams an estimator creates are deleted once their selection is read,
unless ``keep_stream=True``; a stream that ``partial_fit`` keeps writing to
lives until :meth:`close` (or a new ``fit``). Nothing is deleted on garbage
collection: a finalizer cannot safely make network calls, so a stream left by
an estimator never closed stays on the server (``featurestream delete ID``).
Parameters live only in ``__init__`` and the stream is created in ``fit``, so
the estimators clone cleanly inside ``Pipeline``, ``GridSearchCV`` and
``cross_val_score``.

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
from featurestream_client.models import Decisions


class _ServerSelector(SelectorMixin, BaseEstimator):  # type: ignore[misc]
    """What both adapters share: the support mask of the selection, and ``close``."""

    keep_stream: bool

    def close(self) -> None:
        """Delete the stream of the last fit unless ``keep_stream`` (idempotent)."""
        _close(self)

    def _get_support_mask(self) -> npt.NDArray[np.bool_]:
        check_is_fitted(self, "selected_")
        chosen = set(self.selected_)
        return np.array([name in chosen for name in self.feature_names_], dtype=bool)


class FeatureStreamSelector(_ServerSelector):
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
        Seconds to wait for the server (60 by default, as the client: above the
        server's request time budget, 30 s by default, so that a request over it
        gets its 413 and is split instead of timing out).
    keep_stream : bool
        Keep the stream on the server after ``fit`` (needed to add columns with
        ``partial_fit`` after ``fit``); by default it is deleted once the
        selection is read.

    Attributes
    ----------
    stream_id_ : str
        The stream the last ``fit`` created.
    selected_ : tuple of str
        Names of the selected features, in the selector's own order.
    decisions_ : tuple of Decision
        The server's decision for each column posted, in order.
    scores_ : ndarray of shape (n_features_in_,)
        Each column's score in its decision on arrival (NaN where the selector
        gives none; ``GET /v1/algorithms`` says what the algorithm's score means).
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
        chunk_size: int = 20_000,
        api_key: str | None = None,
        timeout: float = 60.0,
        keep_stream: bool = False,
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
        return self._fit(X, y, keep=self.keep_stream)

    def _fit(self, X: Any, y: Any, keep: bool) -> FeatureStreamSelector:
        if y is None:
            raise ValueError(f"{type(self).__name__} needs y (the stream's target).")
        X, y = validate_data(self, X, y, accept_sparse="csc", dtype=np.float64)
        names = self._input_names(X)
        with self._client() as client:
            self._check_algorithm(client)
            _drop_previous(self, client)
            stream = client.create_stream(
                self.algorithm, target=y, params=dict(self.params or {}), id=self.stream_id
            )
            self.stream_id_ = stream.id
            result = stream.add_features(X, names=names)
            if not keep:
                stream.delete()
        self.feature_names_ = list(names)
        self.decisions_: Decisions = result.decisions
        self.stream_deleted_ = not keep
        self.selected_ = tuple(result.selected)
        self.n_samples_fit_ = int(X.shape[0])
        return self

    def partial_fit(self, X: Any, y: Any = None) -> FeatureStreamSelector:
        """Post new columns (of the same training rows) to the stream.

        Before the first ``fit`` this is ``fit(X, y)``, but the stream is kept
        for the next calls until :meth:`close`. Afterwards ``X`` holds only the
        new columns; ``y`` is not needed. ``transform`` then expects
        the old and the new columns, in that order.
        """
        if not hasattr(self, "stream_id_"):
            # The stream lives on for the next calls, until close() (or a new fit).
            return self._fit(X, y, keep=True)
        if getattr(self, "stream_deleted_", False):
            raise ValueError(
                "partial_fit after fit needs keep_stream=True: fit deleted its stream once "
                "the selection was read."
            )
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

    @property
    def scores_(self) -> npt.NDArray[np.float64]:
        check_is_fitted(self, "decisions_")
        return np.array(
            [np.nan if d.score is None else d.score for d in self.decisions_], dtype=np.float64
        )

    def _input_names(self, X: Any) -> list[str]:
        return _input_names(self, X)

    def _check_algorithm(self, client: Client) -> None:
        _check_kind(client, self.algorithm, "features", type(self).__name__)


def _input_names(est: Any, X: Any) -> list[str]:
    names = getattr(est, "feature_names_in_", None)
    if names is not None:
        return [str(n) for n in names]
    return [f"x{i}" for i in range(X.shape[1])]


def _drop_previous(est: Any, client: Client, refit: bool = True) -> None:
    """Delete the stream this estimator made before: a refit replaces it (kept or not);
    ``close`` (``refit=False``) deletes it unless ``keep_stream``."""
    previous = getattr(est, "stream_id_", None)
    if previous is None or getattr(est, "stream_deleted_", False):
        return
    if refit or not est.keep_stream:
        with contextlib.suppress(StreamNotFound):
            client.delete_stream(previous)
        est.stream_deleted_ = True


def _close(est: Any) -> None:
    if getattr(est, "stream_id_", None) is None:
        return
    with est._client() as client:
        _drop_previous(est, client, refit=False)


class FeatureStreamInstanceSelector(_ServerSelector):
    """Select features with a featurestream server's online instance-stream selector.

    The twin of :class:`FeatureStreamSelector` for algorithms whose feature
    space is fixed and whose rows stream in (``ofs``, ``fires``, ``fsds``,
    ``nrfs``). ``fit(X, y)`` creates a stream named after the columns of ``X``,
    posts every row (with its label for supervised algorithms), reads the
    selection and deletes the stream unless ``keep_stream``. ``partial_fit(X, y)``
    creates the stream on its first call and posts more rows on every call; the
    stream lives until :meth:`close` (or a new ``fit``) unless ``keep_stream``.

    Parameters
    ----------
    url, api_key, timeout : see :class:`FeatureStreamSelector`.
    algorithm : str
        An instance-stream algorithm (default ``ofs``).
    params : dict, optional
        The algorithm's parameters.
    stream_id : str, optional
        Id of the stream to create (default: a new id).
    batch_size : int, optional
        Rows per request (default: as many as fit in one).
    keep_stream : bool
        Keep the stream on the server (after ``fit``, and after ``close``).

    Attributes
    ----------
    stream_id_ : str
    selected_ : tuple of str
        Names of the selected features, in the selector's own order.
    scores_ : ndarray of shape (n_features_in_,)
        The selection's score of each column (NaN for the columns not selected,
        or when the selector gives none).
    feature_names_ : list of str
        The stream's feature names (``feature_names_in_``, else ``x0``, ``x1``...).
    n_features_in_ : int
    instances_seen_ : int

    Examples
    --------
    >>> sel = FeatureStreamInstanceSelector(url=url, params={"num_features": 5})  # doctest: +SKIP
    >>> for X_batch, y_batch in batches:  # doctest: +SKIP
    ...     sel.partial_fit(X_batch, y_batch)
    >>> sel.close()  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        algorithm: str = "ofs",
        params: Mapping[str, Any] | None = None,
        stream_id: str | None = None,
        batch_size: int | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        keep_stream: bool = False,
    ) -> None:
        self.url = url
        self.algorithm = algorithm
        self.params = params
        self.stream_id = stream_id
        self.batch_size = batch_size
        self.api_key = api_key
        self.timeout = timeout
        self.keep_stream = keep_stream

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _client(self) -> Client:
        return Client(self.url, api_key=self.api_key, timeout=self.timeout)

    def fit(self, X: Any, y: Any = None) -> FeatureStreamInstanceSelector:
        """Create a stream of the columns of ``X`` and post every row; read the selection."""
        self._post(X, y, reset=True)
        if not self.keep_stream:
            self.close()
        return self

    def partial_fit(self, X: Any, y: Any = None) -> FeatureStreamInstanceSelector:
        """Post more rows (the stream is created on the first call); read the selection."""
        if getattr(self, "stream_deleted_", False):
            raise ValueError(
                "partial_fit after fit needs keep_stream=True: fit deleted its stream once "
                "the selection was read."
            )
        self._post(X, y, reset=not hasattr(self, "stream_id_"))
        return self

    def _post(self, X: Any, y: Any, reset: bool) -> None:
        X, y = _rows(self, X, y, reset)
        with self._client() as client:
            if reset:
                _check_kind(client, self.algorithm, "instances", type(self).__name__)
                _drop_previous(self, client)
                names = _input_names(self, X)
                stream = client.create_stream(
                    self.algorithm,
                    feature_names=names,
                    params=dict(self.params or {}),
                    id=self.stream_id,
                )
                self.stream_id_ = stream.id
                self.stream_deleted_ = False
                self.feature_names_ = names
                self.instances_seen_ = 0
            else:
                stream = client.stream(self.stream_id_)
            result = stream.add_instances(X, y, batch_size=self.batch_size)
            selection = stream.selected()
        self.instances_seen_ = result.instances_seen
        self.selected_ = tuple(selection.names)
        score = {f.name: f.score for f in selection.features}
        self.scores_ = np.array(
            [np.nan if score.get(n) is None else score[n] for n in self.feature_names_],
            dtype=np.float64,
        )


def _rows(est: Any, X: Any, y: Any, reset: bool) -> tuple[Any, Any]:
    if y is None:
        return validate_data(est, X, accept_sparse="csr", dtype=np.float64, reset=reset), None
    checked: tuple[Any, Any] = validate_data(
        est, X, y, accept_sparse="csr", dtype=np.float64, reset=reset
    )
    return checked


def _check_kind(client: Client, algorithm: str, kind: str, estimator: str) -> None:
    kinds = {a.name: a.kind for a in client.algorithms()}
    if algorithm not in kinds:
        raise ValueError(f"Unknown algorithm {algorithm!r}; the server hosts {sorted(kinds)}.")
    if kinds[algorithm] != kind:
        wanted = sorted(k for k, v in kinds.items() if v == kind)
        other = "FeatureStreamSelector" if kind == "instances" else "FeatureStreamInstanceSelector"
        article = "an" if kind == "instances" else "a"
        raise ValueError(
            f"{algorithm!r} selects over {KIND_WORD[kinds[algorithm]]} streams; {estimator} "
            f"needs {article} {KIND_WORD[kind]}-stream algorithm: one of {wanted} (or use "
            f"{other})."
        )


#: A stream kind as a word: "an instance stream", "a feature stream".
KIND_WORD = {"features": "feature", "instances": "instance"}


__all__ = ["FeatureStreamInstanceSelector", "FeatureStreamSelector"]
