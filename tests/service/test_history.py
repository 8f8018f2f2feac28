"""History of a stream's selection: ``at`` on events, ``/selected?version=``, ``/history``.

Every past selection is checked against the ``selected`` list the write that
made the version answered, on the memory store and on real Redis.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from featurestream.api import create_app
from featurestream.config import Settings
from featurestream.store.base import EventEntry
from featurestream.store.memory import InMemoryStore
from tests import support


def _utc(value: str) -> datetime:
    assert value.endswith("Z"), value
    t = datetime.fromisoformat(value)
    assert t.utcoffset() is not None and t.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    return t


def _feature_stream(client: TestClient, sid: str = "h") -> dict[int, list[str]]:
    """A SAOLA stream fed wdbc's 30 columns in batches; the selection after each version."""
    X, y = support.wdbc()
    r = client.post("/v1/streams", json={"id": sid, "algorithm": "saola", "target": y.tolist()})
    assert r.status_code == 201, r.text
    after: dict[int, list[str]] = {0: []}
    for start in range(0, 30, 3):
        cols = [{"name": f"x{j}", "values": X[j].tolist()} for j in range(start, start + 3)]
        r = client.post(f"/v1/streams/{sid}/features", json={"features": cols})
        assert r.status_code == 200, r.text
        after[r.json()["version"]] = r.json()["selected"]
    return after


def _expected_changes(after: dict[int, list[str]]) -> list[dict[str, Any]]:
    out = []
    for v in sorted(after)[1:]:
        was, now = set(after[v - 1]), set(after[v])
        if was != now:
            out.append(
                {
                    "version": v,
                    "added": [n for n in after[v] if n not in was],
                    "removed": [n for n in after[v - 1] if n not in now],
                    "size": len(now),
                }
            )
    return out


def _check_history(client: TestClient, sid: str, after: dict[int, list[str]]) -> None:
    current = max(after)
    for v, names in after.items():
        r = client.get(f"/v1/streams/{sid}/selected", params={"version": v})
        assert r.status_code == 200, r.text
        doc = r.json()
        assert doc["version"] == v
        if v == current:
            # The current version: the selection document itself, scores and order.
            assert doc == client.get(f"/v1/streams/{sid}/selected").json()
        else:
            assert [f["name"] for f in doc["features"]] == sorted(names)
            assert all(f["score"] is None for f in doc["features"])
    r = client.get(f"/v1/streams/{sid}/selected", params={"version": current + 1})
    assert r.status_code == 404
    assert r.json()["type"] == "/problems/version-not-found"
    assert r.json()["current_version"] == current

    page = client.get(f"/v1/streams/{sid}/history").json()
    assert page["next"] is None and page["version"] == current
    got = [{k: c[k] for k in ("version", "added", "removed", "size")} for c in page["changes"]]
    assert got == _expected_changes(after)
    times = [_utc(c["at"]) for c in page["changes"]]
    assert times == sorted(times)
    # The commit time is the one its events carry, and the updated_at of its selection.
    events = client.get(f"/v1/streams/{sid}/events", params={"limit": 10_000}).json()["events"]
    at_of = {e["version"]: e["at"] for e in events}
    assert all(e["at"] is not None for e in events)
    for c in page["changes"]:
        assert at_of[c["version"]] == c["at"]
        if c["version"] < current:
            sel = client.get(f"/v1/streams/{sid}/selected", params={"version": c["version"]})
            assert sel.json()["updated_at"] == c["at"]

    # Pages of one change each walk the same changes; next names where to go on.
    walked: list[dict[str, Any]] = []
    after_version: int | None = None
    for _ in range(100):
        params: dict[str, Any] = {"limit": 1}
        if after_version is not None:
            params["after_version"] = after_version
        p = client.get(f"/v1/streams/{sid}/history", params=params).json()
        walked.extend(p["changes"])
        if p["next"] is None:
            break
        assert len(p["changes"]) == 1
        after_version = p["next"]
    assert walked == page["changes"]


def test_feature_stream_history_rebuilds_every_past_selection(client: TestClient) -> None:
    after = _feature_stream(client)
    changes = _expected_changes(after)
    # The data makes the selection both grow and lose features (evictions).
    assert any(c["removed"] for c in changes) and any(c["added"] for c in changes)
    _check_history(client, "h", after)


def test_instance_stream_history_rebuilds_every_past_selection(client: TestClient) -> None:
    rng = np.random.default_rng(3)
    names = [f"v{i}" for i in range(8)]
    r = client.post(
        "/v1/streams",
        json={
            "id": "hi",
            "algorithm": "ofs",
            "params": {"num_features": 3, "seed": 1},
            "feature_names": names,
        },
    )
    assert r.status_code == 201, r.text
    after: dict[int, list[str]] = {0: client.get("/v1/streams/hi/selected").json()["features"]}
    after[0] = [f["name"] for f in after[0]]
    for _ in range(12):
        X = rng.normal(size=(20, 8))
        y = (X[:, int(rng.integers(0, 8))] > 0).astype(int)
        r = client.post("/v1/streams/hi/instances", json={"X": X.tolist(), "y": y.tolist()})
        assert r.status_code == 200, r.text
        after[r.json()["version"]] = r.json()["selected"]
    assert len(_expected_changes(after)) >= 2
    _check_history(client, "hi", after)


