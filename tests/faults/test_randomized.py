"""The acceptance figure: the fault-injection scenario passes 20 randomised runs in a row.

Seeds 0..19, one after the other on one Redis (AOF, ``appendfsync always``)
and one server slot. Each seed picks its stream (SAOLA over HTTP, OFS or FSDS
over the WebSocket, in turn) and one or two faults: a SIGKILL of the server
(replaced by a fresh process on the same Redis) or of Redis (restarted on its
AOF after a short outage), each a few tens of milliseconds after the
producer's last progress. Every run must end with the state of an
uninterrupted run, each seq applied once, and no acknowledged update lost.

The figures (runs, kills, requests, acknowledged updates, lost) are printed
(visible with ``-s``) and asserted. ``FAULTS_SEEDS=7`` (or ``3,5`` or ``0-4``)
runs chosen seeds only.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import RedisServer
from tests.faults.harness import (
    Figures,
    Processes,
    Scenario,
    Service,
    run_scenario,
    seed_note,
    seeds_from_env,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

RUNS = 20


def test_twenty_randomised_runs_in_a_row_lose_nothing(
    processes: Processes,
    redis_server_factory: Callable[..., RedisServer],
    key_prefix: str,
    request: pytest.FixtureRequest,
) -> None:
    seeds = seeds_from_env(range(RUNS))
    store = redis_server_factory()
    service = Service(processes, store.url, key_prefix, warm=True)
    total = Figures()
    for seed in seeds:
        scenario = Scenario.draw(seed)
        rerun = (
            f"FAULTS_SEEDS={seed} python -m pytest -p no:cacheprovider -s '{request.node.nodeid}'"
        )
        with seed_note(seed, rerun, processes.servers):
            figures = run_scenario(scenario, service=service, store=store, stream_id=f"run-{seed}")
        print(f"[faults] {scenario}: {figures}")
        total += figures
    print(f"[faults] total: {total}")
    assert total.runs == len(seeds)
    assert total.lost == 0
    assert total.acked > 0 and total.requests >= total.acked
    # Faults land mid-stream: at least one per run, and both kinds across the runs.
    assert total.kills >= total.runs
    if len(seeds) == RUNS:
        assert total.server_kills > 0 and total.redis_kills > 0
