"""Real server processes: restart after SIGKILL, and two processes writing one stream."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import numpy as np
import pytest
import redis

from featurestream import codec
from featurestream.selectors import SAOLA, SAOLAParams
from featurestream.store.keys import stream_keys
from tests import support
from tests.support import ServeProcess

pytestmark = [pytest.mark.redis, pytest.mark.slow]


Server = ServeProcess


def test_serve_answers_healthz_on_memory_store(servers: list[Server]) -> None:
    server = Server("memory://").start()
    servers.append(server)
    assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
    assert httpx.get(server.url + "/readyz").status_code == 200


def test_sigkill_and_restart_keeps_selection_version_and_events(
    servers: list[Server], redis_url: str, key_prefix: str
) -> None:
    X, y = support.wdbc()
    server = Server(redis_url, key_prefix).start()
    servers.append(server)
    with httpx.Client(base_url=server.url, timeout=30) as c:
        r = c.post("/v1/streams", json={"id": "k", "algorithm": "saola", "target": y.tolist()})
        assert r.status_code == 201
        acks = []
        bodies = []
        for k, start in enumerate(range(0, 30, 10)):
            feats = [{"name": f"f{i}", "values": X[i].tolist()} for i in range(start, start + 10)]
            bodies.append({"producer": "p", "seq": k + 1, "features": feats})
            r = c.post("/v1/streams/k/features", json=bodies[-1])
            assert r.status_code == 200
            acks.append(r.content)
        before = (
            c.get("/v1/streams/k/selected").json(),
            c.get("/v1/streams/k/events", params={"limit": 1000}).json(),
            c.get("/v1/streams/k/status").json(),
        )
    server.kill()
    server.start()
    with httpx.Client(base_url=server.url, timeout=30) as c:
        after = (
            c.get("/v1/streams/k/selected").json(),
            c.get("/v1/streams/k/events", params={"limit": 1000}).json(),
            c.get("/v1/streams/k/status").json(),
        )
        assert after == before
        assert [f["name"] for f in after[0]["features"]] == ["f21", "f27"]
        assert after[0]["version"] == 3
        # Every acknowledged request is still known: a retry is answered, not re-applied.
        r = c.post("/v1/streams/k/features", json=bodies[2])
        assert r.status_code == 200 and r.content == acks[2]
        assert r.headers["idempotent-replay"] == "true"


def _post_all(
    url: str, producer: str, columns: list[tuple[str, list[float]]], errors: list[Any]
) -> None:
    try:
        with httpx.Client(base_url=url, timeout=60) as c:
            for k, (name, values) in enumerate(columns):
                body = {
                    "producer": producer,
                    "seq": k + 1,
                    "features": [{"name": name, "values": values}],
                }
                for _attempt in range(20):
                    r = c.post("/v1/streams/race/features", json=body)
                    if r.status_code != 409 or r.json().get("type", "").endswith(
                        "sequence-conflict"
                    ):
                        break
                assert r.status_code == 200, r.text
    except BaseException as exc:  # surfaced by the main thread
        errors.append(exc)


def test_two_processes_writing_one_stream_equal_the_serial_order(
    servers: list[Server], redis_url: str, key_prefix: str
) -> None:
    rng = np.random.default_rng(2)
    n = 80
    y = rng.normal(size=n)
    X = rng.normal(size=(80, n)) + np.outer(rng.random(80) > 0.5, y)
    X[41] = X[7]  # a duplicate arriving from the other producer
    a, b = Server(redis_url, key_prefix).start(), Server(redis_url, key_prefix).start()
    servers += [a, b]
    r = httpx.post(
        a.url + "/v1/streams",
        json={"id": "race", "algorithm": "saola", "params": {"alpha": 0.05}, "target": y.tolist()},
    )
    assert r.status_code == 201
    cols = [(f"c{i}", X[i].tolist()) for i in range(80)]
    errors: list[Any] = []
    threads = [
        threading.Thread(target=_post_all, args=(a.url, "A", cols[0::2], errors)),
        threading.Thread(target=_post_all, args=(b.url, "B", cols[1::2], errors)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    events = httpx.get(b.url + "/v1/streams/race/events", params={"limit": 10_000}).json()["events"]
    batches = [e for e in events if e["type"] == "batch"]
    assert [e["version"] for e in batches] == list(range(1, 81))
    # Each producer's requests appear in its own order; interleaving is whatever Redis saw.
    for producer in ("A", "B"):
        assert [e["seq"] for e in batches if e["producer"] == producer] == list(range(1, 41))
    order = [e["names"][0] for e in batches]
    serial = SAOLA.start(SAOLAParams(alpha=0.05), y)
    for name in order:
        serial.learn_feature(name, X[int(name[1:])])
    selected = httpx.get(a.url + "/v1/streams/race/selected").json()
    assert [f["name"] for f in selected["features"]] == list(serial.selected())
    assert selected["version"] == 80
    raw = redis.Redis.from_url(redis_url).get(stream_keys(key_prefix, "race").state)
    assert raw == codec.encode("saola", serial.params.to_dict(), serial.snapshot())
