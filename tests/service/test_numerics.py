"""Numerically poisoned state against real server processes on Redis (issue 14, point 2).

Data of huge magnitude (1e300) once committed a NaN FSDS sketch; the next write then
spun inside the SVD holding the GIL, and after a restart every process touching the
stream did. A state that is not finite is now never committed (422
``numerically-unstable``, nothing applied), no kernel is given one, and a poisoned
state found in the store is refused instead of computed on.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import httpx
import numpy as np
import pytest
import redis
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from featurestream import codec
from featurestream.selectors import FSDS, FSDSParams
from featurestream.store.keys import stream_keys
from tests.service.test_processes import Server
from tests.service.test_ws_processes import recv, ws_url

pytestmark = [pytest.mark.redis, pytest.mark.slow]

UNSTABLE = "/problems/numerically-unstable"
# A write after an attack must be answered within this (a spinning kernel never is).
PROMPT = 10.0
FSDS_STREAM = {"algorithm": "fsds", "params": {"num_features": 2}, "feature_names": ["a", "b", "c"]}


@pytest.fixture
def server(servers: list[Server], redis_url: str, key_prefix: str) -> Server:
    """One server process on the test's Redis namespace."""
    started = Server(redis_url, key_prefix).start()
    servers.append(started)
    return started


def _version(c: httpx.Client, sid: str) -> int:
    r = c.get(f"/v1/streams/{sid}")
    assert r.status_code == 200, r.text
    return int(r.json()["version"])


def _refused(r: httpx.Response, sid: str) -> None:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["type"] == UNSTABLE and body["title"] == "Numerically unstable"
    assert body.get("stream_id", sid) == sid


def _write_ok(c: httpx.Client, sid: str, rows: list[list[float]]) -> dict[str, Any]:
    r = c.post(f"/v1/streams/{sid}/instances", json={"X": rows}, timeout=PROMPT)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def _finite(state: Any) -> bool:
    """Every float of a stored State is finite (checked here, not with the server's code)."""
    for f in dataclasses.fields(state):
        v = getattr(state, f.name)
        if isinstance(v, np.ndarray) and v.dtype.kind == "f" and not np.isfinite(v).all():
            return False
        if isinstance(v, float) and not np.isfinite(v):
            return False
    return True


def _state(redis_url: str, key_prefix: str, sid: str) -> Any:
    raw = redis.Redis.from_url(redis_url).get(stream_keys(key_prefix, sid).state)
    assert raw is not None
    return codec.decode(raw).state


def test_fsds_huge_rows_never_commit_a_non_finite_sketch_nor_stall_the_next_write(
    server: Server, redis_url: str, key_prefix: str
) -> None:
    with httpx.Client(base_url=server.url, timeout=PROMPT) as c:
        r = c.post("/v1/streams", json={"id": "sk", **FSDS_STREAM})
        assert r.status_code == 201, r.text
        # The attack of the issue: 1e300 squared overflows, but the sketch is computed
        # on data scaled by a power of two, so it is accepted and stays finite.
        _write_ok(c, "sk", [[1e300, -1e300, 1e300]])
        assert _finite(_state(redis_url, key_prefix, "sk"))
        selected = c.get("/v1/streams/sk/selected").json()
        assert all(np.isfinite(f["score"]) for f in selected["features"])
        _write_ok(c, "sk", [[1.0, 2.0, 3.0]])
        # A row whose norm is beyond float64 cannot be sketched: refused, nothing applied.
        before = _version(c, "sk")
        state_before = redis.Redis.from_url(redis_url).get(stream_keys(key_prefix, "sk").state)
        r = c.post("/v1/streams/sk/instances", json={"X": [[1.7e308, -1.7e308, 1.7e308]]})
        _refused(r, "sk")
        assert _version(c, "sk") == before
        raw = redis.Redis.from_url(redis_url).get(stream_keys(key_prefix, "sk").state)
        assert raw == state_before
        # The process is not wedged: the next write is answered at once.
        assert _write_ok(c, "sk", [[0.5, -1.0, 2.0]])["version"] == before + 1
    server.kill()
    server.start()
    with httpx.Client(base_url=server.url, timeout=PROMPT) as c:
        assert _write_ok(c, "sk", [[2.0, 1.0, 0.0]])["version"] == before + 2
        assert _finite(_state(redis_url, key_prefix, "sk"))


