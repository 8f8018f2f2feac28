"""SIGKILL of Redis (AOF, ``appendfsync always``) mid-request, then a restart on its AOF.

While Redis is down the server stays up: requests get ``503`` with
``store-unavailable`` and WebSocket sessions end with an ``error`` message and
close code 1013. The client retries (HTTP: the same seq; WebSocket: resume at
last ack + 1). What the AOF restores must hold every acknowledged update and
no part of an unacknowledged one, and the end state must equal the serial
application of each request exactly once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx
import numpy as np
import pytest
import redis

from tests.conftest import RedisServer
from tests.faults.harness import (
    CLOSE_TRY_AGAIN_LATER,
    STORE_UNAVAILABLE,
    FeatureRequest,
    FeatureWorkload,
    Processes,
    Scenario,
    Service,
    consistency_problems,
    create_stream,
    feature_workload,
    read_stored,
    run_scenario,
    seed_note,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.mark.parametrize(("algorithm", "seed"), [("saola", 200), ("ofs", 201), ("fsds", 202)])
def test_redis_killed_mid_stream_then_restarted_loses_and_half_applies_nothing(
    algorithm: str,
    seed: int,
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
    request: pytest.FixtureRequest,
) -> None:
    store = redis_server_factory()
    service = Service(processes, store.url, key_prefix, warm=False)
    # Outages longer than the server's own Redis retries (a few tenths of a second),
    # so the client does see them.
    scenario = Scenario.draw(
        seed, algorithms=[algorithm], targets=["redis"], faults=(2, 2), outage=(0.8, 1.2)
    )
    with seed_note(
        seed, f"python -m pytest -p no:cacheprovider -s '{request.node.nodeid}'", processes.servers
    ):
        figures = run_scenario(scenario, service=service, store=store, stream_id="k")
        print(scenario, figures)
        assert figures.redis_kills == 2, "the faults did not land mid-stream"
        # Each outage was seen: 503s over HTTP, an error and a 1013 close over the WebSocket.
        assert figures.store_errors >= figures.redis_kills
        if algorithm != "saola":
            assert figures.close_codes[CLOSE_TRY_AGAIN_LATER] >= figures.redis_kills
        assert figures.lost == 0


def _extra_request(workload: FeatureWorkload, columns: int, seed: int) -> FeatureRequest:
    """One more request of fresh columns (registered in the workload's reference data)."""
    rng = np.random.default_rng([seed, 5])
    X = rng.normal(size=(columns, workload.y.shape[0]))
    X[0] = workload.y + 0.5 * X[0]  # a relevant one: the request changes the selection
    names = tuple(f"late{i}" for i in range(columns))
    workload.columns.update(zip(names, X, strict=True))
    return FeatureRequest(names, X, "json")


def test_a_commit_in_flight_when_redis_dies_gets_503_and_applies_once_on_retry(
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
) -> None:
    store = redis_server_factory()
    server = processes.server(store.url, key_prefix).start()
    workload = feature_workload(300, requests=3)
    requests = workload.requests["p"]
    late = _extra_request(workload, 4, 300)
    requests.append(late)
    create_stream(server.url, workload, "k")
    path = f"{server.url}/v1/streams/k/features"
    with httpx.Client(timeout=30) as c:
        acked = [c.post(path, **r.http("p", k)) for k, r in enumerate(requests[:3], 1)]
        assert [r.status_code for r in acked] == [200, 200, 200]
        # Writes (the commit script) wait while reads go on: the request is decided, then
        # its commit sits in Redis, unapplied, when Redis is killed.
        admin = redis.Redis.from_url(store.url)
        admin.client_pause(5000, all=False)
        answer: list[httpx.Response] = []
        sender = threading.Thread(target=lambda: answer.append(c.post(path, **late.http("p", 4))))
        sender.start()
        _wait_for_a_paused_write(admin)
        store.kill()
        sender.join(30)
        admin.close()
        assert answer, "the request got no answer"
        assert answer[0].status_code == 503, answer[0].text
        assert answer[0].json()["type"] == STORE_UNAVAILABLE
        assert int(answer[0].headers["retry-after"]) >= 1
        store.start()  # the same port and AOF
        stored = read_stored(store.url, key_prefix, "k")
        # The AOF holds every acknowledged request and nothing of the refused one.
        assert consistency_problems(stored, workload) == []
        assert stored.version == 3 and stored.producers == {"p": 3}
        retried = c.post(path, **late.http("p", 4))
        assert retried.status_code == 200, retried.text
        assert retried.headers.get("idempotent-replay") is None  # applied now, and only now
        again = c.post(path, **late.http("p", 4))
        assert again.headers["idempotent-replay"] == "true"
        assert again.content == retried.content
    stored = read_stored(store.url, key_prefix, "k")
    assert consistency_problems(stored, workload) == []
    assert [b.seq for b in stored.batches] == [1, 2, 3, 4]
    assert stored.blob == workload.uninterrupted()
    for k, r in enumerate(acked, 1):
        assert stored.responses[("p", k)] == r.content


def _wait_for_a_paused_write(admin: redis.Redis) -> None:
    """Until a client of Redis is held by the pause (the server's commit)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        clients = admin.client_list()
        if any(c["cmd"] in ("evalsha", "eval") and "b" in c["flags"] for c in clients):
            return
        time.sleep(0.01)
    raise AssertionError("the commit never reached Redis")