def test_history_older_than_the_log_keeps_is_gone() -> None:
    X, y = support.wdbc()
    settings = Settings(store_url="memory://", event_retention=100)
    with TestClient(create_app(settings)) as client:
        r = client.post("/v1/streams", json={"id": "t", "algorithm": "saola", "target": y.tolist()})
        assert r.status_code == 201
        for i in range(110):
            col = {"name": f"c{i}", "values": (X[i % 30] + 0.001 * i).tolist()}
            r = client.post("/v1/streams/t/features", json={"features": [col]})
            assert r.status_code == 200, r.text
        current = r.json()["version"]
        assert current == 110
        # The log holds versions 11..110: version 10's selection needs entry 10 to date it.
        for v in (0, 5, 10):
            r = client.get("/v1/streams/t/selected", params={"version": v})
            assert r.status_code == 410, r.text
            assert r.json()["type"] == "/problems/history-trimmed"
            assert r.json()["oldest_version"] == 11
        assert client.get("/v1/streams/t/selected", params={"version": 11}).status_code == 200
        r = client.get("/v1/streams/t/history", params={"after_version": 5})
        assert r.status_code == 410 and r.json()["type"] == "/problems/history-trimmed"
        assert client.get("/v1/streams/t/history", params={"after_version": 10}).status_code == 200
        # Without after_version: from the oldest change kept.
        page = client.get("/v1/streams/t/history").json()
        assert page["changes"] and page["changes"][0]["version"] >= 11
        # Bad parameters: 422, nothing read.
        for q in ({"version": -1}, {"version": "x"}):
            assert client.get("/v1/streams/t/selected", params=q).status_code == 422
        for q in ({"after_version": -1}, {"limit": 0}, {"limit": 1001}):
            assert client.get("/v1/streams/t/history", params=q).status_code == 422
        assert client.get("/v1/streams/nope/history").status_code == 404
        assert client.get("/v1/streams/nope/selected", params={"version": 0}).status_code == 404


def test_entries_stored_before_the_log_kept_changes_are_not_history() -> None:
    """Log entries without ``at``/``change`` (stored by an earlier release) stay readable
    as events (``at`` null); the history starts after the newest of them."""
    store = InMemoryStore()
    with TestClient(create_app(Settings(store_url="memory://"), store=store)) as client:
        after = _feature_stream(client, "old")
        entries = store._streams["old"].events
        for i in (0, 1):
            payload = orjson.loads(entries[i].payload)
            payload.pop("at"), payload.pop("change", None)
            entries[i] = EventEntry(entries[i].version, orjson.dumps(payload))
        events = client.get("/v1/streams/old/events", params={"limit": 10_000}).json()["events"]
        assert {e["at"] is None for e in events if e["version"] <= 2} == {True}
        assert all(e["at"] is not None for e in events if e["version"] > 2)
        r = client.get("/v1/streams/old/selected", params={"version": 1})
        assert r.status_code == 410 and r.json()["oldest_version"] == 2
        r = client.get("/v1/streams/old/selected", params={"version": 2})
        assert r.status_code == 200
        assert [f["name"] for f in r.json()["features"]] == sorted(after[2])
        assert r.json()["updated_at"] is None  # entry 2 does not say when it was committed
        assert client.get("/v1/streams/old/history", params={"after_version": 0}).status_code == 410
        page = client.get("/v1/streams/old/history").json()
        assert page["changes"] and min(c["version"] for c in page["changes"]) > 2
        assert page["changes"] == [c for c in page["changes"] if c["version"] > 2]


@pytest.mark.parametrize("kind", ["features", "instances"])
def test_selected_at_version_zero_is_the_created_selection(kind: str) -> None:
    with TestClient(create_app(Settings(store_url="memory://"))) as client:
        body: dict[str, Any] = (
            {"id": "z", "algorithm": "saola", "target": [0, 1, 0, 1, 0, 1]}
            if kind == "features"
            else {
                "id": "z",
                "algorithm": "fires",
                "params": {"num_features": 1},
                "feature_names": ["a", "b"],
            }
        )
        created = client.post("/v1/streams", json=body).json()
        doc = client.get("/v1/streams/z/selected", params={"version": 0}).json()
        assert doc == client.get("/v1/streams/z/selected").json()
        assert doc["version"] == 0 and doc["updated_at"] == created["created_at"]
        page = client.get("/v1/streams/z/history").json()
        assert page == {"changes": [], "next": None, "version": 0}