@pytest.mark.parametrize(
    ("create", "attack", "ok"),
    [
        # OFS's partial mode overflows its weights to NaN (on the values as sent:
        # standardised, the same huge instance repeated maps to 0).
        (
            {
                "algorithm": "ofs",
                "params": {"num_features": 2, "mode": "partial", "seed": 7, "scale": "none"},
            },
            {"X": [[1.7e308, -1.7e308, 1.7e308]] * 8, "y": [1, 0] * 4},
            {"X": [[0.5, -1.0, 2.0], [1.0, 0.0, -2.0]], "y": [1, 0]},
        ),
        # OFS's running standardisation overflows (alternating signs near the maximum).
        (
            {"algorithm": "ofs", "params": {"num_features": 2, "scale": "standard"}},
            {"X": [[1.7e308, -1.7e308, 1.0], [-1.7e308, 1.7e308, 2.0]] * 2, "y": [1, 0] * 2},
            {"X": [[0.5, -1.0, 2.0], [1.0, 0.0, -2.0]], "y": [1, 0]},
        ),
        # FIRES's running moments overflow.
        (
            {"algorithm": "fires", "params": {"num_features": 2}},
            {"X": [[1e300, -1e300, 1e300], [-1e300, 1e300, 1.0]], "y": [1, 0]},
            {"X": [[0.5, -1.0, 2.0], [1.0, 0.0, -2.0]], "y": [1, 0]},
        ),
        # NRFS's graph Laplacian overflows: refused before the eigensolver sees it.
        (
            {
                "algorithm": "nrfs",
                "params": {"num_features": 2, "window": 12, "min_instances": 6, "refresh": 5},
            },
            {"X": [[1e300 * (-1) ** i, float(i), 1.0] for i in range(8)]},
            {"X": [[0.5, -1.0, 2.0], [1.0, 0.0, -2.0]]},
        ),
    ],
    ids=["ofs", "ofs-standard", "fires", "nrfs"],
)
def test_an_instance_write_that_overflows_the_state_is_refused(
    server: Server, create: dict[str, Any], attack: dict[str, Any], ok: dict[str, Any]
) -> None:
    with httpx.Client(base_url=server.url, timeout=PROMPT) as c:
        r = c.post("/v1/streams", json={"id": "s", "feature_names": ["a", "b", "c"], **create})
        assert r.status_code == 201, r.text
        _refused(c.post("/v1/streams/s/instances", json=attack), "s")
        assert _version(c, "s") == 0
        assert c.get("/v1/streams/s/status").json()["instances_seen"] == 0
        r = c.post("/v1/streams/s/instances", json=ok)
        assert r.status_code == 200, r.text
        assert r.json()["version"] == 1


def test_a_feature_stream_whose_target_overflows_its_state_is_not_created(
    server: Server,
) -> None:
    with httpx.Client(base_url=server.url, timeout=PROMPT) as c:
        target = [1e300 * (-1) ** i for i in range(20)]
        r = c.post(
            "/v1/streams", json={"id": "ai", "algorithm": "alpha_investing", "target": target}
        )
        _refused(r, "ai")
        assert c.get("/v1/streams/ai").status_code == 404
        y = [float(i % 2) for i in range(20)]
        r = c.post("/v1/streams", json={"id": "ai", "algorithm": "alpha_investing", "target": y})
        assert r.status_code == 201, r.text
        # Parameters are numbers the state computes with: an infinity, or an integer
        # beyond int64, is an invalid parameter (both were accepted; an OFS stream then
        # answered its first write with a 500).
        for text in (
            '{"num_features": 1, "ridge": Infinity}',
            '{"num_features": 1' + "0" * 30 + "}",
        ):
            body = '{"algorithm": "fsds", "feature_names": ["a", "b"], "params": ' + text + "}"
            r = c.post("/v1/streams", content=body, headers={"content-type": "application/json"})
            assert r.status_code == 422, r.text
            assert r.json()["type"] == "/problems/invalid-parameter"


