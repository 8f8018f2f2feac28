"""Redis stopped for seconds while a client writes: it waits it out and completes by itself.

While Redis is down the client sees ``503 store-unavailable`` (HTTP) or an
``error`` message and close code 1013 (WebSocket); it keeps retrying and, once
Redis is back on its AOF, finishes without help, with no acknowledged update
lost and nothing applied twice.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.conftest import RedisServer
from tests.faults.harness import (
    CLOSE_TRY_AGAIN_LATER,
    STORE_UNAVAILABLE,
    Ack,
    FrameProducer,
    Pacer,
    Processes,
    ProducerLog,
    create_stream,
    feature_workload,
    instance_workload,
    read_stored,
    verify_run,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

REQUESTS = 60


class Outage(threading.Thread):
    """Stops Redis (SIGTERM) once the client has ``after`` acks, restarts it ``seconds`` later."""

    def __init__(self, store: RedisServer, progress: Callable[[], int], after: int, seconds: float):
        super().__init__(name="outage", daemon=True)
        self.store = store
        self.progress = progress
        self.after = after
        self.seconds = seconds
        self.began = self.ended = 0.0
        self.progress_at_stop = -1
        self.errors: list[BaseException] = []

    def run(self) -> None:
        try:
            deadline = time.monotonic() + 60
            while self.progress() < self.after and time.monotonic() < deadline:
                time.sleep(0.002)
            self.store.stop()
            self.progress_at_stop = self.progress()
            self.began = time.monotonic()
            time.sleep(self.seconds)
            self.store.start()  # the same port and AOF
            self.ended = time.monotonic()
        except BaseException as exc:  # surfaced by the test
            self.errors.append(exc)


@pytest.mark.parametrize("seconds", [2.0, pytest.param(10.0, id="10s")])
def test_redis_stopped_during_a_run_the_http_client_completes_by_itself(
    seconds: float,
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
) -> None:
    store = redis_server_factory()
    server = processes.server(store.url, key_prefix).start()
    workload = feature_workload(500, requests=REQUESTS)
    create_stream(server.url, workload, "o")
    log = ProducerLog("p", REQUESTS)
    outage = Outage(store, lambda: len(log.acks), after=5, seconds=seconds)
    outage.start()
    path = f"{server.url}/v1/streams/o/features"
    # The client: send each seq until it is answered 200; on 503 wait as told (capped).
    # Paced, so that Redis stops mid-run.
    pacer = Pacer(0.01)
    with httpx.Client(timeout=30) as c:
        for seq, request in enumerate(workload.requests["p"], 1):
            pacer.wait()
            while True:
                r = c.post(path, **request.http("p", seq))
                log.sent += 1
                log.statuses[r.status_code] += 1
                if r.status_code == 200:
                    replayed = r.headers.get("idempotent-replay") == "true"
                    log.acks[seq] = Ack(seq, r.json()["version"], r.content, replayed=replayed)
                    break
                assert r.status_code == 503, r.text
                assert r.json()["type"] == STORE_UNAVAILABLE
                log.store_errors += 1
                time.sleep(min(float(r.headers["retry-after"]), 0.25))
    finished = time.monotonic()
    outage.join(30)
    assert not outage.errors, outage.errors
    # The run was cut in the middle and waited the outage out.
    assert 5 <= outage.progress_at_stop < REQUESTS and log.store_errors >= 1
    assert finished >= outage.ended
    assert finished - outage.ended < 5, "the client was slow to notice Redis was back"
    figures = verify_run(server.url, store.url, key_prefix, "o", workload, [log])
    print(f"Redis down {seconds:g} s: {figures}, statuses {dict(log.statuses)}")
    assert figures.acked == REQUESTS and figures.lost == 0


def test_redis_stopped_during_a_run_the_websocket_producer_resumes_by_itself(
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
) -> None:
    store = redis_server_factory()
    server = processes.server(store.url, key_prefix).start()
    workload = instance_workload(501, "ofs", frames=400)
    create_stream(server.url, workload, "w")
    # Paced (at least 2 s for the 400 frames) so Redis stops with most of them unsent.
    producer = FrameProducer("w", "p", workload.frames, lambda: server, interval=0.005)
    outage = Outage(store, lambda: producer.log.last_ack, after=50, seconds=2.0)
    outage.start()
    producer.start()
    producer.join(60)
    outage.join(30)
    log = producer.log
    assert not outage.errors and not log.failures, (outage.errors, log.failures)
    assert log.last_ack == log.total
    # Each connection refused while Redis was down said why, then closed with 1013.
    assert log.close_codes[CLOSE_TRY_AGAIN_LATER] >= 1
    assert log.store_errors >= log.close_codes[CLOSE_TRY_AGAIN_LATER]
    figures = verify_run(server.url, store.url, key_prefix, "w", workload, [log])
    print(f"Redis down 2 s under a WebSocket producer: {figures}")
    assert figures.lost == 0


def _client_package() -> Any:
    fc = pytest.importorskip(
        "featurestream_client", reason="the Python client package is not installed"
    )
    if not hasattr(fc, "RetryPolicy"):
        pytest.skip("featurestream_client has no RetryPolicy yet")
    return fc


@pytest.mark.parametrize("seconds", [2.0, pytest.param(10.0, id="10s")])
def test_redis_stopped_during_a_run_the_client_package_retries_through_it(
    seconds: float,
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
) -> None:
    fc = _client_package()
    store = redis_server_factory()
    server = processes.server(store.url, key_prefix).start()
    workload = feature_workload(502, requests=REQUESTS)
    create_stream(server.url, workload, "c")
    results: list[Any] = []
    outage = Outage(store, lambda: len(results), after=5, seconds=seconds)
    outage.start()
    policy = fc.RetryPolicy(attempts=1000, backoff=0.05, max_backoff=0.25, max_retry_after=0.25)
    with fc.Client(server.url, retry=policy, timeout=30) as client:
        stream = client.stream("c", producer="p", next_seq=1)
        for request in workload.requests["p"]:
            # One call per request: one seq each, retried by the client on 503.
            results.append(stream.add_features(request.X.T, names=list(request.names)))
    outage.join(30)
    assert not outage.errors, outage.errors
    stored = read_stored(store.url, key_prefix, "c")
    assert [r.seqs for r in results] == [(k,) for k in range(1, REQUESTS + 1)]
    logged = {b.seq: b for b in stored.batches}
    for k, (r, request) in enumerate(zip(results, workload.requests["p"], strict=True), 1):
        assert logged[k].version == r.version and logged[k].names == request.names
    assert [b.seq for b in stored.batches] == list(range(1, REQUESTS + 1))
    assert stored.blob == workload.uninterrupted()
    assert stored.version == REQUESTS
    # The outage fell inside the run: the client was answered 503 and tried again.
    assert 5 <= outage.progress_at_stop < REQUESTS
    assert _answered(server.url, "/v1/streams/{stream_id}/features", 503) >= 1


def _answered(base_url: str, route: str, status: int) -> int:
    """How many requests to ``route`` the server answered with ``status`` (/metrics)."""
    needle = f'featurestream_http_requests_total{{route="{route}",method="POST",status="{status}"}}'
    for line in httpx.get(base_url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(needle):
            return int(float(line.split()[-1]))
    return 0


def test_redis_stopped_during_a_run_the_client_package_streams_through_it(
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
) -> None:
    fc = _client_package()
    store = redis_server_factory()
    server = processes.server(store.url, key_prefix).start()
    workload = instance_workload(503, "ofs", frames=400)
    create_stream(server.url, workload, "cw")
    frames = workload.frames
    rows = frames[0].shape[0]
    seen = Counter[str]()

    def batches() -> Any:
        for frame in frames:
            seen["frames"] += 1
            yield frame[:, :-1], frame[:, -1]

    outage = Outage(store, lambda: seen["frames"], after=100, seconds=2.0)
    outage.start()
    policy = fc.RetryPolicy(attempts=1000, backoff=0.05, max_backoff=0.25, max_retry_after=0.25)
    try:
        with fc.Client(server.url, retry=policy, timeout=30) as client:
            stream = client.stream("cw", producer="p", next_seq=1)
            result = stream.stream_instances(batches(), batch_size=rows)
    except fc.StoreUnavailable as exc:
        raise AssertionError(f"stream_instances gave up during the outage: {exc!r}") from exc
    finally:
        outage.join(30)
    assert not outage.errors, outage.errors
    assert result.instances_seen == len(frames) * rows
    stored = read_stored(store.url, key_prefix, "cw")
    assert [b.seq for b in stored.batches] == list(range(1, len(frames) + 1))
    assert stored.blob == workload.uninterrupted()
