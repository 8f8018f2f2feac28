"""Cross-validated scores of a feature subset, and the 5x2cv design for comparing two.

Folds come from scikit-learn: ``StratifiedKFold`` for class targets, ``KFold``
for continuous ones, both shuffled with a ``random_state`` derived from the
caller's seed and the repetition number (``fold_seed``), so a seed fixes every
fold of every repetition and two column subsets are always scored on the same
folds (the pairing the 5x2cv tests rely on).

Models (``make_model``), by name and kind of target:

============  ==========================================  ============================
name          class target (score: accuracy)             continuous target (score: R^2)
============  ==========================================  ============================
knn           scaled KNeighborsClassifier()               scaled KNeighborsRegressor()
logistic      scaled LogisticRegression(max_iter=1000)    scaled Ridge(), the
                                                          L2-penalised linear model,
                                                          as logistic regression's
                                                          default is
naive_bayes   GaussianNB()                                rejected (``InvalidInput``)
linear        scaled LogisticRegression(max_iter=1000)    LinearRegression()
============  ==========================================  ============================

"Scaled" is ``make_pipeline(StandardScaler(), estimator)``: kNN's Euclidean
distances and the L2 penalty of logistic regression and ridge depend on the
scale of each column, so the columns are standardised first, with the mean and
standard deviation of the training fold alone (the pipeline fits the scaler on
each training fold and applies it to the test fold, so nothing of a test fold
leaks into the model). ``GaussianNB`` (one mean and variance per column and
class) and unpenalised ``LinearRegression`` give the same predictions whatever
the scale of the columns, so they are used as they are.

An empty column subset is scored by the constant model that uses no feature:
``DummyClassifier()`` (the most frequent class of the training fold) or
``DummyRegressor()`` (its mean), the baseline any selection should beat.
Scores are the estimator's own ``score``, as ``cross_val_score`` uses by default.

References
----------
Dietterich, "Approximate Statistical Tests for Comparing Supervised
Classification Learning Algorithms", Neural Computation 10(7), 1998 (the 5x2cv
design).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt
from sklearn.base import clone
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from featurestream.errors import InvalidInput, InvalidParameter

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
Task = Literal["classification", "regression"]
Split = tuple[IntArray, IntArray]

MODELS = ("knn", "logistic", "naive_bayes", "linear")
# A target with integral values and at most this many distinct ones is a class target.
MAX_CLASSES = 20
# KNeighbors* default n_neighbors: every training fold needs at least this many rows.
KNN_NEIGHBORS = 5

__all__ = [
    "MODELS",
    "Estimator",
    "cross_val_scores",
    "five_by_two_differences",
    "five_by_two_folds",
    "fold_seed",
    "infer_task",
    "make_model",
    "repeated_folds",
]


class Estimator(Protocol):
    """What is used of a scikit-learn estimator here."""

    def fit(self, x: FloatArray, y: FloatArray) -> Any: ...

    def score(self, x: FloatArray, y: FloatArray) -> float: ...


def infer_task(y: npt.ArrayLike) -> Task:
    """Classification when every target value is integral and there are at most 20 of them.

    The service keeps targets as float64, so the kind is read from the values.

    Examples
    --------
    >>> infer_task([0.0, 1.0, 1.0, 2.0]), infer_task([0.5, 1.0, 2.0])
    ('classification', 'regression')
    """
    v = np.asarray(y, dtype=np.float64)
    if np.all(v == np.round(v)) and np.unique(v).size <= MAX_CLASSES:
        return "classification"
    return "regression"


def _scaled(estimator: Any) -> Estimator:
    """``estimator`` behind a ``StandardScaler`` fitted on the same (training) rows."""
    return make_pipeline(StandardScaler(), estimator)  # type: ignore[no-any-return]


def make_model(model: str, task: Task) -> Estimator:
    """A fresh, unfitted scikit-learn estimator for ``model`` and ``task`` (module table).

    Examples
    --------
    >>> make_model("linear", "regression")
    LinearRegression()
    >>> make_model("linear", "classification")
    Pipeline(steps=[('standardscaler', StandardScaler()),
                    ('logisticregression', LogisticRegression(max_iter=1000))])
    """
    if model not in MODELS:
        raise InvalidParameter(
            f"The 'model' parameter must be one of {', '.join(MODELS)}. Got {model!r} instead.",
            parameter="model",
        )
    if task == "classification":
        if model == "knn":
            return _scaled(KNeighborsClassifier())
        if model == "naive_bayes":
            return GaussianNB()  # type: ignore[no-any-return]
        return _scaled(LogisticRegression(max_iter=1000))
    if model == "knn":
        return _scaled(KNeighborsRegressor())
    if model == "logistic":
        return _scaled(Ridge())
    if model == "linear":
        return LinearRegression()  # type: ignore[no-any-return]
    raise InvalidInput("naive_bayes needs a class target, not a continuous one.", field="model")


def fold_seed(seed: int, repeat: int) -> int:
    """The ``random_state`` of the fold splitter of repetition ``repeat`` (from 0).

    Drawn from ``numpy.random.SeedSequence([seed, repeat])`` rather than
    ``seed + repeat``, so that distinct (seed, repeat) pairs never share folds.

    Examples
    --------
    >>> fold_seed(0, 0) == fold_seed(0, 0), fold_seed(0, 1) == fold_seed(1, 0)
    (True, False)
    """
    if seed < 0:
        raise InvalidParameter(
            f"The 'seed' parameter must be a non-negative integer. Got {seed} instead.",
            parameter="seed",
        )
    return int(np.random.SeedSequence([seed, repeat]).generate_state(1)[0])


def _splitter(task: Task, folds: int, random_state: int) -> KFold | StratifiedKFold:
    if task == "classification":
        return StratifiedKFold(n_splits=folds, shuffle=True, random_state=random_state)
    return KFold(n_splits=folds, shuffle=True, random_state=random_state)


def repeated_folds(
    y: npt.ArrayLike, *, folds: int, repeats: int, seed: int, task: Task
) -> list[list[Split]]:
    """(train, test) index pairs: ``repeats`` lists of ``folds`` splits each.

    Raises ``InvalidInput`` when stratification is impossible: a class target
    needs at least 2 classes and ``folds`` rows of each (scikit-learn only warns
    for a smaller class, and its folds then miss it).

    Examples
    --------
    >>> y = [0, 0, 0, 0, 1, 1, 1, 1]
    >>> splits = repeated_folds(y, folds=2, repeats=5, seed=7, task="classification")
    >>> len(splits), len(splits[0]), [len(test) for _, test in splits[0]]
    (5, 2, [4, 4])
    """
    if folds < 2:
        raise InvalidParameter(
            f"The 'folds' parameter must be an integer >= 2. Got {folds} instead.",
            parameter="folds",
        )
    if repeats < 1:
        raise InvalidParameter(
            f"The 'repeats' parameter must be an integer >= 1. Got {repeats} instead.",
            parameter="repeats",
        )
    v = np.asarray(y, dtype=np.float64)
    if task == "classification":
        _, counts = np.unique(v, return_counts=True)
        if counts.size < 2 or counts.min() < folds:
            raise InvalidInput(
                f"Stratified {folds}-fold cross-validation needs at least 2 classes and "
                f"{folds} instances of each; got class sizes {sorted(counts.tolist())}.",
                field="y",
            )
    elif v.shape[0] < folds:
        raise InvalidInput(
            f"{folds}-fold cross-validation needs at least {folds} instances, got {v.shape[0]}.",
            field="y",
        )
    placeholder = np.zeros((v.shape[0], 1))
    return [
        [
            (np.asarray(train, dtype=np.intp), np.asarray(test, dtype=np.intp))
            for train, test in _splitter(task, folds, fold_seed(seed, r)).split(placeholder, v)
        ]
        for r in range(repeats)
    ]


def five_by_two_folds(y: npt.ArrayLike, seed: int, task: Task) -> list[list[Split]]:
    """The 5 replications of 2-fold cross-validation of the 5x2cv tests.

    Examples
    --------
    >>> splits = five_by_two_folds([0, 1] * 4, seed=0, task="classification")
    >>> [sorted(np.concatenate([splits[0][0][1], splits[0][1][1]]).tolist())]
    [[0, 1, 2, 3, 4, 5, 6, 7]]
    """
    return repeated_folds(y, folds=2, repeats=5, seed=seed, task=task)


def _checked(
    X: npt.ArrayLike,  # noqa: N803 (scikit-learn's name for the feature matrix)
    y: npt.ArrayLike,
    task: Task | None,
) -> tuple[FloatArray, FloatArray, Task]:
    a = np.asarray(X, dtype=np.float64)
    v = np.asarray(y, dtype=np.float64)
    if a.ndim != 2:
        raise InvalidInput(f"Expected X as an n x d matrix, got {a.ndim} dimension(s).", field="X")
    if v.ndim != 1 or v.shape[0] != a.shape[0]:
        raise InvalidInput(
            f"Expected y as a vector of {a.shape[0]} values, got shape {v.shape}.", field="y"
        )
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(v))):
        raise InvalidInput("X and y must be finite.", field="X")
    return a, v, infer_task(v) if task is None else task


def _columns(columns: Sequence[int], d: int) -> list[int]:
    cols = [int(c) for c in columns]
    if any(c < 0 or c >= d for c in cols):
        raise InvalidInput(f"Column indices must lie in [0, {d}); got {cols}.", field="columns")
    return cols


def _score_splits(
    a: FloatArray, v: FloatArray, cols: list[int], model: str, task: Task, splits: list[Split]
) -> FloatArray:
    """Fit a fresh estimator per split on the training rows, score it on the test rows."""
    if not cols:
        # No feature: the constant baseline (module docstring).
        prototype: Estimator = DummyClassifier() if task == "classification" else DummyRegressor()
    else:
        prototype = make_model(model, task)
        smallest = min(train.size for train, _ in splits)
        if model == "knn" and smallest < KNN_NEIGHBORS:
            raise InvalidInput(
                f"knn needs {KNN_NEIGHBORS} training instances per fold, got {smallest}.",
                field="y",
            )
    xc = a[:, cols]
    scores = np.empty(len(splits), dtype=np.float64)
    for i, (train, test) in enumerate(splits):
        estimator: Estimator = clone(prototype)
        estimator.fit(xc[train], v[train])
        scores[i] = estimator.score(xc[test], v[test])
    return scores


def cross_val_scores(
    X: npt.ArrayLike,  # noqa: N803 (scikit-learn's name for the feature matrix)
    y: npt.ArrayLike,
    columns: Sequence[int],
    model: str,
    folds: int = 5,
    repeats: int = 1,
    seed: int = 0,
    *,
    task: Task | None = None,
) -> FloatArray:
    """Scores of ``model`` on the columns ``columns`` of X over repeated k-fold splits.

    For a non-empty ``columns``, row r equals scikit-learn's
    ``cross_val_score(make_model(model, task), X[:, columns], y, cv=splitter)``
    with ``splitter`` a shuffled ``StratifiedKFold`` (class target) or ``KFold``
    of ``folds`` splits and ``random_state=fold_seed(seed, r)``.

    Parameters
    ----------
    X
        n x d matrix of features.
    y
        The n target values.
    columns
        Indices of the columns to use; empty for the constant baseline.
    model
        One of ``MODELS`` (module table).
    folds, repeats, seed
        The design: ``repeats`` shuffles, each cut into ``folds`` folds.
    task
        ``"classification"`` or ``"regression"``; ``None`` asks ``infer_task``.

    Returns
    -------
    numpy.ndarray
        ``repeats`` x ``folds`` scores (accuracy, or R^2 for a continuous target).

    Examples
    --------
    >>> X = np.array([[0.0, 5.0], [0.2, 1.0], [0.1, 3.0], [1.0, 2.0],
    ...               [0.9, 4.0], [1.1, 0.0], [0.05, 2.0], [0.95, 1.0]])
    >>> y = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0])
    >>> cross_val_scores(X, y, [0], "naive_bayes", folds=2)
    array([[1., 1.]])
    """
    a, v, kind = _checked(X, y, task)
    cols = _columns(columns, a.shape[1])
    splits = repeated_folds(v, folds=folds, repeats=repeats, seed=seed, task=kind)
    flat = [split for repetition in splits for split in repetition]
    return _score_splits(a, v, cols, model, kind, flat).reshape(repeats, folds)


def five_by_two_differences(
    X: npt.ArrayLike,  # noqa: N803 (scikit-learn's name for the feature matrix)
    y: npt.ArrayLike,
    columns_a: Sequence[int],
    columns_b: Sequence[int],
    model: str,
    seed: int = 0,
    *,
    task: Task | None = None,
) -> FloatArray:
    """The 5 x 2 matrix p_i^(j) = score(a) - score(B) on fold j of replication i.

    Both subsets are scored on the same ``five_by_two_folds``; the result feeds
    ``compare.paired_5x2cv_t_test`` and ``compare.combined_5x2cv_f_test``.

    Examples
    --------
    Column 0 separates the classes, column 1 is noise:

    >>> X = np.array([[0.0, 5.0], [0.2, 1.0], [0.1, 3.0], [1.0, 2.0],
    ...               [0.9, 4.0], [1.1, 0.0], [0.05, 2.0], [0.95, 1.0]])
    >>> y = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0])
    >>> p = five_by_two_differences(X, y, [0], [1], "naive_bayes")
    >>> p.shape, bool(np.all(p >= 0))
    ((5, 2), True)
    """
    return cross_val_scores(
        X, y, columns_a, model, folds=2, repeats=5, seed=seed, task=task
    ) - cross_val_scores(X, y, columns_b, model, folds=2, repeats=5, seed=seed, task=task)
