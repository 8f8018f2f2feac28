"""Instance streams over HTTP: OFS and FSDS public vectors, npy and npz bodies, bad input."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from tests import support


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def create(client: TestClient, sid: str, algorithm: str, params: dict[str, object]) -> None:
    r = client.post(
        "/v1/streams",
        json={
            "id": sid,
            "algorithm": algorithm,
            "params": params,
            "feature_names": support.names(100, "x"),
        },
    )
    assert r.status_code == 201, r.text
    assert r.json()["kind"] == "instances" and r.json()["n_features"] == 100


def post_labelled(client: TestClient, body: bytes, media: str, seq: int | None = None) -> Any:
    """POST a binary body of labelled instances (labels in the last column) to stream "ofs"."""
    headers = {"content-type": media, "X-Label-Column": "last"}
    if seq is not None:
        headers["X-Seq"] = str(seq)
    return client.post("/v1/streams/ofs/instances", content=body, headers=headers)


def assert_ofs_vector(client: TestClient, case: dict[str, Any]) -> None:
    """Stream "ofs" selected the public vector's features, with its weights."""
    sel = client.get("/v1/streams/ofs/selected").json()
    assert [f["name"] for f in sel["features"]] == [f"x{i}" for i in case["selected"]]
    expected = [case["weights"][str(i)] for i in case["selected"]]
    np.testing.assert_allclose([f["score"] for f in sel["features"]], expected, rtol=1e-9)


def test_ofs_public_vector_with_json_and_npy_batches(client: TestClient) -> None:
    case = support.expected()["instance_streams"]["ofs"]
    X, y = support.instances()
    create(client, "ofs", "ofs", case["params"])
    for seq, lo in enumerate(range(0, 2000, 400), start=1):
        if seq % 2:
            body = {"seq": seq, "X": X[lo : lo + 400].tolist(), "y": y[lo : lo + 400].tolist()}
            r = client.post("/v1/streams/ofs/instances", json=body)
        else:
            labelled = np.column_stack([X[lo : lo + 400], y[lo : lo + 400]])
            r = post_labelled(client, npy(labelled), "application/x-npy", seq)
        assert r.status_code == 200, r.text
    assert r.json()["instances_seen"] == 2000
    assert_ofs_vector(client, case)
    status = client.get("/v1/streams/ofs/status").json()
    assert status["instances_seen"] == 2000 and "mistakes" in status


def test_ofs_public_vector_with_sparse_npz_batches(client: TestClient) -> None:
    import scipy.sparse as sp

    case = support.expected()["instance_streams"]["ofs"]
    X, y = support.instances()
    create(client, "ofs", "ofs", case["params"])
    for seq, lo in enumerate(range(0, 2000, 500), start=1):
        labelled = sp.csr_matrix(np.column_stack([X[lo : lo + 500], y[lo : lo + 500]]))
        r = post_labelled(client, _npz(labelled), "application/x-npz", seq)
        assert r.status_code == 200, r.text
    assert r.json()["instances_seen"] == 2000
    assert_ofs_vector(client, case)
    # A zip that is no sparse matrix, or one of the wrong width: 422, nothing applied.
    for body in (b"PK\x03\x04 nothing", _npz(np.ones((2, 50)))):
        r = post_labelled(client, body, "application/x-npz")
        assert r.status_code == 422, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
    assert client.get("/v1/streams/ofs/status").json()["instances_seen"] == 2000


def _npz(a: Any) -> bytes:
    import scipy.sparse as sp

    buf = io.BytesIO()
    sp.save_npz(buf, sp.csr_matrix(a))
    return buf.getvalue()


def test_fsds_public_vector_batches_are_the_requests(client: TestClient) -> None:
    case = support.expected()["instance_streams"]["fsds"]
    X, _ = support.instances()
    create(client, "fsds", "fsds", case["params"])
    for lo in range(0, 2000, 50):
        r = client.post("/v1/streams/fsds/instances", json={"X": X[lo : lo + 50].tolist()})
        assert r.status_code == 200, r.text
    sel = client.get("/v1/streams/fsds/selected").json()
    assert [f["name"] for f in sel["features"]] == [f"x{i}" for i in case["selected"]]
    np.testing.assert_allclose([f["score"] for f in sel["features"]], case["scores"], rtol=1e-9)
    events = client.get("/v1/streams/fsds/events", params={"limit": 1000}).json()["events"]
    assert [e["instances"] for e in events if e["type"] == "batch"] == [50] * 40


def test_bad_instances_are_422_and_change_nothing(client: TestClient) -> None:
    create(client, "o", "ofs", {"num_features": 5})
    good = [[0.0] * 100]
    cases = [
        {"X": good},  # OFS needs labels
        {"X": good, "y": [0.5]},  # not a class label
        {"X": good * 3, "y": [5, 6, 7]},  # three classes
        {"X": good * 2, "y": ["a", 1]},  # strings mixed with numbers
        {"X": [[0.0] * 99], "y": [1]},  # wrong width
        {"X": [[0.0] * 100, [0.0] * 99], "y": [1, 1]},  # ragged
        {"X": good, "y": [1, 0]},  # label count
    ]
    for body in cases:
        r = client.post("/v1/streams/o/instances", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
    nan = '{"X": [[NaN' + ", 0.0" * 99 + ']], "y": [1]}'
    r = client.post(
        "/v1/streams/o/instances", content=nan, headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    assert client.get("/v1/streams/o/status").json()["instances_seen"] == 0
    assert client.get("/v1/streams/o/selected").json()["version"] == 0


def test_ofs_any_two_labels_select_alike(client: TestClient) -> None:
    rng = np.random.default_rng(11)
    X = rng.normal(size=(60, 100))
    y01 = (X[:, 3] - X[:, 50] > 0).astype(int)
    answers = []
    for sid, (low, high) in {
        "l01": (0, 1),
        "l57": (5, 7),
        "lab": ("a", "b"),
        "l10": (1, 0),
    }.items():
        create(client, sid, "ofs", {"num_features": 4})
        y = [high if v else low for v in y01.tolist()]
        r = client.post(f"/v1/streams/{sid}/instances", json={"X": X.tolist(), "y": y})
        assert r.status_code == 200, r.text
        answers.append(client.get(f"/v1/streams/{sid}/selected").json()["features"])
    assert len(answers[0]) == 4
    assert answers[1] == answers[2] == answers[0]  # the same order: the same weights
    assert answers[3] == [{**f, "score": -f["score"]} for f in answers[0]]  # reversed


def test_instance_stream_create_errors(client: TestClient) -> None:
    r = client.post("/v1/streams", json={"algorithm": "ofs", "feature_names": ["a", "b"]})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "params.num_features"
    r = client.post("/v1/streams", json={"algorithm": "ofs", "params": {"num_features": 1}})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "feature_names"
    r = client.post(
        "/v1/streams",
        json={"algorithm": "ofs", "params": {"num_features": 1}, "feature_names": ["a", "a"]},
    )
    assert r.status_code == 422
    r = client.post(
        "/v1/streams",
        json={"algorithm": "saola", "target": [1, 2, 3], "feature_names": ["a"]},
    )
    assert r.status_code == 422


def test_features_to_an_instance_stream_is_409(client: TestClient) -> None:
    create(client, "o", "ofs", {"num_features": 5})
    r = client.post("/v1/streams/o/features", json={"features": [{"name": "a", "values": [1.0]}]})
    assert r.status_code == 409 and r.json()["type"].endswith("wrong-stream-kind")
