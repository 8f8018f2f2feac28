"""Schema-driven fuzzing of every HTTP operation in the OpenAPI schema.

A real server process (memory store) is fuzzed with schemathesis within a
bounded budget: no response may be a 5xx, and every 4xx must be a valid
RFC 9457 problem document. Half the generated requests are pointed at streams
that exist (one per stream kind), so the operations are exercised past 404.
"""

from __future__ import annotations

import io
import random
from collections import Counter, defaultdict
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.service.test_processes import Server

pytestmark = pytest.mark.slow

EXAMPLES_PER_OPERATION = 30
# Status codes seen per operation: the coverage figure reported by the last test.
OUTCOMES: defaultdict[str, Counter[int]] = defaultdict(Counter)
STREAMS = {"fz-features": "saola", "fz-instances": "ofs", "fz-groups": "group_saola"}


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


# Binary bodies: arbitrary bytes, or real .npy arrays of awkward shapes and values.
_npy_bodies = st.one_of(
    st.binary(max_size=256),
    st.builds(
        lambda shape, fill: _npy(np.full(shape, fill)),
        st.sampled_from([(0,), (8,), (8, 1), (8, 3), (7, 2), (2, 2, 2)]),
        st.sampled_from([0.0, 1.5, np.nan, np.inf, -1e308]),
    ),
)
schemathesis.openapi.media_type("application/x-npy", _npy_bodies)
schemathesis.openapi.media_type("application/x-npz", st.binary(max_size=256))


def ensure_streams(url: str) -> None:
    """(Re)create the known streams: a fuzzed DELETE may have removed one."""
    y = [0.0, 1, 0, 1, 1, 0, 1, 0]
    with httpx.Client(base_url=url) as c:
        for sid, algorithm in STREAMS.items():
            body: dict[str, object] = {"id": sid, "algorithm": algorithm}
            if algorithm == "ofs":
                body |= {"params": {"num_features": 2}, "feature_names": ["a", "b", "c"]}
            else:
                body["target"] = y
            assert c.post("/v1/streams", json=body).status_code in (201, 409)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server("memory://").start()
    ensure_streams(s.url)
    yield s
    s.kill()


@pytest.fixture(scope="module")
def api_schema(server: Server) -> schemathesis.schemas.BaseSchema:
    return schemathesis.openapi.from_url(server.url + "/openapi.json")


def check(case: schemathesis.Case, server: Server) -> None:
    rng = random.Random(case.id)
    if "stream_id" in (case.path_parameters or {}) and rng.random() < 0.5:
        case.path_parameters["stream_id"] = rng.choice(list(STREAMS))
        ensure_streams(server.url)
    response = case.call(base_url=server.url, timeout=30)
    OUTCOMES[f"{case.method} {case.path}"][response.status_code] += 1
    assert response.status_code < 500, (case.as_curl_command(), response.text)
    if response.status_code >= 400:
        ctype = response.headers.get("content-type", [""])
        ctype = ctype[0] if isinstance(ctype, list) else ctype
        assert ctype.startswith("application/problem+json"), (case.as_curl_command(), ctype)
        problem = response.json()
        assert problem["status"] == response.status_code
        assert isinstance(problem["type"], str) and problem["type"]
        assert isinstance(problem["title"], str) and isinstance(problem["detail"], str)


def test_no_5xx_and_every_4xx_is_a_problem(
    api_schema: schemathesis.schemas.BaseSchema, server: Server
) -> None:
    # Hypothesis drives each operation's strategy directly (no pytest plugin of the
    # fuzzer involved), EXAMPLES_PER_OPERATION cases each, reproducibly.
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        @given(case=operation.as_strategy())
        def run(case: schemathesis.Case) -> None:
            check(case, server)

        run()


def test_fuzzing_reached_every_operation(api_schema: schemathesis.schemas.BaseSchema) -> None:
    """Runs after the fuzz test (file order): every operation was called, and reported."""
    operations = {
        f"{op.ok().method.upper()} {op.ok().path}" for op in api_schema.get_all_operations()
    }
    for name in sorted(OUTCOMES):
        print(f"fuzz {name}: {dict(sorted(OUTCOMES[name].items()))}")
    assert operations <= set(OUTCOMES), operations - set(OUTCOMES)
