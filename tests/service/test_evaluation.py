"""GET /evaluation: cross-validation against scikit-learn's own, prequential accuracy."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from featurestream.api import create_app
from featurestream.config import Settings
from featurestream.engine import evaluation as engine_evaluation
from tests import support

# The documented models: scale-sensitive estimators behind a StandardScaler
# (fitted on each training fold by cross_val_score), the scale-invariant as they are.
CLASSIFIERS: dict[str, Any] = {
    "knn": lambda: make_pipeline(StandardScaler(), KNeighborsClassifier()),
    "logistic": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)),
    "naive_bayes": GaussianNB,
    "linear": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)),
}
REGRESSORS: dict[str, Any] = {
    "knn": lambda: make_pipeline(StandardScaler(), KNeighborsRegressor()),
    "logistic": lambda: make_pipeline(StandardScaler(), Ridge()),
    "linear": LinearRegression,
}


def random_state(repeat: int) -> int:
    """The documented fold seed of repetition r: SeedSequence([0, r]), first word."""
    return int(np.random.SeedSequence([0, repeat]).generate_state(1)[0])


def sklearn_scores(make: Any, X: np.ndarray, y: np.ndarray, folds: int, repeats: int, cv: Any):
    out: list[float] = []
    for r in range(repeats):
        splitter = cv(n_splits=folds, shuffle=True, random_state=random_state(r))
        out.extend(cross_val_score(make(), X, y, cv=splitter).tolist())
    return out


def _stream(client: TestClient, sid: str, algorithm: str, X: np.ndarray, y: Any, **kw: Any):
    body = {"id": sid, "algorithm": algorithm, "target": list(y), **kw}
    assert client.post("/v1/streams", json=body).status_code == 201
    cols = [{"name": f"x{j}", "values": X[j].tolist()} for j in range(X.shape[0])]
    if algorithm == "group_saola":
        for j, col in enumerate(cols):
            col["group"] = f"g{j // 2}"
    r = client.post(f"/v1/streams/{sid}/features", json={"features": cols})
    assert r.status_code == 200, r.text
    return r.json()["selected"]


@pytest.mark.parametrize("model", ["knn", "logistic", "naive_bayes", "linear"])
def test_feature_stream_scores_equal_cross_val_score(client: TestClient, model: str) -> None:
    X, y = support.wdbc()
    selected = _stream(client, "e", "saola", X, y.tolist())
    assert len(selected) >= 2
    folds, repeats = 4, 2
    r = client.get("/v1/streams/e/evaluation", params={"model": model, "folds": 4, "repeats": 2})
    assert r.status_code == 200, r.text
    doc = r.json()
    cols = [int(n[1:]) for n in selected]
    rows = X[cols].T  # the columns as sent, instance-major
    expected = sklearn_scores(CLASSIFIERS[model], rows, y, folds, repeats, StratifiedKFold)
    assert doc["fold_scores"] == expected  # the very same numbers
    assert doc["score"] == pytest.approx(np.mean(expected), abs=1e-15)
    assert doc["features"] == len(selected) and doc["score_kind"] == "accuracy"
    assert (doc["kind"], doc["model"], doc["folds"], doc["repeats"]) == (
        "cross_validation",
        model,
        4,
        2,
    )
    singles = [
        sklearn_scores(CLASSIFIERS[model], X[[c]].T, y, folds, repeats, StratifiedKFold)
        for c in cols
    ]
    best = int(np.argmax([np.mean(s) for s in singles]))
    assert doc["best_single"]["name"] == selected[best]
    assert doc["best_single"]["fold_scores"] == singles[best]


def test_continuous_target_scores_r2_with_kfold(client: TestClient) -> None:
    rng = np.random.default_rng(5)
    n = 300
    X = rng.normal(size=(6, n))
    y = 2 * X[1] - X[4] + 0.3 * rng.normal(size=n)
    selected = _stream(client, "c", "saola", X, y.tolist(), target_type="continuous")
    assert "x1" in selected
    cols = [int(n[1:]) for n in selected]
    for model, make in REGRESSORS.items():
        doc = client.get("/v1/streams/c/evaluation", params={"model": model}).json()
        assert doc["score_kind"] == "r2"
        assert doc["fold_scores"] == sklearn_scores(make, X[cols].T, y, 5, 1, KFold)
    r = client.get("/v1/streams/c/evaluation", params={"model": "naive_bayes"})
    assert r.status_code == 422  # no naive Bayes for a continuous target


@pytest.mark.parametrize("algorithm", ["grafting", "osfs", "fast_osfs", "group_saola"])
def test_columns_are_restored_from_their_standardised_form(
    client: TestClient, algorithm: str
) -> None:
    X, y = support.wdbc()
    body = {"id": algorithm, "algorithm": algorithm, "target": y.tolist()}
    assert client.post("/v1/streams", json=body).status_code == 201
    for lo in range(0, 30, 6):  # several batches: members come and go
        cols = [{"name": f"x{j}", "values": X[j].tolist()} for j in range(lo, lo + 6)]
        if algorithm == "group_saola":
            for j, col in enumerate(cols):
                col["group"] = f"g{(lo + j) // 3}"
        r = client.post(f"/v1/streams/{algorithm}/features", json={"features": cols})
        assert r.status_code == 200
    selected = r.json()["selected"]
    assert len(selected) >= 2
    cols = [int(n[1:]) for n in selected]
    doc = client.get(f"/v1/streams/{algorithm}/evaluation", params={"model": "knn"}).json()
    expected = sklearn_scores(CLASSIFIERS["knn"], X[cols].T, y, 5, 1, StratifiedKFold)
    assert doc["fold_scores"] == pytest.approx(expected, abs=1e-12)


def test_streams_that_cannot_be_evaluated_and_bad_queries_get_422(client: TestClient) -> None:
    X, y = support.wdbc()
    for algorithm in ("alpha_investing",):
        _stream(client, algorithm, algorithm, X[:5], y.tolist())
        r = client.get(f"/v1/streams/{algorithm}/evaluation")
        assert r.status_code == 422, r.text
        assert r.json()["type"] == "/problems/evaluation-unavailable"
        assert r.json()["algorithm"] == algorithm
    # OSFS with a discrete test keeps integer codes, not the columns as sent.
    Xd, yd = support.discrete()
    selected = _stream(client, "g2", "osfs", Xd, yd.tolist(), params={"test": "g2"})
    assert selected
    r = client.get("/v1/streams/g2/evaluation")
    assert r.status_code == 422 and r.json()["type"] == "/problems/evaluation-unavailable"
    # group-SAOLA with SU keeps the columns as sent: scored on them.
    selected = _stream(client, "su", "group_saola", Xd, yd.tolist(), params={"test": "su"})
    assert selected
    doc = client.get("/v1/streams/su/evaluation", params={"model": "naive_bayes"}).json()
    cols = [int(n[1:]) for n in selected]
    expected = sklearn_scores(GaussianNB, Xd[cols].T, yd, 5, 1, StratifiedKFold)
    assert doc["fold_scores"] == expected
    for algorithm, params in (("fsds", {"num_features": 2}), ("nrfs", {"num_features": 2})):
        body = {"id": algorithm, "algorithm": algorithm, "params": params}
        body["feature_names"] = ["a", "b", "c"]
        assert client.post("/v1/streams", json=body).status_code == 201
        r = client.get(f"/v1/streams/{algorithm}/evaluation")
        assert r.status_code == 422 and r.json()["type"] == "/problems/evaluation-unavailable"
    _stream(client, "ok", "saola", X[:5], y.tolist())
    r = client.get("/v1/streams/ok/evaluation", params={"model": "svm"})
    assert r.status_code == 422
    assert "knn, logistic, naive_bayes, linear" in r.json()["detail"]
    for q in ({"folds": 1}, {"folds": 11}, {"repeats": 0}, {"repeats": 11}, {"folds": "x"}):
        assert client.get("/v1/streams/ok/evaluation", params=q).status_code == 422
    assert client.get("/v1/streams/nope/evaluation").status_code == 404


def test_evaluation_is_cached_per_version_and_runs_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[int, bool]] = []
    real = engine_evaluation.cross_validation

    def counted(view: Any, model: str, folds: int, repeats: int, *rest: Any) -> dict[str, Any]:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        calls.append((view.version, on_loop))
        return real(view, model, folds, repeats, *rest)

    monkeypatch.setattr(engine_evaluation, "cross_validation", counted)
    X, y = support.wdbc()
    with TestClient(create_app(Settings(store_url="memory://"))) as client:
        _stream(client, "k", "saola", X[:10], y.tolist())
        first = client.get("/v1/streams/k/evaluation").json()
        assert client.get("/v1/streams/k/evaluation").json() == first
        assert calls == [(1, False)]
        client.get("/v1/streams/k/evaluation", params={"folds": 3})
        assert len(calls) == 2
        col = {"name": "x10", "values": X[10].tolist()}
        assert client.post("/v1/streams/k/features", json={"features": [col]}).status_code == 200
        assert client.get("/v1/streams/k/evaluation").json()["version"] == 2
        assert calls[-1] == (2, False)


def test_too_expensive_evaluations_get_413(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = support.wdbc()
    with TestClient(create_app(Settings(store_url="memory://"))) as client:
        k = len(_stream(client, "x", "saola", X, y.tolist()))
        # Rows x (k + 1) x folds x repeats: 4 folds fit exactly, 5 do not.
        monkeypatch.setattr(engine_evaluation, "MAX_CELLS", 569 * (k + 1) * 4)
        r = client.get("/v1/streams/x/evaluation", params={"folds": 5})
        assert r.status_code == 413 and r.json()["type"] == "/problems/limit-exceeded"
        assert client.get("/v1/streams/x/evaluation", params={"folds": 4}).status_code == 200
        r = client.get("/v1/streams/x/evaluation", params={"folds": 2, "repeats": 3})
        assert r.status_code == 413
        monkeypatch.setattr(engine_evaluation, "MAX_KNN_ROWS", 568)
        assert client.get("/v1/streams/x/evaluation", params={"folds": 2}).status_code == 413
        r = client.get("/v1/streams/x/evaluation", params={"folds": 2, "model": "linear"})
        assert r.status_code == 200


def test_prequential_accuracy_of_instance_streams(client: TestClient) -> None:
    rng = np.random.default_rng(11)
    names = [f"v{i}" for i in range(6)]
    for algorithm in ("ofs", "fires"):
        body = {
            "id": algorithm,
            "algorithm": algorithm,
            "params": {"num_features": 2},
            "feature_names": names,
        }
        assert client.post("/v1/streams", json=body).status_code == 201
        doc = client.get(f"/v1/streams/{algorithm}/evaluation").json()
        assert doc["instances"] == 0 and doc["accuracy"] is None
        assert doc["recent"] == {"window": 1000, "instances": 0, "accuracy": None}
        first_label = None
        for _ in range(12):
            X = rng.normal(size=(100, 6))
            y = (X[:, 0] - X[:, 3] > 0).astype(int)
            first_label = y[0] if first_label is None else first_label
            r = client.post(
                f"/v1/streams/{algorithm}/instances", json={"X": X.tolist(), "y": y.tolist()}
            )
            assert r.status_code == 200
        doc = client.get(f"/v1/streams/{algorithm}/evaluation").json()
        assert doc["kind"] == "prequential" and doc["score_kind"] == "accuracy"
        assert doc["instances"] == 1200 and doc["recent"]["instances"] == 1000
        # A separable concept: learnt, then predicted well.
        assert doc["recent"]["accuracy"] > 0.8
        assert doc["recent"]["accuracy"] >= doc["accuracy"] - 0.02
        if algorithm == "ofs":
            # OFS counts its mistakes as it always did: the same predictions, but for
            # the first (w = 0, a tie), which the published count takes as +1 and the
            # prequential count as no class (wrong whatever the label).
            mistakes = client.get("/v1/streams/ofs/status").json()["mistakes"]
            wrong = mistakes + (1 if first_label == 1 else 0)
            assert doc["accuracy"] == pytest.approx(1 - wrong / 1200)
