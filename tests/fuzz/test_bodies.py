"""The short run of the body fuzzer (``tests/fuzz/bodies.py``) against a live server on Redis.

A fixed set of cases (hypothesis, derandomized: the same cases every run) of
mutated .npy, .npz and JSON bodies and WebSocket frames. The oracle is
strict: no crash, no 5xx (nor close code 1011/1013), no hang, ``/healthz``
always within a second. A failure names the issue point it is already known
as, or says NEW; the inputs are saved under the test's temporary directory.
The long run is ``python -m tests.fuzz.bodies --minutes 10``
(docs/operations.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given

from tests.fuzz.bodies import (
    Case,
    D,
    Fuzzer,
    LiveTarget,
    cases,
    fuzz_settings,
    live_target,
    npy_bytes,
    npy_of,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

SHORT_CASES = 600


@pytest.fixture
def target(redis_url: str, tmp_path: Path) -> Iterator[LiveTarget]:
    with live_target(redis_url, tmp_path) as t:
        yield t


def test_mutated_bodies_and_frames_never_crash_5xx_hang_or_stall(
    target: LiveTarget, tmp_path: Path
) -> None:
    fuzzer = Fuzzer(target, tmp_path / "failures")

    @fuzz_settings(SHORT_CASES, derandomize=True)
    @given(cases())
    def run(case: Case) -> None:
        fuzzer(case)

    run()
    report = fuzzer.report
    assert report.cases == SHORT_CASES
    assert not report.failures, report.summary()


def test_a_frame_whose_npy_header_does_not_parse_is_refused_and_the_socket_lives(
    target: LiveTarget,
) -> None:
    # numpy's header parser raises tokenize.TokenError (not a ValueError) on "{": the
    # frame reader's fast path let it out, and the session ended with 1011.
    broken = Case("ws-instances", "npy", npy_bytes("{", b""))
    outcome = target.run(broken)
    assert (outcome.kind, outcome.status) == ("ok", "ws-error-422"), outcome
    ws = target.sockets["ws-instances"]
    good = np.column_stack([np.ones((2, D)), [0.0, 1.0]])
    ws.send(npy_of(good))
    for _ in range(10):
        message = json.loads(ws.recv(timeout=10))
        if message["type"] != "selection":
            break
    assert message["type"] == "ack", message
