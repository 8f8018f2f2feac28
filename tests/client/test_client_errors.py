"""Typed exceptions from the server's problem documents, seq numbering, and safe retries."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

import featurestream_client as fc
from featurestream.api import create_app
from featurestream.config import Settings
from featurestream_client import Client, RetryPolicy
from featurestream_client.errors import BY_TYPE, error_from_problem
from tests import support
from tests.client.live import LiveServer, LoseResponses

NAMES = support.names(30)
FAST = RetryPolicy(attempts=4, backoff=0.01, max_backoff=0.05, max_retry_after=0.05)


def features_posts(request: httpx.Request) -> bool:
    return request.method == "POST" and request.url.path.endswith("/features")


# ---------------------------------------------------------------- problems -> exceptions


def test_server_problems_become_typed_exceptions(client: Client, sid: str) -> None:
    y = np.arange(8.0)
    with pytest.raises(fc.InvalidParameter) as bad_param:
        client.create_stream("saola", target=y, params={"alpha": 1.5})
    e = bad_param.value
    assert e.status == 422 and e.type is not None and e.type.endswith("/invalid-parameter")
    assert e.errors[0]["field"] == "params.alpha" and isinstance(e, ValueError)

    with pytest.raises(fc.InvalidInput) as unknown:
        client.create_stream("no-such-algorithm", target=y)
    assert unknown.value.status == 422 and unknown.value.errors[0]["field"] == "algorithm"

    client.create_stream("saola", target=y, id=sid)
    with pytest.raises(fc.StreamExists) as exists:
        client.create_stream("saola", target=y, id=sid)
    assert exists.value.status == 409 and exists.value.problem["stream_id"] == sid

    with pytest.raises(fc.StreamNotFound) as missing:
        client.stream("nothing-" + sid).selected()
    assert missing.value.status == 404 and isinstance(missing.value, LookupError)

    # A handle that has not read the stream sends the request; the server refuses it.
    handle = client.stream(sid)
    with pytest.raises(fc.InvalidInput) as length:
        handle.add_features(np.ones((5, 1)), names=["short"])
    assert length.value.status == 422 and handle.next_seq == 1  # refused whole: seq kept
    with pytest.raises(fc.WrongStreamKind) as kind:
        handle.add_instances(np.ones((2, 3)))
    assert kind.value.status == 409 and kind.value.kind == "features"
    assert isinstance(kind.value, TypeError)
    assert client.stream(sid).selected().version == 0


def test_a_gap_in_seq_is_a_sequence_conflict_naming_the_next_seq(client: Client) -> None:
    s = client.create_stream("saola", target=np.arange(8.0))
    late = client.stream(s.id, producer="loader", next_seq=5)
    with pytest.raises(fc.SequenceConflict) as exc:
        late.add_features(np.arange(8.0)[:, None], names=["a"])
    assert exc.value.status == 409 and exc.value.expected_seq == 1
    assert exc.value.producer == "loader"
    # The handle learns the next seq from the server and goes on.
    assert late.next_seq is None
    result = late.add_features(np.arange(8.0)[:, None], names=["a"])
    assert result.seqs == (1,) and late.next_seq == 2


def test_payload_too_large_through_an_in_process_app() -> None:
    app = create_app(Settings(store_url="memory://", max_request_bytes=4096))
    with TestClient(app) as http, Client(http_client=http) as c:
        s = c.create_stream("saola", target=np.arange(100.0))
        with pytest.raises(fc.PayloadTooLarge) as exc:
            s.add_features(np.random.default_rng(0).normal(size=(100, 10)))
        assert exc.value.status == 413 and exc.value.limit_bytes == 4096
        # Smaller requests pass.
        result = s.add_features(np.random.default_rng(0).normal(size=(100, 10)), chunk_bytes=2000)
        assert len(result.seqs) == 5  # two 800-byte columns per request


@pytest.mark.parametrize(("suffix", "cls"), sorted(BY_TYPE.items()))
def test_every_problem_type_maps_to_its_class(suffix: str, cls: type) -> None:
    status = {"stream-not-found": 404, "store-unavailable": 503}.get(suffix, 409)
    problem = {"type": f"/problems/{suffix}", "title": "t", "status": status, "detail": "d"}
    err = error_from_problem(status, problem | {"expected_seq": 3, "limit_bytes": 10})
    assert type(err) is cls and err.status == status and err.detail == "d"
    assert err.limit_bytes == 10 and err.problem["expected_seq"] == 3


def test_unknown_problems_fall_back_on_the_status() -> None:
    assert type(error_from_problem(500, {"type": "/problems/internal-error"})) is fc.ServerError
    assert type(error_from_problem(401, {"type": "about:blank"})) is fc.Unauthorized
    assert type(error_from_problem(418, {})) is fc.FeatureStreamError


# ---------------------------------------------------------------- numbering


def test_each_handle_numbers_its_own_requests(
    client: Client, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    a = client.create_stream("saola", target=y)
    b = client.stream(a.id)
    assert a.producer != b.producer and a.next_seq == b.next_seq == 1
    a.add_features(X[:, :10], names=NAMES[:10], chunk_columns=5)
    b.add_features(X[:, 10:20], names=NAMES[10:20])
    a.add_features(X[:, 20:], names=NAMES[20:])
    assert (a.next_seq, b.next_seq) == (4, 2)
    batches = [e for e in a.iter_events() if e.type == "batch"]
    assert [(e.producer, e.seq) for e in batches] == [
        (a.producer, 1),
        (a.producer, 2),
        (b.producer, 1),
        (a.producer, 3),
    ]


def test_a_named_producer_resumes_at_its_next_seq(client: Client) -> None:
    y = np.arange(12.0)
    first = client.create_stream("saola", target=y, producer="etl")
    for i in range(3):
        first.add_features(np.column_stack([y * (i + 1) + i]), names=[f"c{i}"])
    assert first.next_seq == 4
    # A new process with the same producer name: it asks the server (nothing applied).
    later = client.stream(first.id, producer="etl")
    assert later.next_seq is None
    version = later.selected().version
    result = later.add_features(np.column_stack([-y]), names=["c3"])
    assert result.seqs == (4,) and result.version == version + 1


def test_a_reused_seq_is_detected_not_silently_replayed(client: Client) -> None:
    y = np.arange(10.0)
    # A measurement: auto would read 10 distinct integers as 10 classes.
    s = client.create_stream("saola", target=y, producer="etl", target_type="continuous")
    s.add_features(np.column_stack([y]), names=["a"])
    stale = client.stream(s.id, producer="etl", next_seq=1)
    with pytest.raises(fc.SequenceConflict):
        stale.add_features(np.column_stack([y**2]), names=["b"])
    assert [f.name for f in s.selected().features] == ["a"] and s.selected().version == 1
    assert stale.add_features(np.column_stack([y**2]), names=["b"]).seqs == (2,)


# ---------------------------------------------------------------- lost answers


def test_a_lost_answer_is_retried_with_the_same_seq_and_applied_once(
    live: LiveServer, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    counter = itertools.count()
    # Lose the answer of the 1st and the 3rd /features request the client sends.
    transport = LoseResponses(lambda r: features_posts(r) and next(counter) in (0, 2))
    with Client(live.url, transport=transport, retry=FAST) as c, Client(live.url) as plain:
        s = c.create_stream("saola", target=y)
        result = s.add_features(X, names=NAMES, chunk_columns=10)
        reference = plain.create_stream("saola", target=y).add_features(X, names=NAMES)
        assert len(transport.lost) == 2
        sent = [r for r in transport.sent if features_posts(r)]
        assert [r.headers["x-seq"] for r in sent] == ["1", "1", "2", "2", "3"]
        assert result.decisions == reference.decisions and result.selected == reference.selected
        assert result.seqs == (1, 2, 3) and result.version == 3 and result.replayed
        batches = [e for e in s.iter_events() if e.type == "batch"]
        assert [e.seq for e in batches] == [1, 2, 3] and s.status()["features_seen"] == 30


def test_after_an_unknown_outcome_another_write_goes_after_it(
    live: LiveServer, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    lose_next = [True]

    def lose(request: httpx.Request) -> bool:
        if features_posts(request) and lose_next[0]:
            lose_next[0] = False
            return True
        return False

    transport = LoseResponses(lose)
    with Client(live.url, transport=transport, retry=RetryPolicy.never()) as c:
        s = c.create_stream("saola", target=y)
        with pytest.raises(fc.ConnectionFailed) as exc:
            s.add_features(X[:, :15], names=NAMES[:15])
        assert exc.value.partial.decisions == ()
        assert exc.value.outcome_unknown and "Retrying the same write is safe" in str(exc.value)
        assert s.next_seq == 1  # applied or not: the seq stays with the write
        result = s.add_features(X[:, 15:], names=NAMES[15:])
        # The lost request had been applied (seq 1 holds it): this other write is seq 2,
        # applied once.
        assert result.seqs == (2,) and result.version == 2
        assert list(result.selected) == ["f21", "f27"]
        assert s.status()["features_seen"] == 30


def test_a_lost_create_is_retried_safely(live: LiveServer) -> None:
    lost = [False]

    def lose(request: httpx.Request) -> bool:
        if request.method == "POST" and request.url.path == "/v1/streams" and not lost[0]:
            lost[0] = True
            return True
        return False

    with Client(live.url, transport=LoseResponses(lose), retry=FAST) as c:
        s = c.create_stream("saola", target=np.arange(6.0))
        assert lost[0] and s.info is not None and s.info.version == 0
        s.delete()
        with pytest.raises(fc.StreamNotFound):
            s.status()


# ---------------------------------------------------------------- retry policy


class Flaky(httpx.BaseTransport):
    """Answers the first ``n`` requests with a canned problem, then passes through."""

    def __init__(self, inner: httpx.BaseTransport, n: int, status: int, suffix: str) -> None:
        self.inner, self.n, self.status, self.suffix = inner, n, status, suffix
        self.calls = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.calls <= self.n:
            body = {"type": f"/problems/{self.suffix}", "title": "x", "status": self.status}
            return httpx.Response(
                self.status, json=body | {"detail": "try later"}, headers={"Retry-After": "0"}
            )
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize(
    ("status", "suffix"), [(503, "store-unavailable"), (409, "concurrent-update")]
)
def test_retryable_answers_are_retried(live: LiveServer, status: int, suffix: str) -> None:
    flaky = Flaky(httpx.HTTPTransport(), 2, status, suffix)
    with Client(live.url, transport=flaky, retry=FAST) as c:
        assert [a.name for a in c.algorithms()]
        assert flaky.calls == 3
    flaky = Flaky(httpx.HTTPTransport(), 5, status, suffix)
    with (
        Client(live.url, transport=flaky, retry=FAST) as c,
        pytest.raises(fc.FeatureStreamError) as exc,
    ):
        c.algorithms()
    assert exc.value.status == status and exc.value.retryable and exc.value.attempts == 4


def test_other_answers_are_not_retried(live: LiveServer) -> None:
    flaky = Flaky(httpx.HTTPTransport(), 5, 409, "sequence-conflict")
    with Client(live.url, transport=flaky, retry=FAST) as c, pytest.raises(fc.SequenceConflict):
        c.algorithms()
    assert flaky.calls == 1


def test_retry_after_is_honoured_and_capped() -> None:
    policy = RetryPolicy(backoff=0.5, max_backoff=1.0, max_retry_after=2.0)
    assert policy.delay(1, 1.5) == 1.5 and policy.delay(1, 60.0) == 2.0
    assert all(0.25 <= policy.delay(1) <= 0.5 for _ in range(20))
    assert all(0.5 <= policy.delay(10) <= 1.0 for _ in range(20))
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)


def test_an_unreachable_server_is_a_connection_failure() -> None:
    from tests.conftest import free_port

    with Client(f"http://127.0.0.1:{free_port()}", retry=FAST) as c:
        with pytest.raises(fc.ConnectionFailed) as exc:
            c.streams()
        assert exc.value.attempts == 4
        assert not c.health()


@pytest.fixture
def redis_backed(redis_server_factory: object) -> Iterator[tuple[object, LiveServer]]:
    redis = redis_server_factory()  # type: ignore[operator]
    server = LiveServer(Settings(store_url=redis.url, redis_socket_timeout=1.0)).start()
    yield redis, server
    server.stop()


@pytest.mark.redis
def test_store_outage_is_retried_then_raised_and_nothing_is_applied_twice(
    redis_backed: tuple[object, LiveServer], wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    redis, server = redis_backed
    X, y = wdbc_rows
    with Client(server.url, retry=FAST) as c:
        s = c.create_stream("saola", target=y)
        s.add_features(X[:, :10], names=NAMES[:10])
        redis.kill()  # type: ignore[attr-defined]
        with pytest.raises(fc.StoreUnavailable) as exc:
            s.add_features(X[:, 10:20], names=NAMES[10:20])
        assert exc.value.status == 503 and exc.value.attempts == 4
        assert exc.value.outcome_unknown and "seq 2" in str(exc.value)
        redis.start()  # type: ignore[attr-defined]
        # The outcome of the refused write is unknown to the client: sent again, it keeps
        # its seq, and is applied at most once.
        assert s.next_seq == 2
        assert s.add_features(X[:, 10:20], names=NAMES[10:20]).seqs == (2,)
        result = s.add_features(X[:, 20:], names=NAMES[20:])
        assert list(result.selected) == ["f21", "f27"]
        assert s.status()["features_seen"] == 30
        assert [e.seq for e in s.iter_events() if e.type == "batch"] == [1, 2, 3]
