"""FIRES against a real ``featurestream serve`` process on Redis, through the SDK.

* A wide sparse stream (d = 5,000, 1% non-zero) is computed over its non-zeros
  (docs/algorithms/fires.md, "Sparse batches"): sent as scipy.sparse (``.npz``
  bodies) or as dense arrays, over HTTP or the WebSocket, it selects the same
  features with the same scores, bit for bit, as FIRES in process.
* The multi-class conformance vector (three string classes, one-vs-rest,
  tests/data/fires_expected.json) holds through the service too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import scipy.sparse as sp

from featurestream.selectors.fires import FIRES, FIRESParams
from featurestream_client import Client
from tests.data.make_fires_expected import make_multiclass_stream
from tests.support import ServeProcess

pytestmark = [pytest.mark.redis]

EXPECTED = Path(__file__).parents[1] / "data" / "fires_expected.json"
D = 5000
NAMES = [f"g{j}" for j in range(D)]
PARAMS: dict[str, Any] = {"num_features": 8, "scale": "none"}


@pytest.fixture
def serve(redis_url: str, key_prefix: str) -> Iterator[ServeProcess]:
    server = ServeProcess(redis_url, key_prefix).start()
    yield server
    server.stop()


def sparse_stream(n: int = 300, seed: int = 21) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D)) * (rng.random((n, D)) < 0.01)
    X[:, 40:45] += rng.random((n, 5)) < 0.3
    y = (X[:, 40:45].sum(axis=1) + rng.normal(scale=0.3, size=n) > 0.6).astype(int)
    return X, y


def selection(url: str, sid: str) -> list[tuple[str, float]]:
    doc = httpx.get(f"{url}/v1/streams/{sid}/selected", timeout=30).json()
    return [(f["name"], f["score"]) for f in doc["features"]]


def test_a_wide_sparse_stream_selects_as_in_process_in_every_form(serve: ServeProcess) -> None:
    X, y = sparse_stream()
    local = FIRES.start(FIRESParams.from_mapping(PARAMS), NAMES)
    for lo in range(0, len(y), 100):
        local.learn_instances(sp.csr_matrix(X[lo : lo + 100]), y[lo : lo + 100])
    expected = [(f.name, f.score) for f in local.selected_features()]
    assert {name for name, _ in expected[:5]} == {f"g{j}" for j in range(40, 45)}
    runs = {}
    with Client(serve.url) as c:
        for form in ("sparse-http", "dense-http", "sparse-ws", "dense-ws"):
            s = c.create_stream("fires", feature_names=NAMES, params=PARAMS)
            data: Any = sp.csr_matrix(X) if form.startswith("sparse") else X
            if form.endswith("http"):
                s.add_instances(data, y, batch_size=100)
            else:
                s.stream_instances(data, y, batch_size=100)
            runs[form] = selection(serve.url, s.id)
            status = httpx.get(f"{serve.url}/v1/streams/{s.id}/status", timeout=30).json()
            assert status["batches_seen"] == 3, form
    for form, got in runs.items():
        assert got == expected, form


def test_multiclass_conformance_vector_through_the_service(serve: ServeProcess) -> None:
    document = json.loads(EXPECTED.read_text())["multiclass"]
    params, expected = document["params"], document["expected"]
    names = [f"x{j}" for j in range(params["d"])]
    with Client(serve.url) as c:
        s = c.create_stream("fires", feature_names=names, params=params["fires"])
        for X, labels in make_multiclass_stream(params):
            s.add_instances(X, np.array(labels), batch_size=len(labels))
        info = httpx.get(f"{serve.url}/v1/streams/{s.id}", timeout=30).json()
        assert info["target_type"] == "multiclass"
        assert info["classes"] == expected["classes"]
        got = selection(serve.url, s.id)
    assert [name for name, _ in got] == [f"x{j}" for j in expected["top"]]
    np.testing.assert_allclose(
        [score for _, score in got],
        [expected["weights"][j] for j in expected["top"]],
        rtol=1e-9,
        atol=1e-12,
    )
