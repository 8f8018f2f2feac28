"""group-SAOLA end to end: POST /groups, group-aware /selected and /status."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests import support


def _groups_body(X, names, groups, group_names, seq=None):  # type: ignore[no-untyped-def]
    body = {
        "groups": [
            {"name": g, "features": [{"name": names[i], "values": X[i].tolist()} for i in members]}
            for g, members in zip(group_names, groups, strict=True)
        ]
    }
    if seq is not None:
        body["seq"] = seq
    return body


def test_group_saola_public_vector_over_http(client: TestClient) -> None:
    case = support.expected()["feature_streams"]["group_saola"]
    X, y = support.wdbc()
    names = support.names(30)
    r = client.post(
        "/v1/streams",
        json={
            "id": "gs",
            "algorithm": "group_saola",
            "params": case["params"],
            "target": y.tolist(),
        },
    )
    assert r.status_code == 201
    # First three groups in one request, the rest one request each.
    gs, gn = case["groups"], case["group_names"]
    r = client.post("/v1/streams/gs/groups", json=_groups_body(X, names, gs[:3], gn[:3], seq=1))
    assert r.status_code == 200, r.text
    for k in range(3, 6):
        r = client.post(
            "/v1/streams/gs/groups",
            json=_groups_body(X, names, gs[k : k + 1], gn[k : k + 1], seq=k - 1),
        )
        assert r.status_code == 200, r.text
    assert all(d["group"] for d in r.json()["decisions"])
    sel = client.get("/v1/streams/gs/selected").json()
    assert [f["name"] for f in sel["features"]] == [f"f{i}" for i in case["selected"]]
    assert [f["group"] for f in sel["features"]] == ["g4", "g5"]
    status = client.get("/v1/streams/gs/status").json()
    assert [g["name"] for g in status["selected_groups"]] == ["g4", "g5"]
    assert status["groups_seen"] == 6


def test_a_group_name_seen_before_is_422(client: TestClient) -> None:
    X, y = support.wdbc()
    names = support.names(30)
    client.post("/v1/streams", json={"id": "gs", "algorithm": "group_saola", "target": y.tolist()})
    ok = client.post("/v1/streams/gs/groups", json=_groups_body(X, names, [[0, 1]], ["g0"]))
    assert ok.status_code == 200
    again = client.post("/v1/streams/gs/groups", json=_groups_body(X, names, [[2, 3]], ["g0"]))
    assert again.status_code == 422 and again.json()["type"].endswith("invalid-input")
    assert client.get("/v1/streams/gs/selected").json()["version"] == 1


def test_group_saola_needs_groups_on_plain_feature_posts(client: TestClient) -> None:
    X, y = support.wdbc()
    client.post("/v1/streams", json={"id": "gs", "algorithm": "group_saola", "target": y.tolist()})
    r = client.post(
        "/v1/streams/gs/features", json={"features": [{"name": "f0", "values": X[0].tolist()}]}
    )
    assert r.status_code == 422
    r = client.post(
        "/v1/streams/gs/features",
        json={"features": [{"name": "f0", "values": X[0].tolist(), "group": "g0"}]},
    )
    assert r.status_code == 200 and r.json()["decisions"][0]["group"] == "g0"
