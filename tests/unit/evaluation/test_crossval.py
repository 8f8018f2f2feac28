"""Repeated k-fold scores against scikit-learn's cross_val_score on the same folds."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from featurestream.errors import InvalidInput, InvalidParameter
from featurestream.evaluation.compare import paired_5x2cv_t_test
from featurestream.evaluation.crossval import (
    MODELS,
    cross_val_scores,
    five_by_two_differences,
    five_by_two_folds,
    fold_seed,
    infer_task,
    make_model,
    repeated_folds,
)


def class_data(n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    # Column 0 carries the class, columns 1-3 are noise.
    rng = np.random.default_rng(11)
    y = np.repeat([0.0, 1.0], n // 2)
    X = rng.normal(size=(n, 4))
    X[:, 0] += 2.0 * y
    return X, y


def regression_data(n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(12)
    X = rng.normal(size=(n, 3))
    y = 1.5 * X[:, 0] - X[:, 2] + 0.3 * rng.normal(size=n)
    return X, y


def sklearn_scores(
    estimator: object, X: np.ndarray, y: np.ndarray, folds: int, repeats: int, seed: int, cls: bool
) -> np.ndarray:
    splitter = StratifiedKFold if cls else KFold
    return np.array(
        [
            cross_val_score(
                estimator,
                X,
                y,
                cv=splitter(n_splits=folds, shuffle=True, random_state=fold_seed(seed, r)),
            )
            for r in range(repeats)
        ]
    )


@pytest.mark.parametrize("model", MODELS)
def test_scores_equal_cross_val_score_for_class_targets(model: str) -> None:
    X, y = class_data()
    cols = [0, 2]
    ours = cross_val_scores(X, y, cols, model, folds=3, repeats=2, seed=5)
    ref = sklearn_scores(make_model(model, "classification"), X[:, cols], y, 3, 2, 5, True)
    assert ours.shape == (2, 3)
    np.testing.assert_array_equal(ours, ref)


@pytest.mark.parametrize("model", ["knn", "logistic", "linear"])
def test_scores_equal_cross_val_score_for_continuous_targets(model: str) -> None:
    X, y = regression_data()
    cols = [0, 1, 2]
    ours = cross_val_scores(X, y, cols, model, folds=4, repeats=2, seed=9)
    ref = sklearn_scores(make_model(model, "regression"), X[:, cols], y, 4, 2, 9, False)
    np.testing.assert_array_equal(ours, ref)


def test_empty_subset_scores_the_constant_baseline() -> None:
    X, y = class_data()
    ours = cross_val_scores(X, y, [], "knn", folds=2, repeats=1, seed=0)
    ref = sklearn_scores(DummyClassifier(), X[:, :0], y, 2, 1, 0, True)
    np.testing.assert_array_equal(ours, ref)
    Xr, yr = regression_data()
    ours = cross_val_scores(Xr, yr, [], "linear", folds=2, repeats=1, seed=0)
    ref = sklearn_scores(DummyRegressor(), Xr[:, :0], yr, 2, 1, 0, False)
    np.testing.assert_array_equal(ours, ref)


def test_model_mapping() -> None:
    scaled = {
        ("knn", "classification"): KNeighborsClassifier,
        ("logistic", "classification"): LogisticRegression,
        ("linear", "classification"): LogisticRegression,
        ("knn", "regression"): KNeighborsRegressor,
        ("logistic", "regression"): Ridge,
    }
    for (model, task), cls in scaled.items():
        made = make_model(model, task)
        assert type(made) is Pipeline
        steps = [type(step) for _, step in made.steps]  # type: ignore[attr-defined]
        assert steps == [StandardScaler, cls]
    as_is = {
        ("naive_bayes", "classification"): GaussianNB,
        ("linear", "regression"): LinearRegression,
    }
    for (model, task), cls in as_is.items():
        assert type(make_model(model, task)) is cls
    logistic = make_model("logistic", "classification")
    assert logistic.get_params()["logisticregression__max_iter"] == 1000  # type: ignore[attr-defined]
    with pytest.raises(InvalidInput):
        make_model("naive_bayes", "regression")
    with pytest.raises(InvalidParameter):
        make_model("svm", "classification")


def test_scaler_is_fitted_on_the_training_fold_only() -> None:
    # Each fold's score is that of a scaler fitted on the training rows alone,
    # applied to the test rows, then the estimator: no test row moves the scaler.
    X, y = class_data()
    cols = [0, 1, 3]
    ours = cross_val_scores(X, y, cols, "knn", folds=3, repeats=1, seed=4)
    splitter = StratifiedKFold(n_splits=3, shuffle=True, random_state=fold_seed(4, 0))
    by_hand = []
    for train, test in splitter.split(X, y):
        mean = X[train][:, cols].mean(axis=0)
        sd = X[train][:, cols].std(axis=0)
        knn = KNeighborsClassifier().fit((X[train][:, cols] - mean) / sd, y[train])
        by_hand.append(knn.score((X[test][:, cols] - mean) / sd, y[test]))
    np.testing.assert_allclose(ours[0], by_hand)


@pytest.mark.parametrize("model", ["knn", "logistic", "linear"])
def test_scale_sensitive_models_ignore_the_columns_scale(model: str) -> None:
    # A noise column a thousand times larger than the informative one would
    # decide kNN's distances on raw values; standardised, the scores do not move.
    X, y = class_data()
    stretched = X * np.array([1.0, 1000.0, 1.0, 1.0])
    before = cross_val_scores(X, y, [0, 1], model, folds=2, repeats=2, seed=1)
    after = cross_val_scores(stretched, y, [0, 1], model, folds=2, repeats=2, seed=1)
    np.testing.assert_allclose(after, before, atol=1e-12)
    if model == "knn":
        raw = sklearn_scores(KNeighborsClassifier(), stretched[:, [0, 1]], y, 2, 2, 1, True)
        assert raw.mean() < before.mean()


def test_five_by_two_folds_partition_and_stratify() -> None:
    y = np.repeat([0.0, 1.0, 2.0], [6, 10, 4])
    splits = five_by_two_folds(y, seed=3, task="classification")
    assert len(splits) == 5
    for r, repetition in enumerate(splits):
        (train1, test1), (train2, test2) = repetition
        # The two folds swap roles and together cover every row once.
        np.testing.assert_array_equal(np.sort(train1), np.sort(test2))
        np.testing.assert_array_equal(np.sort(train2), np.sort(test1))
        np.testing.assert_array_equal(np.sort(np.concatenate([test1, test2])), np.arange(20))
        # Stratified: each half holds half of every class.
        assert np.bincount(y[test1].astype(int)).tolist() == [3, 5, 2]
        ref = StratifiedKFold(2, shuffle=True, random_state=fold_seed(3, r)).split(y, y)
        for (a, b), (c, d) in zip(repetition, ref, strict=True):
            np.testing.assert_array_equal(a, c)
            np.testing.assert_array_equal(b, d)
    # Repetitions shuffle differently; the seed fixes them all.
    assert not np.array_equal(splits[0][0][1], splits[1][0][1])
    again = five_by_two_folds(y, seed=3, task="classification")
    assert all(
        np.array_equal(a[1], b[1])
        for r1, r2 in zip(splits, again, strict=True)
        for a, b in zip(r1, r2, strict=True)
    )


def test_five_by_two_differences_pair_the_folds() -> None:
    X, y = class_data()
    p = five_by_two_differences(X, y, [0], [1], "naive_bayes", seed=4)
    a = cross_val_scores(X, y, [0], "naive_bayes", folds=2, repeats=5, seed=4)
    b = cross_val_scores(X, y, [1], "naive_bayes", folds=2, repeats=5, seed=4)
    np.testing.assert_array_equal(p, a - b)
    assert p.shape == (5, 2)
    # The informative column beats the noise column on every fold.
    assert np.all(p > 0)
    assert paired_5x2cv_t_test(p).statistic > 0


def test_infer_task() -> None:
    assert infer_task([0.0, 1.0, 1.0]) == "classification"
    assert infer_task([0.0, 1.5]) == "regression"
    assert infer_task(np.arange(21.0)) == "regression"


def test_guards() -> None:
    X, y = class_data(20)
    rare = y.copy()
    rare[0] = 2.0  # a class of one row cannot be stratified into 2 folds
    with pytest.raises(InvalidInput):
        cross_val_scores(X, rare, [0], "logistic", folds=2, task="classification")
    with pytest.raises(InvalidInput):
        repeated_folds(np.zeros(6), folds=2, repeats=1, seed=0, task="classification")
    with pytest.raises(InvalidInput):
        # 8 rows, 2 folds: 4 training rows, fewer than the 5 neighbours.
        cross_val_scores(X[6:14], y[6:14], [0], "knn", folds=2)
    with pytest.raises(InvalidInput):
        cross_val_scores(X, y, [4], "knn", folds=2)
    with pytest.raises(InvalidInput):
        cross_val_scores(X, y[:-1], [0], "knn", folds=2)
    with pytest.raises(InvalidParameter):
        cross_val_scores(X, y, [0], "knn", folds=1)
    with pytest.raises(InvalidParameter):
        cross_val_scores(X, y, [0], "knn", seed=-1)
