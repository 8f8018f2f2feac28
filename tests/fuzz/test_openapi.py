"""Schema-driven fuzzing of every HTTP operation in the OpenAPI schema.

A real server process (memory store) is fuzzed with schemathesis within a
bounded budget: no response may be a 5xx, every 4xx must be a valid RFC 9457
problem document, and every response must be one the schema documents (its
status, media type, headers and body: schemathesis's conformance checks). A
request the schema allows must not be refused (422, 400, 415), unless for a
reason a JSON schema cannot state (``DATA_REFUSALS``). Half the generated
requests are pointed at streams that exist (one per stream kind), so the
operations are exercised past 404.
"""

from __future__ import annotations

import io
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import checks
from schemathesis.core.failures import Failure, FailureGroup

from tests.service.test_processes import Server

pytestmark = pytest.mark.slow

EXAMPLES_PER_OPERATION = 40
# Status codes seen per operation: the coverage figure reported by the last test.
OUTCOMES: defaultdict[str, Counter[int]] = defaultdict(Counter)
# Conformance failures by (kind, operation, status): the curl commands that show them.
FAILURES: defaultdict[tuple[str, str, int], list[str]] = defaultdict(list)
CONFORMANCE = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
]
# A schema-valid request refused for what a JSON schema cannot state: the data against
# the stream (its instances, classes, the algorithm's parameters) or one field against
# another (a header and the body). Operation -> (field, message) patterns; a refusal is
# allowed when each of its errors matches one. Binary bodies: the schema says only
# "binary", so their refusals are not checked.
DATA_REFUSALS: dict[str, list[tuple[str, str]]] = {
    "POST /v1/streams": [(r"^(params|target|feature_names|target_type)\b", "")],
    "POST /v1/streams/{stream_id}/features": [
        (r"^X-(Producer|Seq)$", "differs from the body"),
        (r"^features\[\d+\]", "same length|instances|rows|duplicate|already"),
    ],
    "POST /v1/streams/{stream_id}/groups": [
        (r"^X-(Producer|Seq)$", "differs from the body"),
        (r"^groups", "same length|instances|rows|duplicate|already|inside group"),
    ],
    "POST /v1/streams/{stream_id}/instances": [
        (r"^X-(Producer|Seq)$", "differs from the body"),
        (r"^(X|y)\b", "same length|values|labels|rows|one per row|class|instance"),
    ],
    "GET /v1/streams/{stream_id}/evaluation": [(r"^y$", "cross-validation needs")],
}
REFUSED = (400, 415, 422)
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
    operation = f"{case.method} {case.path}"
    OUTCOMES[operation][response.status_code] += 1
    assert response.status_code < 500, (case.as_curl_command(), response.text)
    try:
        case.validate_response(response, checks=CONFORMANCE)
    except (FailureGroup, Failure) as exc:
        for failure in exc.exceptions if isinstance(exc, FailureGroup) else [exc]:
            key = (type(failure).__name__, operation, response.status_code)
            FAILURES[key].append(case.as_curl_command())
    if response.status_code in REFUSED and not refused_for_data(case, response.json()):
        FAILURES[("RejectedPositiveData", operation, response.status_code)].append(
            f"{case.as_curl_command()}\n  -> {response.text[:300]}"
        )
    if response.status_code >= 400:
        ctype = response.headers.get("content-type", [""])
        ctype = ctype[0] if isinstance(ctype, list) else ctype
        assert ctype.startswith("application/problem+json"), (case.as_curl_command(), ctype)
        problem = response.json()
        assert problem["status"] == response.status_code
        assert isinstance(problem["type"], str) and problem["type"]
        assert isinstance(problem["title"], str) and isinstance(problem["detail"], str)


def refused_for_data(case: schemathesis.Case, problem: dict[str, object]) -> bool:
    """Whether a refusal of this (schema-valid) case is one the schema cannot state."""
    if case.media_type not in (None, "application/json"):
        return True
    allowed = DATA_REFUSALS.get(f"{case.method} {case.path}", [])
    errors = problem.get("errors")
    if not isinstance(errors, list) or not errors:
        return False
    return all(
        any(
            re.search(f, str(e.get("field", ""))) and re.search(m, str(e.get("message", "")))
            for f, m in allowed
        )
        for e in errors
    )


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


def test_allow_lists_the_documented_methods(
    api_schema: schemathesis.schemas.BaseSchema, server: Server
) -> None:
    """405 names, in Allow, every method the schema documents at the path (RFC 9110)."""
    paths = api_schema.raw_schema["paths"]
    with httpx.Client(base_url=server.url) as c:
        for path, operations in paths.items():
            url = path.replace("{stream_id}", "fz-features")
            answer = c.request("OPTIONS", url)
            assert answer.status_code == 405, (path, answer.status_code)
            allow = {m.strip().lower() for m in answer.headers["allow"].split(",")}
            assert allow - {"head"} == set(operations), (path, answer.headers["allow"])


def test_a_whole_float_is_an_integer(server: Server) -> None:
    """The schema's integers (JSON Schema 2020-12) include 2.0: a seq or row index so written."""
    body = {"seq": 1.0, "features": [{"name": "w", "indices": [1.0, 3], "data": [1.0, 2.0]}]}
    with httpx.Client(base_url=server.url) as c:
        assert (
            c.post(
                "/v1/streams", json={"id": "fz-whole", "algorithm": "saola", "target": [0, 1, 0, 1]}
            ).status_code
            == 201
        )
        answer = c.post("/v1/streams/fz-whole/features", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["seq"] == 1
        refused = c.post("/v1/streams/fz-whole/features", json=body | {"seq": 2.5})
        assert refused.status_code == 422, refused.text


def test_every_response_conforms_to_the_schema() -> None:
    """Runs after the fuzz test (file order): no conformance failure was collected."""
    report = [
        f"{kind} {operation} {status}: {len(cases)} cases, e.g. {cases[0]}"
        for (kind, operation, status), cases in sorted(FAILURES.items())
    ]
    assert not report, "\n".join(report)


def test_fuzzing_reached_every_operation(api_schema: schemathesis.schemas.BaseSchema) -> None:
    """Runs after the fuzz test (file order): every operation was called, and reported."""
    operations = {
        f"{op.ok().method.upper()} {op.ok().path}" for op in api_schema.get_all_operations()
    }
    for name in sorted(OUTCOMES):
        print(f"fuzz {name}: {dict(sorted(OUTCOMES[name].items()))}")
    assert operations <= set(OUTCOMES), operations - set(OUTCOMES)
