"""FIRES and NRFS streams over HTTP and WebSocket: create, post, selection, status, replay."""

from __future__ import annotations

import io
import itertools
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from featurestream import codec
from featurestream.selectors import FIRES, NRFS, FIRESParams, NRFSParams
from tests import support

D = 12
NAMES = support.names(D, "x")
FIRES_PARAMS: dict[str, Any] = {"num_features": 3}
# Small and cheap: computations at 20 instances (min_instances) and every 10 after.
NRFS_PARAMS: dict[str, Any] = {
    "num_features": 2,
    "window": 30,
    "min_instances": 20,
    "refresh": 10,
    "clusters": 2,
    "representatives": 4,
}


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def data(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Labels follow x0 and x3; x0 also splits the instances into two groups."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, D))
    X[::2, 0] += 5.0
    y = np.where(X[:, 0] - 2.5 + X[:, 3] > 0, 1.0, 0.0)
    return X, y


def create(client: TestClient, sid: str, algorithm: str, params: dict[str, Any]) -> None:
    body = {"id": sid, "algorithm": algorithm, "params": params, "feature_names": NAMES}
    r = client.post("/v1/streams", json=body)
    assert r.status_code == 201, r.text
    assert r.json()["kind"] == "instances" and r.json()["n_features"] == D


def state_blob(client: TestClient, sid: str) -> bytes:
    store = client.app.state.engine.store  # type: ignore[attr-defined]
    return bytes(client.portal.call(store.load, sid).blob)  # type: ignore[union-attr]


def reference(
    cls: Any, params: dict[str, Any], batches: list[tuple[Any, Any]], *, legacy: bool = False
) -> Any:
    """The library's selector fed the same batches; supervised streams are created as the
    server creates them (``target_type`` "auto"), or without a target type (``legacy``)."""
    sel = cls.start(cls.params_type.from_mapping(params), NAMES, *([""] if legacy else []))
    for X, y in batches:
        sel.learn_instances(X, y)
    return sel


def encoded(sel: Any) -> bytes:
    return codec.encode(sel.name, sel.params.to_dict(), sel.snapshot())


def selected(client: TestClient, sid: str) -> list[tuple[str, float]]:
    doc = client.get(f"/v1/streams/{sid}/selected").json()
    return [(f["name"], f["score"]) for f in doc["features"]]


def post(client: TestClient, sid: str, seq: int, X: np.ndarray, y: np.ndarray | None) -> Any:
    """Odd seq: a JSON body; even seq: an .npy body (labels, if any, in the last column)."""
    if seq % 2:
        body: dict[str, Any] = {"producer": "p", "seq": seq, "X": X.tolist()}
        if y is not None:
            body["y"] = y.tolist()
        return client.post(f"/v1/streams/{sid}/instances", json=body)
    headers = {"content-type": "application/x-npy", "X-Seq": str(seq), "X-Producer": "p"}
    if y is not None:
        headers["X-Label-Column"] = "last"
        X = np.column_stack([X, y])
    return client.post(f"/v1/streams/{sid}/instances", content=npy(X), headers=headers)


def test_algorithms_lists_both(client: TestClient) -> None:
    listed = {a["name"]: a for a in client.get("/v1/algorithms").json()["algorithms"]}
    assert listed["fires"]["kind"] == listed["nrfs"]["kind"] == "instances"
    assert listed["fires"]["params_schema"]["required"] == ["num_features"]
    reps = listed["nrfs"]["params_schema"]["properties"]["representatives"]
    assert reps["default"] == 0.25 and len(reps["anyOf"]) == 2


def test_fires_over_http_with_json_and_npy_bodies_and_replay(client: TestClient) -> None:
    create(client, "f", "fires", FIRES_PARAMS)
    assert selected(client, "f") == []
    X, y = data(120)
    sizes = [30, 25, 40, 25]
    bounds = list(itertools.accumulate([0, *sizes]))
    first_two = None
    for seq, (lo, hi) in enumerate(itertools.pairwise(bounds), start=1):
        r = post(client, "f", seq, X[lo:hi], y[lo:hi])
        assert r.status_code == 200, r.text
        assert r.json()["instances_seen"] == hi
        if seq == 2:
            first_two = r
    assert first_two is not None
    # seq 2 again: the stored response, nothing applied.
    again = post(client, "f", 2, X[30:55], y[30:55])
    assert again.status_code == 200 and again.content == first_two.content
    assert again.headers["idempotent-replay"] == "true"
    ref = reference(
        FIRES, FIRES_PARAMS, [(X[lo:hi], y[lo:hi]) for lo, hi in itertools.pairwise(bounds)]
    )
    assert state_blob(client, "f") == encoded(ref)
    assert selected(client, "f") == [(f.name, f.score) for f in ref.selected_features()]
    assert selected(client, "f")[0][0] in ("x0", "x3")
    # Binary labels under a target type: exactly the model of a stream without one.
    old = reference(
        FIRES,
        FIRES_PARAMS,
        [(X[lo:hi], y[lo:hi]) for lo, hi in itertools.pairwise(bounds)],
        legacy=True,
    )
    served = codec.decode(state_blob(client, "f")).state
    assert served.target_type == "binary" and served.classes == (0, 1)
    assert np.array_equal(served.mu, old.state.mu) and np.array_equal(served.sigma, old.state.sigma)
    assert ref.selected_features() == old.selected_features()
    status = client.get("/v1/streams/f/status").json()
    assert status["instances_seen"] == 120 and status["batches_seen"] == 4
    assert status["scale"] == "standard"
    events = client.get("/v1/streams/f/events", params={"limit": 100}).json()["events"]
    assert [e["instances"] for e in events if e["type"] == "batch"] == sizes


def test_fires_refuses_bad_labels_and_parameters(client: TestClient) -> None:
    create(client, "f", "fires", FIRES_PARAMS)
    # No labels, labels that look continuous, a label that is neither number nor string
    # (any two classes are labels: docs/algorithms.md, "Targets").
    for body in (
        {"X": [[0.0] * D]},
        {"X": [[0.0] * D], "y": [0.5]},
        {"X": [[0.0] * D], "y": [True]},
    ):
        r = client.post("/v1/streams/f/instances", json=body)
        assert r.status_code == 422, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
    assert client.get("/v1/streams/f/status").json()["instances_seen"] == 0
    r = client.post(
        "/v1/streams",
        json={"algorithm": "fires", "params": {"num_features": 2, "scale": "minmax"}},
    )
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "params.scale"


def test_fires_over_websocket_frames_are_batches(client: TestClient) -> None:
    create(client, "f", "fires", FIRES_PARAMS)
    X, y = data(60, seed=1)
    sizes = [10, 7, 13, 30]
    bounds = list(itertools.accumulate([0, *sizes]))
    with client.websocket_connect("/v1/streams/f/ws?producer=w") as ws:
        assert ws.receive_json()["type"] == "selection"
        for k, (lo, hi) in enumerate(itertools.pairwise(bounds)):
            if k % 2:
                ws.send_bytes(npy(np.column_stack([X[lo:hi], y[lo:hi]])))
            else:
                ws.send_json({"X": X[lo:hi].tolist(), "y": y[lo:hi].tolist()})
        acks = collect_acks(ws, len(sizes))
    assert [a["instances_seen"] for a in acks] == bounds[1:]
    ref = reference(
        FIRES, FIRES_PARAMS, [(X[lo:hi], y[lo:hi]) for lo, hi in itertools.pairwise(bounds)]
    )
    assert state_blob(client, "f") == encoded(ref)
    assert client.get("/v1/streams/f/status").json()["batches_seen"] == 4


def collect_acks(ws: Any, answers: int) -> list[Any]:
    out: list[Any] = []
    while len(out) < answers:
        msg = ws.receive_json()
        if msg["type"] != "selection":
            assert msg["type"] == "ack", msg
            out.append(msg)
    return out


def test_nrfs_over_http_selects_after_min_instances_and_replays(client: TestClient) -> None:
    create(client, "n", "nrfs", NRFS_PARAMS)
    X, _ = data(45, seed=2)
    # Counts 12 (nothing yet), 24 (the window reaches 20: first computation), 29, 36
    # (crossed 30), 45 (crossed 40).
    sizes = [12, 12, 5, 7, 9]
    bounds = list(itertools.accumulate([0, *sizes]))
    computations = []
    for seq, (lo, hi) in enumerate(itertools.pairwise(bounds), start=1):
        r = post(client, "n", seq, X[lo:hi], None)
        assert r.status_code == 200, r.text
        computations.append(client.get("/v1/streams/n/status").json()["computations"])
        if seq == 1:
            assert selected(client, "n") == []
    assert computations == [0, 1, 1, 2, 3]
    again = post(client, "n", 5, X[36:45], None)
    assert again.status_code == 200 and again.headers["idempotent-replay"] == "true"
    ref = reference(NRFS, NRFS_PARAMS, [(X[lo:hi], None) for lo, hi in itertools.pairwise(bounds)])
    assert state_blob(client, "n") == encoded(ref)
    assert selected(client, "n") == [(f.name, f.score) for f in ref.selected_features()]
    assert selected(client, "n")[0][0] == "x0"
    status = client.get("/v1/streams/n/status").json()
    assert status["instances_seen"] == 45 and status["computed_at"] == 45
    assert status["window_fill"] == 30 and status["batches_seen"] == 5


def test_nrfs_over_websocket(client: TestClient) -> None:
    create(client, "n", "nrfs", NRFS_PARAMS)
    X, _ = data(40, seed=3)
    sizes = [8, 8, 8, 16]
    bounds = list(itertools.accumulate([0, *sizes]))
    with client.websocket_connect("/v1/streams/n/ws?producer=w") as ws:
        assert ws.receive_json()["selected"] == []
        for k, (lo, hi) in enumerate(itertools.pairwise(bounds)):
            if k % 2:
                ws.send_bytes(npy(X[lo:hi]))  # unsupervised: no label column
            else:
                ws.send_json({"X": X[lo:hi].tolist()})
        acks = collect_acks(ws, len(sizes))
    assert [a["instances_seen"] for a in acks] == bounds[1:]
    ref = reference(NRFS, NRFS_PARAMS, [(X[lo:hi], None) for lo, hi in itertools.pairwise(bounds)])
    assert state_blob(client, "n") == encoded(ref)
    assert client.get("/v1/streams/n/status").json()["computations"] == 2


def test_nrfs_refuses_a_window_too_large_or_too_many_features(client: TestClient) -> None:
    too_wide = {"num_features": 2, "window": (1 << 27) // D + 1, "min_instances": 100}
    for params, field in ((too_wide, "params.window"), ({"num_features": D + 1}, None)):
        r = client.post(
            "/v1/streams",
            json={"algorithm": "nrfs", "params": params, "feature_names": NAMES},
        )
        assert r.status_code == 422, r.text
        errors = r.json()["errors"]
        assert errors[0]["field"] == (field or "params.num_features")
    # Past 5,000 instances one computation's n x n matrices would exhaust memory or
    # take minutes, whatever d; and with many features the window's own values bound it.
    wide_names = [f"w{i}" for i in range(30_000)]
    for params, names in (
        ({"num_features": 2, "window": 5001}, NAMES),
        (
            {"num_features": 2, "window": 5000},
            wide_names,
        ),
    ):
        r = client.post(
            "/v1/streams",
            json={"algorithm": "nrfs", "params": params, "feature_names": names},
        )
        assert r.status_code == 422, r.text
        assert r.json()["errors"][0]["field"] == "params.window"
    assert client.get("/healthz").status_code == 200
    assert NRFSParams.from_mapping(NRFS_PARAMS).refresh == 10
    assert FIRESParams.from_mapping(FIRES_PARAMS).scale == "standard"
