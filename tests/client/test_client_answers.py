"""A chunked write keeps the server busy: each next body is encoded, and each large
answer parsed, beside the request that is out (in threads of the SDK's own). The
result is the one a single request gives, and a failure part way still carries what
the chunks before it did."""

from __future__ import annotations

import threading

import httpx
import numpy as np
import orjson
import pytest
import scipy.sparse as sp

from featurestream_client import Client, _core, _data, _pipeline, _writes
from featurestream_client.errors import InvalidInput
from tests.client.live import LiveServer

N, B, CHUNK = 40, 9_000, 3_000  # answers of 3,000 decisions: over BACKGROUND_BYTES


@pytest.fixture
def parsed_in(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads that parsed each features answer, in order."""
    threads: list[str] = []
    parse = _writes._features_result

    def spy(reply: _core.Reply) -> object:
        threads.append(threading.current_thread().name)
        return parse(reply)

    monkeypatch.setattr(_writes, "_features_result", spy)
    return threads


@pytest.fixture
def encoded_in(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The thread that encoded each features body, and its seq, in order."""
    threads: list[tuple[str, int]] = []
    encode = _data.features_body

    def spy(cols: _data.Columns, chunk: _data.Chunk, producer: str, seq: int) -> _data.Body:
        threads.append((threading.current_thread().name, seq))
        return encode(cols, chunk, producer, seq)

    monkeypatch.setattr(_data, "features_body", spy)
    return threads


def _dataset() -> tuple[sp.csc_matrix, np.ndarray, list[str]]:
    """Sparse columns: one request per chunk of columns (.npz, the names inside)."""
    rng = np.random.default_rng(11)
    y = rng.normal(size=N)
    X = rng.normal(size=(N, B))
    X[:, [10, 4_000, 8_500]] += 3 * y[:, None]
    X[rng.random(size=X.shape) < 0.5] = 0.0
    return sp.csc_matrix(X), y, [f"feature-{i:05d}" for i in range(B)]


def test_chunked_answers_parsed_aside_equal_one_answer(
    client: Client, parsed_in: list[str], encoded_in: list[tuple[str, int]]
) -> None:
    X, y, names = _dataset()
    chunked = client.create_stream("saola", target=y)
    result = chunked.add_features(X, names, chunk_columns=CHUNK)
    assert len(parsed_in) == 3
    assert all(t.startswith("featurestream-answers") for t in parsed_in), parsed_in
    # The first body at once, the two others while the request before them was out.
    main = threading.current_thread().name
    assert [seq for _, seq in encoded_in] == [1, 2, 3]
    assert encoded_in[0][0] == main
    assert all(t.startswith("featurestream-bodies") for t, _ in encoded_in[1:]), encoded_in
    whole = client.create_stream("saola", target=y)
    one = whole.add_features(X, names, chunk_columns=B)
    assert parsed_in[3] == threading.current_thread().name  # one answer: parsed at once
    assert result.seqs == (1, 2, 3) and one.seqs == (1,)
    assert len(result.decisions) == B
    assert list(result.decisions) == list(one.decisions)
    assert list(result.selected) == list(one.selected) == whole.selected().names
    assert result.version == 3 and result.warnings == one.warnings


def test_a_failing_chunk_carries_the_answers_parsed_before_it(client: Client) -> None:
    X, y, names = _dataset()
    s = client.create_stream("saola", target=y)
    s.add_features(X[:, :1], ["taken"])
    # The third request names a feature the stream has: refused, the first two applied.
    with pytest.raises(InvalidInput, match="already in the stream") as exc:
        s.add_features(X[:, 1:], [*names[1 : B - 1], "taken"], chunk_columns=CHUNK)
    partial = exc.value.partial
    assert partial.seqs == (2, 3) and len(partial.decisions) == 2 * CHUNK
    reference = client.create_stream("saola", target=y)
    reference.add_features(X[:, :1], ["taken"])
    done = reference.add_features(X[:, 1 : 2 * CHUNK + 1], names[1 : 2 * CHUNK + 1])
    assert list(partial.decisions) == list(done.decisions)
    assert partial.selected == done.selected and s.refresh().version == 3


class _Truncating(httpx.BaseTransport):
    """Cuts the body of the first features answer short (a broken proxy, say)."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.features_posts = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "POST" and request.url.path.endswith("/features"):
            self.features_posts += 1
            if self.features_posts == 1:
                body = response.read()[:-100]
                return httpx.Response(response.status_code, headers=response.headers, content=body)
        return response

    def close(self) -> None:
        self.inner.close()


def test_an_answer_that_does_not_parse_stops_the_requests_after_it(live: LiveServer) -> None:
    X, y, names = _dataset()
    transport = _Truncating()
    with Client(live.url, transport=transport) as c:
        s = c.create_stream("saola", target=y)
        with pytest.raises(orjson.JSONDecodeError):
            s.add_features(X, names, chunk_columns=CHUNK)  # three requests
        # Parsed beside the second request: the third is not sent.
        assert transport.features_posts == 2
        assert s.refresh().version == 2


def test_each_answer_is_waited_for_once_however_many_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before each request the answers before it are checked: once each, not all of them
    again every time (a call of thousands of small requests stayed quadratic)."""
    waits = [0]
    result = _pipeline.Parsed.result

    def counted(self: _pipeline.Parsed[object]) -> object:
        waits[0] += 1
        return result(self)

    monkeypatch.setattr(_pipeline.Parsed, "result", counted)
    n = 2_000
    with _pipeline.Answers(lambda r: r.content, background=True) as answers:
        for i in range(n):
            answers.raise_failed()
            answers.add(_core.Reply(200, {}, str(i).encode()))
        assert waits[0] == n - 2  # every answer but the last, once
        assert answers.results() == [str(i).encode() for i in range(n)]
