"""Every registered algorithm end to end through HTTP, on the memory store and real Redis.

The service must decide exactly as the selector does in process: nothing is
special-cased per algorithm in the HTTP layer.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from featurestream.engine import wire
from featurestream.selectors import REGISTRY
from featurestream.selectors.base import FeatureSelector

ALGORITHMS = sorted(REGISTRY)


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def feature_data(discrete: bool) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(7)
    n, b = 60, 24
    y = rng.integers(0, 2, n).astype(float)
    if discrete:
        X = rng.integers(0, 3, (b, n)).astype(float)
        X[2] = (y + X[5]) % 3
        X[8] = y
    else:
        X = rng.normal(size=(b, n))
        X[2] += 2 * y
        X[8] = X[2] + 0.1 * rng.normal(size=n)
    X[11] = 1.0
    return X, y, [f"f{i}" for i in range(b)]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_service_decides_like_the_selector_in_process(client: TestClient, algorithm: str) -> None:
    cls = REGISTRY[algorithm]
    params: dict[str, Any] = cls.test_params()[0]
    p = cls.params_type.from_mapping(params)
    if issubclass(cls, FeatureSelector):
        X, y, names = feature_data(cls.requires_discrete(p))
        groups = [f"g{i // 4}" for i in range(len(names))] if cls.uses_groups else None
        local = cls.start(p, y)
        expected = [wire.decision(d) for d in local.learn_features(names, X, groups)]
        r = client.post(
            "/v1/streams",
            json={"id": "a", "algorithm": algorithm, "params": params, "target": y.tolist()},
        )
        assert r.status_code == 201, r.text
        decisions: list[dict[str, Any]] = []
        if groups is None:
            r = client.post(
                "/v1/streams/a/features",
                content=npy(X[:10].T.copy()),
                headers={
                    "content-type": "application/x-npy",
                    "X-Feature-Names": ",".join(names[:10]),
                },
            )
            assert r.status_code == 200, r.text
            decisions += r.json()["decisions"]
            feats = [
                {"name": n, "values": x.tolist()} for n, x in zip(names[10:], X[10:], strict=True)
            ]
            r = client.post("/v1/streams/a/features", json={"features": feats})
        else:
            body = {
                "groups": [
                    {
                        "name": f"g{k}",
                        "features": [
                            {"name": names[i], "values": X[i].tolist()}
                            for i in range(4 * k, 4 * k + 4)
                        ],
                    }
                    for k in range(len(names) // 4)
                ]
            }
            r = client.post("/v1/streams/a/groups", json=body)
        assert r.status_code == 200, r.text
        decisions += r.json()["decisions"]
        assert decisions == expected
    else:
        rng = np.random.default_rng(3)
        d, m = 12, 90
        X = rng.normal(size=(m, d))
        y = (X[:, 1] - X[:, 4] > 0).astype(float)
        names = [f"x{i}" for i in range(d)]
        local = cls.start(p, names)
        for lo in (0, 40):
            local.learn_instances(
                X[lo : lo + 50][: 40 if lo == 0 else 50],
                y[lo : lo + 50][: 40 if lo == 0 else 50] if cls.supervised else None,
            )
        r = client.post(
            "/v1/streams",
            json={"id": "a", "algorithm": algorithm, "params": params, "feature_names": names},
        )
        assert r.status_code == 201, r.text
        body: dict[str, Any] = {"X": X[:40].tolist()}
        if cls.supervised:
            body["y"] = y[:40].tolist()
        assert client.post("/v1/streams/a/instances", json=body).status_code == 200
        A = np.column_stack([X[40:], y[40:]]) if cls.supervised else X[40:]
        headers = {"content-type": "application/x-npy"}
        if cls.supervised:
            headers["X-Label-Column"] = "last"
        r = client.post("/v1/streams/a/instances", content=npy(A), headers=headers)
        assert r.status_code == 200, r.text
        assert r.json()["instances_seen"] == m
    selection = client.get("/v1/streams/a/selected").json()
    assert [f["name"] for f in selection["features"]] == list(local.selected())
    assert [f["score"] for f in selection["features"]] == [
        wire.selected_feature(f)["score"] for f in local.selected_features()
    ]
    status = client.get("/v1/streams/a/status").json()
    assert {k: status[k] for k in local.status()} == local.status()
    algos = {a["name"] for a in client.get("/v1/algorithms").json()["algorithms"]}
    assert algorithm in algos


def test_catalogue_says_which_algorithms_are_supervised(client: TestClient) -> None:
    listed = {a["name"]: a for a in client.get("/v1/algorithms").json()["algorithms"]}
    assert set(listed) == set(REGISTRY)
    for name, cls in REGISTRY.items():
        expected = True if issubclass(cls, FeatureSelector) else cls.supervised
        assert listed[name]["supervised"] is expected, name
    flags = {name: a["supervised"] for name, a in listed.items() if a["kind"] == "instances"}
    assert flags == {"ofs": True, "fires": True, "kbest": True, "fsds": False, "nrfs": False}
    assert all(a["supervised"] for a in listed.values() if a["kind"] == "features")
