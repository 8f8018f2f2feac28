"""SIGKILL of the server at random moments while a producer writes, then a restart.

One stream per kind: SAOLA fed columns over HTTP with ``seq`` (several per
request, JSON or .npy), OFS and FSDS fed .npy frames over the WebSocket. The
server is killed twice mid-stream (seeded delays) and restarted on the same
port and Redis; the producer retries its unacknowledged seq (HTTP) or resumes
at last ack + 1 (WebSocket). The harness checks the stored stream after each
kill and, at the end, that the state equals an uninterrupted run, that the
event log shows each seq once and in order, and that no ack was lost.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import RedisServer
from tests.faults.harness import (
    CLOSE_DROPPED,
    Processes,
    Scenario,
    Service,
    run_scenario,
    seed_note,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.mark.parametrize(("algorithm", "seed"), [("saola", 100), ("ofs", 101), ("fsds", 102)])
def test_sigkill_during_ingestion_then_resume_equals_an_uninterrupted_run(
    algorithm: str,
    seed: int,
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
    request: pytest.FixtureRequest,
) -> None:
    store = redis_server_factory()  # AOF, appendfsync always
    service = Service(processes, store.url, key_prefix, warm=False)
    scenario = Scenario.draw(seed, algorithms=[algorithm], targets=["server"], faults=(2, 2))
    with seed_note(
        seed, f"python -m pytest -p no:cacheprovider -s '{request.node.nodeid}'", processes.servers
    ):
        figures = run_scenario(scenario, service=service, store=store, stream_id="k")
        print(scenario, figures)
        assert figures.server_kills >= 1, "no kill landed mid-stream"
        assert figures.lost == 0
        if algorithm != "saola":
            # A killed server closes nothing: the client saw its connection drop.
            assert figures.close_codes[CLOSE_DROPPED] >= figures.server_kills
