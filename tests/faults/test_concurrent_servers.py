"""Several server processes writing one stream at once, on one Redis.

Every commit is a compare-and-set: a process that loses the race reloads the
winner's state and applies its request again. Whatever the interleaving, the
stored state must be the serial application of the requests in the order the
event log shows, that order must keep each producer's seq order, and no
request may be applied twice or lost.
"""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from websockets.sync.client import connect

from tests.conftest import RedisServer
from tests.faults.harness import (
    FeatureProducer,
    InstanceWorkload,
    Processes,
    consistency_problems,
    create_stream,
    feature_workload,
    fixed_route,
    instance_workload,
    metric,
    random_route,
    read_stored,
    seed_note,
    verify_run,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.mark.parametrize("count", [2, 4])
def test_processes_hammering_one_stream_equal_the_serial_order_of_the_log(
    count: int,
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
    request: pytest.FixtureRequest,
) -> None:
    seed = 400 + count
    store = redis_server_factory()
    servers = processes.start(count, store.url, key_prefix)
    names = [f"w{i}" for i in range(2 * count)]
    workload = feature_workload(seed, producers=names, requests=12, columns=(1, 4))
    create_stream(servers[0].url, workload, "race")
    # Each producer writes through its own process: two producers per process.
    producers = [
        FeatureProducer("race", name, workload.requests[name], fixed_route(servers[i % count].url))
        for i, name in enumerate(names)
    ]
    with seed_note(
        seed, f"python -m pytest -p no:cacheprovider -s '{request.node.nodeid}'", servers
    ):
        for p in producers:
            p.start()
        for p in producers:
            p.join(120)
        failures = [f for p in producers for f in p.log.failures]
        assert not failures, failures
        figures = verify_run(
            servers[-1].url,
            store.url,
            key_prefix,
            "race",
            workload,
            [p.log for p in producers],
            serial=False,
        )
        stored = read_stored(store.url, key_prefix, "race")
        assert stored.version == len(names) * 12 == figures.acked
        # The requests did interleave (the log is not one producer after another).
        order = [b.producer for b in stored.batches]
        switches = sum(a != b for a, b in itertools.pairwise(order))
        assert switches >= len(names)
        conflicts = sum(metric(s.url, "featurestream_commit_conflicts_total") for s in servers)
        print(
            f"{count} processes, {len(names)} producers: {figures}, commit conflicts {conflicts:g}"
        )


def test_one_producer_whose_requests_land_on_any_process_keeps_its_seq(
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
    request: pytest.FixtureRequest,
) -> None:
    """Behind a load balancer, consecutive requests of one producer reach different replicas."""
    seed = 410
    store = redis_server_factory()
    servers = processes.start(2, store.url, key_prefix)
    workload = feature_workload(seed, producers=("a", "b"), requests=12, columns=(1, 3))
    create_stream(servers[0].url, workload, "lb")
    urls = [s.url for s in servers]
    producers = [
        FeatureProducer(
            "lb",
            name,
            workload.requests[name],
            random_route(urls, np.random.default_rng([seed, i])),
        )
        for i, name in enumerate(("a", "b"))
    ]
    with seed_note(
        seed, f"python -m pytest -p no:cacheprovider -s '{request.node.nodeid}'", servers
    ):
        for p in producers:
            p.start()
        for p in producers:
            p.join(120)
        failures = [f for p in producers for f in p.log.failures]
        assert not failures, failures
        verify_run(
            servers[0].url,
            store.url,
            key_prefix,
            "lb",
            workload,
            [p.log for p in producers],
            serial=False,
        )


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _send_frames(url: str, frames: list[np.ndarray]) -> list[dict[str, Any]]:
    """Send frames on a new connection; the acks, in order."""
    acks: list[dict[str, Any]] = []
    with connect(url, max_size=None, open_timeout=10) as ws:
        for frame in frames:
            ws.send(_npy(frame))
        while len(acks) < len(frames):
            msg = json.loads(ws.recv(timeout=20))
            assert msg["type"] in ("ack", "selection"), msg
            if msg["type"] == "ack":
                acks.append(msg)
    return acks


def test_a_websocket_without_seq_on_another_process_continues_the_producer(
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
) -> None:
    """docs/api.md: frames are numbered from the producer's next expected seq when none is given."""
    store = redis_server_factory()
    a, b = processes.start(2, store.url, key_prefix)
    workload: InstanceWorkload = instance_workload(420, "ofs", frames=9)
    create_stream(a.url, workload, "ws")
    frames = workload.frames
    # Three frames through each process in turn, the producer never naming a seq.
    assert [m["ack"] for m in _send_frames(a.ws_url("ws", producer="p"), frames[0:3])] == [1, 2, 3]
    assert [m["ack"] for m in _send_frames(b.ws_url("ws", producer="p"), frames[3:6])] == [4, 5, 6]
    last = _send_frames(a.ws_url("ws", producer="p"), frames[6:9])
    stored = read_stored(store.url, key_prefix, "ws")
    assert consistency_problems(stored, workload) == []
    assert [m["ack"] for m in last] == [7, 8, 9]
    assert last[-1]["instances_seen"] == 9 * frames[0].shape[0]
    assert [b.seq for b in stored.batches] == list(range(1, 10))
    assert stored.blob == workload.uninterrupted()


def test_a_websocket_producer_fails_over_to_another_process_after_a_kill(
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
) -> None:
    """Replica B dies; the producer resumes at last ack + 1 on replica A, which saw it earlier."""
    store = redis_server_factory()
    a, b = processes.start(2, store.url, key_prefix)
    workload: InstanceWorkload = instance_workload(421, "ofs", frames=12)
    create_stream(a.url, workload, "fo")
    frames = workload.frames
    acks = _send_frames(a.ws_url("fo", producer="p", seq=1), frames[0:2])
    acks += _send_frames(b.ws_url("fo", producer="p", seq=3), frames[2:8])
    assert [m["ack"] for m in acks] == list(range(1, 9))
    b.kill()
    acks += _send_frames(a.ws_url("fo", producer="p", seq=9), frames[8:12])
    assert [m["ack"] for m in acks] == list(range(1, 13))
    stored = read_stored(store.url, key_prefix, "fo")
    assert consistency_problems(stored, workload) == []
    assert stored.blob == workload.uninterrupted()
