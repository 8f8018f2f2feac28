"""Redis hung (SIGSTOP) for 10 s under load: every answer within the bound, nothing lost.

A hung Redis keeps its connections open and answers nothing: without a bound
a request waits for socket timeouts and retries (3 x 10 s). Every store call is
bounded by ``store_timeout`` (2 s here): while Redis is stopped, every route
answers ``503`` within about that, ``/readyz`` fails, WebSockets get an
``error`` and close 1013; producers retry with the same seqs, and once Redis
continues (SIGCONT) everything completes by itself, with every acknowledged
update there once.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.conftest import RedisServer
from tests.faults.harness import (
    CLOSE_TRY_AGAIN_LATER,
    STORE_UNAVAILABLE,
    FeatureProducer,
    FrameProducer,
    Processes,
    ServerProcess,
    create_stream,
    feature_workload,
    fixed_route,
    instance_workload,
    instances_http,
    metric,
    npy,
    verify_run,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

STORE_TIMEOUT = 2.0
# Every answer while Redis is hung: the store timeout, plus the slack of a loaded machine
# (ten probes start at once, each with a client of its own, beside three producers).
BOUND = STORE_TIMEOUT + 2.0
PAUSE = 10.0


def _started(
    processes: Processes, redis_server_factory: Callable[..., RedisServer], key_prefix: str
) -> tuple[RedisServer, ServerProcess]:
    """A private Redis, and a server on it with a store_timeout of STORE_TIMEOUT, warm."""
    store = redis_server_factory()
    server = processes.server(
        store.url,
        key_prefix,
        env={
            "FEATURESTREAM_STORE_TIMEOUT": str(STORE_TIMEOUT),
            "FEATURESTREAM_WARM_KERNELS": "true",
        },
    ).start()
    # Warm first: the bounds are the store's, not those of loading the compiled kernels.
    deadline = time.monotonic() + 60
    while metric(server.url, "featurestream_kernels_warm") != 1:
        assert time.monotonic() < deadline, "the kernels never warmed"
        time.sleep(0.1)
    return store, server


def _probe_routes(server: ServerProcess) -> list[tuple[str, int | None, float]]:
    """Every kind of route at once, each timed: (what, status or close code, seconds)."""
    url = server.url
    A = np.column_stack([np.ones((2, 12)), np.zeros(2)])

    def http(what: str, method: str, path: str, **kw: Any) -> tuple[str, int | None, float]:
        t = time.monotonic()
        r = httpx.request(method, url + path, timeout=30, **kw)
        took = time.monotonic() - t
        if r.status_code == 503 and path != "/readyz":
            assert r.json()["type"] == STORE_UNAVAILABLE, r.text
        return what, r.status_code, took

    def ws() -> tuple[str, int | None, float]:
        t = time.monotonic()
        code = None
        with connect(server.ws_url("hp", producer="probe"), open_timeout=10) as conn:
            conn.send(npy(A))
            try:
                for _ in range(10):
                    conn.recv(timeout=30)
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd else None
        return "websocket", code, time.monotonic() - t

    probes: list[Callable[[], tuple[str, int | None, float]]] = [
        lambda: http("readyz", "GET", "/readyz"),
        lambda: http("list", "GET", "/v1/streams"),
        lambda: http("get", "GET", "/v1/streams/h"),
        lambda: http("selected", "GET", "/v1/streams/h/selected"),
        lambda: http("status", "GET", "/v1/streams/h/status"),
        lambda: http("events", "GET", "/v1/streams/h/events"),
        lambda: http(
            "create", "POST", "/v1/streams", json={"algorithm": "saola", "target": [1.0, 2.0]}
        ),
        lambda: http("delete", "DELETE", "/v1/streams/nothing-here"),
        lambda: http(
            "instances", "POST", "/v1/streams/hp/instances", **instances_http(A, "probe-http", 1)
        ),
        ws,
    ]
    with ThreadPoolExecutor(len(probes)) as pool:
        return list(pool.map(lambda p: p(), probes))


def test_redis_hung_for_ten_seconds_every_answer_within_the_bound_nothing_lost(
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
) -> None:
    store, server = _started(processes, redis_server_factory, key_prefix)
    features = feature_workload(700, producers=("p1", "p2"), requests=60)
    create_stream(server.url, features, "h")
    frames = instance_workload(701, "ofs", frames=300)
    create_stream(server.url, frames, "hw")
    # The probes write to a stream of their own: a write answered 503 may still land
    # once Redis continues (outcome unknown), and the checks below are of the producers'.
    create_stream(server.url, frames, "hp")
    # Paced so that the run lasts well past the hang: two HTTP producers on one stream,
    # one WebSocket producer on another.
    http = [
        FeatureProducer("h", p, features.requests[p], fixed_route(server.url), interval=0.1)
        for p in ("p1", "p2")
    ]
    ws = FrameProducer("hw", "q", frames.frames, lambda: server, interval=0.02)
    producers: list[FeatureProducer | FrameProducer] = [*http, ws]
    for p in producers:
        p.start()
    deadline = time.monotonic() + 60
    while min(p.log.last_ack for p in producers) < 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(not p.log.done for p in producers), "the run ended before the hang"

    store.pause()
    paused = time.monotonic()
    try:
        time.sleep(0.5)  # requests and frames are in flight, waiting for Redis
        probes = _probe_routes(server)
        rest = PAUSE - (time.monotonic() - paused)
        if rest > 0:
            time.sleep(rest)
    finally:
        store.resume()
    resumed = time.monotonic()

    # Recovery by itself: ready again within a few seconds.
    while httpx.get(server.url + "/readyz", timeout=10).status_code != 200:
        assert time.monotonic() - resumed < 10, "not ready 10 s after Redis continued"
        time.sleep(0.05)
    for p in producers:
        p.join(120)
    for p in producers:
        assert p.log.done and not p.log.failures, p.log.failures
        assert p.log.last_ack == p.log.total

    # Every route answered 503 (1013 for the WebSocket) within the bound.
    for what, status, took in probes:
        expected = CLOSE_TRY_AGAIN_LATER if what == "websocket" else 503
        assert status == expected, (what, status, took)
        assert took < BOUND, (what, took)
    readyz = next(took for what, _, took in probes if what == "readyz")
    assert readyz < STORE_TIMEOUT + 1.5
    # Every answer the producers got, before, during and after the hang, within the bound.
    latencies = sorted(t for p in producers for t in p.log.latencies)
    stats = (
        f"{len(latencies)} answers: min {latencies[0] * 1000:.0f} ms, median "
        f"{statistics.median(latencies) * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms; "
        f"probes {[(w, s, round(t, 2)) for w, s, t in probes]}"
    )
    print(f"Redis hung {PAUSE:g} s: {stats}")
    assert latencies[-1] < BOUND, stats
    # The hang was felt: 503s over HTTP, 1013 closes on the WebSocket.
    assert all(p.log.store_errors >= 1 for p in http)
    assert ws.log.close_codes[CLOSE_TRY_AGAIN_LATER] >= 1

    # Nothing acknowledged lost, nothing applied twice: each seq once, in order, and
    # the state is the serial application of the log.
    figures = verify_run(
        server.url, store.url, key_prefix, "h", features, [p.log for p in http], serial=False
    )
    assert figures.lost == 0
    figures = verify_run(server.url, store.url, key_prefix, "hw", frames, [ws.log])
    assert figures.lost == 0


def test_a_request_queued_behind_a_hung_one_on_the_same_stream_is_answered_in_time(
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
) -> None:
    """Writers of one stream queue on its lock: each must not wait a timeout in turn."""
    store, server = _started(processes, redis_server_factory, key_prefix)
    workload = instance_workload(702, "ofs", frames=20)
    create_stream(server.url, workload, "q")
    results: list[tuple[int, float]] = []
    lock = threading.Lock()

    def post(i: int) -> None:
        t = time.monotonic()
        r = httpx.post(
            f"{server.url}/v1/streams/q/instances",
            **instances_http(workload.frames[i], f"w{i}", 1),
            timeout=60,
        )
        with lock:
            results.append((r.status_code, time.monotonic() - t))

    store.pause()
    try:
        threads = [threading.Thread(target=post, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        store.resume()
    assert sorted(s for s, _ in results) == [503] * 8
    assert max(t for _, t in results) < BOUND, results
