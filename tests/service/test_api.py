"""The HTTP contract (docs/api.md) for feature streams, against the memory store and real Redis."""

from __future__ import annotations

import io
import itertools
import json
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from featurestream import codec
from featurestream.api import create_app
from featurestream.config import Settings
from featurestream.selectors import SAOLA, SAOLAParams
from tests import support

PROBLEM = "application/problem+json"


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def create(client: TestClient, sid: str, y: np.ndarray, **params: Any) -> dict[str, Any]:
    r = client.post(
        "/v1/streams",
        json={"id": sid, "algorithm": "saola", "params": params, "target": y.tolist()},
    )
    assert r.status_code == 201, r.text
    return dict(r.json())


def post_columns(
    client: TestClient, sid: str, X: np.ndarray, names: list[str], **extra: Any
) -> dict[str, Any]:
    feats = [{"name": n, "values": x.tolist()} for n, x in zip(names, X, strict=True)]
    r = client.post(f"/v1/streams/{sid}/features", json={"features": feats, **extra})
    assert r.status_code == 200, r.text
    return dict(r.json())


def assert_problem(r: Any, status: int, suffix: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    body = dict(r.json())
    assert body["type"].endswith("/" + suffix)
    assert body["status"] == status and body["title"] and body["detail"]
    return body


def snapshot(client: TestClient, sid: str) -> tuple[int, Any]:
    r = client.get(f"/v1/streams/{sid}/selected")
    assert r.status_code == 200
    return int(r.json()["version"]), r.json()["features"]


# ---------------------------------------------------------------- operations


def test_healthz_and_readyz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").status_code == 200


def test_unknown_route_is_a_problem(client: TestClient) -> None:
    assert_problem(client.get("/v1/nothing-here"), 404, "not-found")


def test_metrics_count_requests(client: TestClient) -> None:
    client.get("/healthz")
    text = client.get("/metrics").text
    assert 'featurestream_http_requests_total{route="/healthz",method="GET",status="200"}' in text


def test_algorithms_list_schemas_and_defaults(client: TestClient) -> None:
    algos = {a["name"]: a for a in client.get("/v1/algorithms").json()["algorithms"]}
    saola = algos["saola"]
    assert saola["kind"] == "features"
    assert saola["defaults"]["alpha"] == 0.01 and saola["defaults"]["test"] == "fisher_z"
    assert saola["params_schema"]["properties"]["alpha"]["exclusiveMinimum"] == 0


# ---------------------------------------------------------------- stream CRUD


def test_create_get_list_delete(client: TestClient) -> None:
    created = create(client, "s1", np.arange(6.0))
    assert created["kind"] == "features" and created["n_instances"] == 6
    assert created["version"] == 0 and created["params"]["bound"] == "saola"
    assert client.get("/v1/streams/s1").json()["id"] == "s1"
    assert [s["id"] for s in client.get("/v1/streams").json()["streams"]] == ["s1"]
    assert client.delete("/v1/streams/s1").status_code == 204
    assert_problem(client.get("/v1/streams/s1"), 404, "stream-not-found")
    assert_problem(client.delete("/v1/streams/s1"), 404, "stream-not-found")
    assert client.get("/v1/streams").json()["streams"] == []


def test_generated_id(client: TestClient) -> None:
    r = client.post("/v1/streams", json={"algorithm": "saola", "target": [1, 2, 3, 4]})
    assert r.status_code == 201 and r.json()["id"].startswith("s-")
    assert r.headers["location"] == f"/v1/streams/{r.json()['id']}"


def test_create_existing_is_409(client: TestClient) -> None:
    create(client, "dup", np.arange(5.0))
    r = client.post("/v1/streams", json={"id": "dup", "algorithm": "saola", "target": [1, 2]})
    assert_problem(r, 409, "stream-exists")


@pytest.mark.parametrize(
    ("body", "field", "suffix"),
    [
        ({"algorithm": "nope", "target": [1, 2]}, "algorithm", "invalid-input"),
        (
            {"algorithm": "saola", "target": [1, 2], "params": {"alpha": 1.5}},
            "params.alpha",
            "invalid-parameter",
        ),
        (
            {"algorithm": "saola", "target": [1, 2], "params": {"bound": "x"}},
            "params.bound",
            "invalid-parameter",
        ),
        (
            {"algorithm": "saola", "target": [1, 2], "params": {"nope": 1}},
            "params.nope",
            "invalid-parameter",
        ),
        ({"algorithm": "saola"}, "target", "invalid-input"),
        # Labels may be strings (docs/algorithms.md, "Targets"), but not a mix of both.
        ({"algorithm": "saola", "target": [1, "a"]}, "target[1]", "invalid-input"),
        ({"algorithm": "saola", "target": [1, True]}, "target[1]", "invalid-input"),
        ({"algorithm": "saola", "target": [1, None]}, "target[1]", "invalid-input"),
        ({"algorithm": "saola", "target": [1, 2], "id": "bad id!"}, "id", "invalid-input"),
    ],
)
def test_create_invalid_is_422_naming_the_field(
    client: TestClient, body: dict[str, Any], field: str, suffix: str
) -> None:
    problem = assert_problem(client.post("/v1/streams", json=body), 422, suffix)
    assert field in [e["field"] for e in problem["errors"]]
    assert client.get("/v1/streams").json()["streams"] == []


def test_create_with_nan_target_is_422(client: TestClient) -> None:
    body = '{"algorithm": "saola", "target": [1.0, NaN, 2.0]}'
    r = client.post("/v1/streams", content=body, headers={"content-type": "application/json"})
    assert_problem(r, 422, "invalid-input")


# ---------------------------------------------------------------- features


def test_wdbc_public_vector_through_http(client: TestClient) -> None:
    X, y = support.wdbc()
    create(client, "w", y, alpha=0.01)
    body = post_columns(client, "w", X, support.names(30))
    assert body["selected"] == ["f21", "f27"]
    assert len(body["decisions"]) == 30 and body["version"] == 1
    sel = client.get("/v1/streams/w/selected").json()
    assert [f["name"] for f in sel["features"]] == ["f21", "f27"]


def test_json_dense_sparse_and_npy_bodies_decide_alike(client: TestClient) -> None:
    rng = np.random.default_rng(3)
    y = rng.normal(size=40)
    X = rng.normal(size=(6, 40))
    X[:, rng.random(40) < 0.5] = 0.0
    X[0] += y  # make some columns relevant
    X[3] += 0.5 * y
    names = support.names(6)
    for sid in ("dense", "sparse", "npy"):
        create(client, sid, y, alpha=0.05)
    dense = post_columns(client, "dense", X, names)
    sparse_feats = [
        {"name": n, "indices": np.flatnonzero(x).tolist(), "data": x[x != 0].tolist()}
        for n, x in zip(names, X, strict=True)
    ]
    sparse = client.post("/v1/streams/sparse/features", json={"features": sparse_feats}).json()
    r = client.post(
        "/v1/streams/npy/features",
        content=npy(X.T.copy()),
        headers={"content-type": "application/x-npy", "X-Feature-Names": ",".join(names)},
    )
    assert r.status_code == 200, r.text
    assert dense["decisions"] == sparse["decisions"] == r.json()["decisions"]
    assert dense["selected"] == sparse["selected"] == r.json()["selected"]


def test_npz_sparse_body_decides_like_dense(client: TestClient) -> None:
    import scipy.sparse

    rng = np.random.default_rng(8)
    n = 50
    y = rng.integers(0, 2, n).astype(float)
    X = (rng.random((12, n)) < 0.1).astype(float)
    X[2] = y * (rng.random(n) < 0.8)
    X[5] = 0.0  # an all-zero sparse column: constant
    names = support.names(12)
    create(client, "dense", y)
    create(client, "npz", y)
    dense = post_columns(client, "dense", X, names)
    buf = io.BytesIO()
    scipy.sparse.save_npz(buf, scipy.sparse.csc_matrix(X.T))
    r = client.post(
        "/v1/streams/npz/features",
        content=buf.getvalue(),
        headers={"content-type": "application/x-npz", "X-Feature-Names": ",".join(names)},
    )
    assert r.status_code == 200, r.text
    assert r.json()["decisions"] == dense["decisions"]
    assert r.json()["decisions"][5]["reason"] == "constant"
    bad = client.post(
        "/v1/streams/npz/features",
        content=b"PK-not-a-zip",
        headers={"content-type": "application/x-npz"},
    )
    assert_problem(bad, 422, "invalid-input")


def test_npy_without_names_generates_seq_names(client: TestClient) -> None:
    create(client, "g", np.arange(8.0))
    r = client.post(
        "/v1/streams/g/features",
        content=npy(np.arange(16.0).reshape(8, 2)),
        headers={"content-type": "application/x-npy", "X-Seq": "1"},
    )
    # Named after the request: its producer (here the default one) and its seq.
    assert [d["name"] for d in r.json()["decisions"]] == ["default:1:0", "default:1:1"]


def test_one_request_of_1000_columns_equals_1000_requests(client: TestClient) -> None:
    rng = np.random.default_rng(11)
    n = 120
    y = rng.normal(size=n)
    base = rng.normal(size=(40, n))
    # Relevant columns, noisy copies of each other, duplicates and noise.
    X = np.concatenate(
        [
            base[:20] + y,
            base[:20] + y + 0.05 * rng.normal(size=(20, n)),
            rng.normal(size=(960, n)),
        ]
    )
    X[500] = X[3]  # an exact duplicate: dep ties must break the same way
    X = X[rng.permutation(1000)]
    names = support.names(1000, "c")
    create(client, "batch", y)
    create(client, "single", y)
    batch = post_columns(client, "batch", X, names)
    singles = []
    for i in range(1000):
        singles += post_columns(client, "single", X[i : i + 1], names[i : i + 1])["decisions"]
    assert batch["decisions"] == singles
    assert snapshot(client, "batch")[1] == snapshot(client, "single")[1]
    assert snapshot(client, "single")[0] == 1000 and snapshot(client, "batch")[0] == 1


@pytest.mark.parametrize(
    "case", ["nan", "inf", "wrong_length", "dup_in_request", "dup_across", "string", "bad_sparse"]
)
def test_bad_columns_are_422_and_change_nothing(client: TestClient, case: str) -> None:
    X, y = support.wdbc()
    create(client, "w", y)
    post_columns(client, "w", X[:5], support.names(5))
    before = snapshot(client, "w")
    good = X[5].tolist()
    feats: list[dict[str, Any]] = [{"name": "ok", "values": good}]
    body: str | None = None
    if case == "nan":
        body = json.dumps({"features": [*feats, {"name": "bad", "values": [float("nan")] * 569}]})
    elif case == "inf":
        body = json.dumps({"features": [*feats, {"name": "bad", "values": [1e999] * 569}]})
    elif case == "wrong_length":
        feats.append({"name": "bad", "values": good[:-1]})
    elif case == "dup_in_request":
        feats.append({"name": "ok", "values": good})
    elif case == "dup_across":
        feats.append({"name": "f1", "values": good})
    elif case == "string":
        feats.append({"name": "bad", "values": ["x", *good[1:]]})
    elif case == "bad_sparse":
        feats.append({"name": "bad", "indices": [0, 569], "data": [1.0, 2.0]})
    if body is None:
        r = client.post("/v1/streams/w/features", json={"features": feats})
    else:
        r = client.post(
            "/v1/streams/w/features", content=body, headers={"content-type": "application/json"}
        )
    assert_problem(r, 422, "invalid-input")
    assert snapshot(client, "w") == before
    assert client.get("/v1/streams/w/status").json()["features_seen"] == 5
    # Nothing of the request was applied: "ok" is still a new name.
    post_columns(client, "w", X[5:6], ["ok"])


def test_unknown_stream_is_404(client: TestClient) -> None:
    r = client.post("/v1/streams/ghost/features", json={"features": []})
    assert_problem(r, 404, "stream-not-found")
    for path in ("selected", "events", "status"):
        assert_problem(client.get(f"/v1/streams/ghost/{path}"), 404, "stream-not-found")


def test_malformed_bodies(client: TestClient) -> None:
    create(client, "m", np.arange(5.0))
    r = client.post(
        "/v1/streams/m/features", content=b"{oops", headers={"content-type": "application/json"}
    )
    assert_problem(r, 400, "malformed-body")
    r = client.post(
        "/v1/streams/m/features", content=b"junk", headers={"content-type": "application/x-npy"}
    )
    assert_problem(r, 422, "invalid-input")
    r = client.post("/v1/streams/m/features", content=b"a,b", headers={"content-type": "text/csv"})
    assert_problem(r, 415, "unsupported-media-type")
    r = client.post("/v1/streams/m/features", json={"features": [{"name": "x"}]})
    assert_problem(r, 422, "invalid-input")
    obj = io.BytesIO()
    np.save(obj, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    r = client.post(
        "/v1/streams/m/features",
        content=obj.getvalue(),
        headers={"content-type": "application/x-npy"},
    )
    assert_problem(r, 422, "invalid-input")
    assert snapshot(client, "m")[0] == 0


def test_request_size_limit_is_413(settings: Settings) -> None:
    small = settings.model_copy(update={"max_request_bytes": 2048})
    with TestClient(create_app(small)) as client:
        create(client, "big", np.arange(10.0))
        r = client.post(
            "/v1/streams/big/features",
            json={"features": [{"name": "x", "values": [1.0] * 10}] * 50},
        )
        assert_problem(r, 413, "payload-too-large")
        assert snapshot(client, "big")[0] == 0


def test_wrong_stream_kind_is_409(client: TestClient) -> None:
    create(client, "f", np.arange(5.0))
    r = client.post("/v1/streams/f/instances", json={"X": [[1.0]], "y": [1]})
    assert_problem(r, 409, "wrong-stream-kind")


# ---------------------------------------------------------------- idempotency


def test_retried_seq_returns_stored_response_and_applies_nothing(client: TestClient) -> None:
    X, y = support.wdbc()
    create(client, "w", y)
    first = client.post(
        "/v1/streams/w/features",
        json={"producer": "p", "seq": 1, "features": [{"name": "f0", "values": X[0].tolist()}]},
    )
    again = client.post(
        "/v1/streams/w/features",
        json={"producer": "p", "seq": 1, "features": [{"name": "f0", "values": X[0].tolist()}]},
    )
    assert again.status_code == 200 and again.content == first.content
    assert again.headers["idempotent-replay"] == "true"
    assert "idempotent-replay" not in first.headers
    assert snapshot(client, "w")[0] == 1
    assert client.get("/v1/streams/w/status").json()["features_seen"] == 1


def test_seq_gap_is_409_with_expected_seq(client: TestClient) -> None:
    create(client, "w", np.arange(6.0))
    r = client.post("/v1/streams/w/features", json={"producer": "p", "seq": 3, "features": []})
    assert assert_problem(r, 409, "sequence-conflict")["expected_seq"] == 1
    assert snapshot(client, "w")[0] == 0


def test_producers_are_independent(client: TestClient) -> None:
    X, y = support.wdbc()
    create(client, "w", y)
    for p in ("a", "b"):
        for seq in (1, 2):
            name = f"{p}{seq}"
            r = client.post(
                "/v1/streams/w/features",
                json={
                    "producer": p,
                    "seq": seq,
                    "features": [{"name": name, "values": X[seq].tolist()}],
                },
            )
            assert r.status_code == 200
    assert snapshot(client, "w")[0] == 4


def test_npy_seq_and_producer_headers(client: TestClient) -> None:
    create(client, "n", np.arange(8.0))
    headers = {"content-type": "application/x-npy", "X-Seq": "1", "X-Producer": "loader"}
    first = client.post("/v1/streams/n/features", content=npy(np.arange(8.0)), headers=headers)
    again = client.post("/v1/streams/n/features", content=npy(np.arange(8.0)), headers=headers)
    assert first.status_code == again.status_code == 200
    assert again.headers["idempotent-replay"] == "true" and again.content == first.content
    bad = client.post(
        "/v1/streams/n/features", content=npy(np.arange(8.0)), headers={**headers, "X-Seq": "x"}
    )
    assert_problem(bad, 422, "invalid-input")


# ---------------------------------------------------------------- reads


def test_selected_etag_and_304(client: TestClient) -> None:
    X, y = support.wdbc()
    create(client, "w", y)
    post_columns(client, "w", X[:10], support.names(10))
    r = client.get("/v1/streams/w/selected")
    assert r.headers["etag"] == '"1"'
    assert client.get("/v1/streams/w/selected", headers={"If-None-Match": '"1"'}).status_code == 304
    post_columns(client, "w", X[10:12], ["f10", "f11"])
    assert client.get("/v1/streams/w/selected", headers={"If-None-Match": '"1"'}).status_code == 200


def test_events_page_through_every_decision(client: TestClient) -> None:
    X, y = support.wdbc()
    create(client, "w", y)
    responses = [
        post_columns(
            client, "w", X[i : i + 7], support.names(30)[i : i + 7], producer="p", seq=k + 1
        )
        for k, i in enumerate(range(0, 28, 7))
    ]
    events: list[dict[str, Any]] = []
    after = None
    while True:
        params: dict[str, Any] = {"limit": 5}
        if after:
            params["after"] = after
        page = client.get("/v1/streams/w/events", params=params).json()
        if not page["events"]:
            break
        events += page["events"]
        after = page["next"]
    batches = [e for e in events if e["type"] == "batch"]
    assert [b["seq"] for b in batches] == [1, 2, 3, 4]
    assert [b["names"] for b in batches] == [support.names(30)[i : i + 7] for i in range(0, 28, 7)]
    decided = [e for e in events if e["type"] in ("accepted", "rejected")]
    expected = [d for r in responses for d in r["decisions"]]
    assert [(e["names"][0], e["type"] == "accepted", e["reason"]) for e in decided] == [
        (d["name"], d["accepted"], d["reason"]) for d in expected
    ]
    evicted = [e["names"][0] for e in events if e["type"] == "evicted"]
    assert evicted == [x for d in expected for x in d["evicted"]]
    assert len({e["id"] for e in events}) == len(events)
    assert_problem(client.get("/v1/streams/w/events", params={"after": "x"}), 422, "invalid-input")


def test_event_log_replay_reproduces_the_stored_state(client: TestClient) -> None:
    rng = np.random.default_rng(5)
    n = 60
    y = rng.normal(size=n)
    X = rng.normal(size=(45, n)) + np.outer(rng.random(45) > 0.6, y)
    names = support.names(45)
    create(client, "r", y, alpha=0.05)
    cuts = [0, 1, 8, 9, 30, 45]
    for a, b in itertools.pairwise(cuts):
        post_columns(client, "r", X[a:b], names[a:b])
    events = client.get("/v1/streams/r/events", params={"limit": 10_000}).json()["events"]
    columns = dict(zip(names, X, strict=True))
    fresh = SAOLA.start(SAOLAParams(alpha=0.05), y)
    for e in events:
        if e["type"] == "batch":
            fresh.learn_features(e["names"], np.array([columns[x] for x in e["names"]]))
    engine = client.app.state.engine  # type: ignore[attr-defined]
    record = client.portal.call(engine.store.load, "r")  # type: ignore[union-attr]
    assert codec.encode("saola", fresh.params.to_dict(), fresh.snapshot()) == record.blob


def test_status_counters(client: TestClient) -> None:
    X, y = support.wdbc()
    create(client, "w", y)
    post_columns(client, "w", X, support.names(30))
    status = client.get("/v1/streams/w/status").json()
    assert status["features_seen"] == 30 and status["version"] == 1
    assert status["features_accepted"] + status["features_rejected"] == 30
    assert status["selected_count"] == 2 and status["algorithm"] == "saola"