def test_a_websocket_frame_that_overflows_the_state_is_refused_and_uses_its_seq(
    server: Server, redis_url: str, key_prefix: str
) -> None:
    r = httpx.post(server.url + "/v1/streams", json={"id": "w", **FSDS_STREAM})
    assert r.status_code == 201, r.text
    with connect(ws_url(server, "w", producer="p"), max_size=None) as ws:
        assert recv(ws)["type"] == "selection"
        ws.send(json.dumps({"X": [[1.0, 2.0, 3.0]]}))
        ws.send(json.dumps({"X": [[1.7e308, -1.7e308, 1.7e308]]}))
        ws.send(json.dumps({"X": [[3.0, 2.0, 1.0]]}))
        answers = []
        while len(answers) < 3:
            msg = recv(ws, timeout=PROMPT)
            if msg["type"] != "selection":
                answers.append(msg)
    assert [a["type"] for a in answers] == ["ack", "error", "ack"]
    assert [a.get("ack", a.get("seq")) for a in answers] == [1, 2, 3]
    assert answers[1]["error"]["type"] == UNSTABLE
    assert answers[1]["error"]["status"] == 422
    assert answers[2]["instances_seen"] == 2
    state = _state(redis_url, key_prefix, "w")
    assert _finite(state) and state.instances_seen == 2


def test_a_poisoned_stored_state_is_refused_not_computed_on(
    server: Server, redis_url: str, key_prefix: str
) -> None:
    """A NaN sketch written by an older version: no process wedges on it."""
    with httpx.Client(base_url=server.url, timeout=PROMPT) as c:
        for sid in ("bad", "good"):
            assert c.post("/v1/streams", json={"id": sid, **FSDS_STREAM}).status_code == 201
            _write_ok(c, sid, [[1.0, 2.0, 3.0]])
    server.kill()
    # What the old code committed for the attack: a NaN sketch and NaN scores.
    sel = FSDS.start(FSDSParams(num_features=2), ["a", "b", "c"])
    sel.learn_instances(np.array([[1.0, 2.0, 3.0]]))
    poisoned = dataclasses.replace(
        sel.state, sketch=np.full((3, 1), np.nan), scores=np.full(3, np.nan)
    )
    blob = codec.encode("fsds", sel.params.to_dict(), poisoned)
    redis.Redis.from_url(redis_url).set(stream_keys(key_prefix, "bad").state, blob)
    server.start()
    with httpx.Client(base_url=server.url, timeout=PROMPT) as c:
        for _ in range(2):  # refused every time, never cached
            r = c.post("/v1/streams/bad/instances", json={"X": [[1.0, 1.0, 1.0]]})
            _refused(r, "bad")
            assert "bad" in r.json()["detail"]
        assert _version(c, "bad") == 1
        # Reads do not decode the state: they keep working.
        assert c.get("/v1/streams/bad/selected").status_code == 200
        assert c.get("/v1/streams/bad/status").status_code == 200
        # The process is not wedged: other streams are served.
        assert _write_ok(c, "good", [[3.0, 2.0, 1.0]])["version"] == 2
        assert c.get("/healthz").status_code == 200
    with connect(ws_url(server, "bad", producer="p"), max_size=None) as ws:
        msg = recv(ws, timeout=PROMPT)
        assert msg["type"] == "error" and msg["error"]["type"] == UNSTABLE
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=PROMPT)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert redis.Redis.from_url(redis_url).get(stream_keys(key_prefix, "bad").state) == blob
    # Deleting and re-creating the stream is the way on.
    with httpx.Client(base_url=server.url, timeout=PROMPT) as c:
        assert c.delete("/v1/streams/bad").status_code == 204
        assert c.post("/v1/streams", json={"id": "bad", **FSDS_STREAM}).status_code == 201
        assert _write_ok(c, "bad", [[1.0, 1.0, 2.0]])["version"] == 1
