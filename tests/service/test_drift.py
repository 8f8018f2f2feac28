"""A stream's drift watch through a real server process, on the memory store and on Redis.

The server's detections are the in-process selector's, decision for decision:
the same instance counts and statistics, whether the instances come as HTTP
batches or WebSocket frames; a detection is a ``drift`` event in the log, an
entry of the history and a count of ``featurestream_drifts_total``; with
``on_drift: reset`` the selector restarts while the stream's count goes on;
the watch survives a restart of the server.
"""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.sync.client import connect

from featurestream.selectors import FIRES, OFS, FIRESParams, OFSParams
from featurestream_client import Client
from tests import support
from tests.support import ServeProcess

D = 6
NAMES = support.names(D)
BATCH = 100


def concept_switch(n: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Labels follow feature 0 for the first half, feature 3 after it."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D))
    y = np.where(X[:, 0] > 0, 1, 0)
    y[n // 2 :] = np.where(X[n // 2 :, 3] > 0, 1, 0)
    return X, y


def expected(params: dict[str, Any], X: np.ndarray, y: np.ndarray) -> tuple[list[Any], Any]:
    """The detections and the final selector of the same batches learnt in this process."""
    sel = OFS.start(OFSParams(**params), NAMES)
    found: list[Any] = []
    for lo in range(0, len(X), BATCH):
        found += sel.learn_instances(X[lo : lo + BATCH], y[lo : lo + BATCH]).drifts
    return found, sel


def create(http: httpx.Client, params: dict[str, Any], algorithm: str = "ofs") -> str:
    sid = f"drift-{uuid.uuid4().hex[:10]}"
    body = {"id": sid, "algorithm": algorithm, "params": params, "feature_names": NAMES}
    r = http.post("/v1/streams", json=body)
    assert r.status_code == 201, r.text
    return sid


def post_batches(http: httpx.Client, sid: str, X: np.ndarray, y: np.ndarray) -> None:
    for lo in range(0, len(X), BATCH):
        body = {"X": X[lo : lo + BATCH].tolist(), "y": y[lo : lo + BATCH].tolist()}
        r = http.post(f"/v1/streams/{sid}/instances", json=body)
        assert r.status_code == 200, r.text


def drift_events(http: httpx.Client, sid: str) -> list[dict[str, Any]]:
    r = http.get(f"/v1/streams/{sid}/events", params={"limit": 10_000})
    assert r.status_code == 200, r.text
    return [e for e in r.json()["events"] if e["type"] == "drift"]


def drifts_total(http: httpx.Client) -> float:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("featurestream_drifts_total "):
            return float(line.split()[1])
    raise AssertionError("featurestream_drifts_total is not exported")


@pytest.mark.parametrize("on_drift", ["log", "reset"])
def test_the_servers_detections_are_the_selectors(server: ServeProcess, on_drift: str) -> None:
    params = {"num_features": 2, "drift": "page_hinkley", "on_drift": on_drift}
    X, y = concept_switch()
    want, sel = expected(params, X, y)
    assert want and any(d.instances_seen > 1500 for d in want)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        before = drifts_total(http)
        sid = create(http, params)
        post_batches(http, sid, X, y)
        events = drift_events(http, sid)
        got = [(e["instances_seen"], e["statistic"], e["reset"]) for e in events]
        assert got == [(d.instances_seen, d.statistic, d.reset) for d in want]
        assert all(e["detector"] == "page_hinkley" for e in events)
        assert [e["moved"] for e in events] == [d.moved for d in want]
        assert drifts_total(http) - before == len(want)
        # The stream's count goes on over resets; the selection is the selector's.
        status = http.get(f"/v1/streams/{sid}/status").json()
        assert status["instances_seen"] == len(X) == sel.instances_seen
        selected = http.get(f"/v1/streams/{sid}/selected").json()["features"]
        assert [f["name"] for f in selected] == list(sel.selected())
        # Every version with a drift is in the history, with its detections.
        changes = http.get(f"/v1/streams/{sid}/history", params={"limit": 1000}).json()["changes"]
        listed = [d["instances_seen"] for c in changes for d in c["drifts"]]
        assert listed == [d.instances_seen for d in want]
        # The SDK reads them the same.
        with Client(server.url) as client:
            sdk = client.stream(sid).history()
        assert [d["instances_seen"] for c in sdk for d in c.drifts] == listed
        assert all(c.drifts == tuple(j["drifts"]) for c, j in zip(sdk, changes, strict=True))
        for c in changes:
            if c["drifts"]:
                past = http.get(f"/v1/streams/{sid}/selected", params={"version": c["version"]})
                assert len(past.json()["features"]) == c["size"]


def frame(X: np.ndarray, y: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.column_stack([X, y.astype(float)]))
    return buf.getvalue()


def test_frames_give_the_detections_of_http_batches(server: ServeProcess) -> None:
    """OFS's watch sees one error per instance: the batches' bounds change nothing."""
    params = {"num_features": 2, "drift": "adwin", "on_drift": "reset"}
    X, y = concept_switch(seed=1)
    want, sel = expected(params, X, y)
    assert want
    with httpx.Client(base_url=server.url, timeout=30) as http:
        sid = create(http, params)
        url = f"ws://127.0.0.1:{server.port}/v1/streams/{sid}/ws"
        with connect(url) as ws:
            for lo in range(0, len(X), 37):
                ws.send(frame(X[lo : lo + 37], y[lo : lo + 37]))
            last = 0
            while last < len(X):
                msg = json.loads(ws.recv(timeout=30))
                assert msg["type"] in ("selection", "ack"), msg
                if msg["type"] == "ack":
                    last = msg["instances_seen"]
        events = drift_events(http, sid)
        assert [e["instances_seen"] for e in events] == [d.instances_seen for d in want]
        assert [e["statistic"] for e in events] == [d.statistic for d in want]
        status = http.get(f"/v1/streams/{sid}/status").json()
        assert status["instances_seen"] == len(X)
        selected = http.get(f"/v1/streams/{sid}/selected").json()["features"]
        assert [f["name"] for f in selected] == list(sel.selected())


def test_unknown_drift_settings_are_refused_and_create_nothing(server: ServeProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for params in (
            {"num_features": 2, "drift": "cusum"},
            {"num_features": 2, "drift": "adwin", "on_drift": "restart"},
        ):
            sid = f"drift-{uuid.uuid4().hex[:10]}"
            body = {"id": sid, "algorithm": "fires", "params": params, "feature_names": NAMES}
            r = http.post("/v1/streams", json=body)
            assert r.status_code == 422, r.text
            problem = r.json()
            assert problem["type"].endswith("/invalid-parameter")
            assert ("drift" if "cusum" in str(params) else "on_drift") in problem["detail"]
            assert http.get(f"/v1/streams/{sid}/status").status_code == 404


@pytest.mark.redis
def test_the_watch_survives_a_restart(redis_url: str, key_prefix: str) -> None:
    """Killed halfway and started again, the server detects what an uninterrupted one does."""
    params = {"num_features": 2, "drift": "page_hinkley", "on_drift": "reset", "scale": "none"}
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2400, D))
    y = np.where(X[:, 0] > 0, 1, 0)
    y[1200:] = 1 - y[1200:]
    sel = FIRES.start(FIRESParams(**params), NAMES)
    want = []
    for lo in range(0, len(X), BATCH):
        want += sel.learn_instances(X[lo : lo + BATCH], y[lo : lo + BATCH]).drifts
    assert any(d.instances_seen > 1200 for d in want)
    first = ServeProcess(redis_url, key_prefix).start()
    try:
        with httpx.Client(base_url=first.url, timeout=30) as http:
            sid = create(http, params, algorithm="fires")
            post_batches(http, sid, X[:1100], y[:1100])
    finally:
        first.kill()
    second = ServeProcess(redis_url, key_prefix).start()
    try:
        with httpx.Client(base_url=second.url, timeout=30) as http:
            post_batches(http, sid, X[1100:], y[1100:])
            events = drift_events(http, sid)
            assert [(e["instances_seen"], e["statistic"]) for e in events] == [
                (d.instances_seen, d.statistic) for d in want
            ]
            selected = http.get(f"/v1/streams/{sid}/selected").json()["features"]
            assert [f["name"] for f in selected] == list(sel.selected())
    finally:
        second.kill()
