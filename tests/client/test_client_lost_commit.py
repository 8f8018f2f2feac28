"""A commit that lands while its answer is lost (issue 14, point 9).

A real server process talks to a private redis-server through a small TCP
proxy that forwards one commit to Redis, then drops the connection instead of
relaying the reply and refuses connections for a moment: the write is applied,
and the server, whose store calls fail, answers ``503 store-unavailable``. The
SDK sends the write again with the same seq (itself, or when the caller
retries after it gave up), and the server answers it from the stored response:
applied once.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import httpx
import numpy as np
import pytest

import featurestream_client as fc
from featurestream_client import Client, RetryPolicy
from tests import support
from tests.conftest import RedisServer
from tests.support import ServeProcess, free_port

pytestmark = [pytest.mark.redis, pytest.mark.slow]

D = 4
PARAMS = {"num_features": 2}
OUTAGE = 1.5  # seconds during which the proxy refuses new connections


class LoseCommitReply:
    """A TCP proxy in front of Redis that can lose the reply of one commit.

    :meth:`arm` makes it watch for the first command that evaluates a script
    (the commit) and carries ``marker``: it forwards that command, then closes
    the connection instead of relaying Redis's reply, and closes every new
    connection at once for ``outage`` seconds.
    """

    def __init__(self, redis_port: int) -> None:
        self.redis_port = redis_port
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._listener.settimeout(0.2)
        self._marker: bytes | None = None
        self._outage = 0.0
        self._refuse_until = 0.0
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = threading.Event()
        self.lost = 0  # replies lost
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def arm(self, marker: bytes, outage: float) -> None:
        with self._lock:
            self._marker, self._outage = marker, outage

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                _close(s)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            if time.monotonic() < self._refuse_until:
                _close(conn)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.redis_port), timeout=5)
            except OSError:
                _close(conn)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [conn, upstream]
            lose = threading.Event()
            threading.Thread(target=self._up, args=(conn, upstream, lose), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, conn, lose), daemon=True).start()

    def _up(self, conn: socket.socket, upstream: socket.socket, lose: threading.Event) -> None:
        """Client to Redis; sets ``lose`` on forwarding the armed commit."""
        while True:
            try:
                data = conn.recv(65536)
                if not data:
                    break
                with self._lock:
                    hit = self._marker is not None and b"EVAL" in data and self._marker in data
                    if hit:
                        self._marker = None
                        self._refuse_until = time.monotonic() + self._outage
                        lose.set()
                upstream.sendall(data)
            except OSError:
                break
        _close(upstream)

    def _down(self, upstream: socket.socket, conn: socket.socket, lose: threading.Event) -> None:
        """Redis to client; once ``lose`` is set, the next reply is dropped with the link."""
        while True:
            try:
                data = upstream.recv(65536)
            except OSError:
                break
            if not data:
                break
            if lose.is_set():
                self.lost += 1
                break
            try:
                conn.sendall(data)
            except OSError:
                break
        _close(conn)
        _close(upstream)


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()


class Statuses(httpx.HTTPTransport):
    """An HTTP transport that records the status of every answer to a write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.method == "POST" and request.url.path.endswith("/instances"):
            self.writes.append(response.status_code)
        return response


@pytest.fixture
def setup(
    redis_server_factory: Callable[..., RedisServer],
) -> Iterator[tuple[LoseCommitReply, ServeProcess]]:
    redis = redis_server_factory()
    proxy = LoseCommitReply(redis.port)
    server = ServeProcess(proxy.url, f"fstest-{uuid.uuid4().hex[:12]}").start()
    yield proxy, server
    server.kill()
    proxy.close()


def _instance_stream(c: Client) -> fc.Stream:
    """A new instance stream written to as ``lost-writer``, after a first commit elsewhere.

    The first commit on a fresh Redis finds the commit script unloaded (NOSCRIPT)
    and sends it again: the warm-up makes the armed commit the one that runs.
    """
    warm = c.create_stream("ofs", feature_names=support.names(D), params=PARAMS)
    warm.add_instances(*_data(0))
    return c.create_stream(
        "ofs", feature_names=support.names(D), params=PARAMS, producer="lost-writer"
    )


def _data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(5, D))
    return X, (X[:, 0] > 0).astype(float)


def _wait_ready(url: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if httpx.get(url + "/readyz", timeout=2).status_code == 200:
            return
        time.sleep(0.1)
    raise AssertionError("the server did not become ready again")


def test_a_commit_whose_answer_is_lost_is_retried_with_its_seq_and_applied_once(
    setup: tuple[LoseCommitReply, ServeProcess],
) -> None:
    proxy, server = setup
    statuses = Statuses()
    retry = RetryPolicy(attempts=8, backoff=0.2, max_retry_after=1.0)
    with Client(server.url, retry=retry, transport=statuses, timeout=30) as c:
        s = _instance_stream(c)
        X, y = _data(1)
        proxy.arm(b"lost-writer", OUTAGE)
        statuses.writes.clear()
        result = s.add_instances(X, y)
        assert proxy.lost == 1, "the commit's reply was not lost: the test proved nothing"
        # The first answer was a 503 (outcome unknown); a later try, same seq, was a replay.
        assert statuses.writes[0] == 503 and statuses.writes[-1] == 200
        assert result.replayed and result.seqs == (1,) and result.version == 1
        assert s.status()["instances_seen"] == len(X)
        batches = [e for e in s.iter_events() if e.type == "batch"]
        assert [(e.producer, e.seq, e.version) for e in batches] == [("lost-writer", 1, 1)]


def test_after_giving_up_the_same_write_is_safe_to_send_again(
    setup: tuple[LoseCommitReply, ServeProcess],
) -> None:
    proxy, server = setup
    with Client(server.url, retry=RetryPolicy.never(), timeout=30) as c:
        s = _instance_stream(c)
        X, y = _data(2)
        proxy.arm(b"lost-writer", OUTAGE)
        with pytest.raises(fc.StoreUnavailable) as exc:
            s.add_instances(X, y)
        assert proxy.lost == 1, "the commit's reply was not lost: the test proved nothing"
        _wait_ready(server.url)
        # The caller sends the same write again: answered from the stored response.
        again = s.add_instances(X, y)
        assert s.status()["instances_seen"] == len(X), "applied twice"
        assert again.replayed and again.seqs == (1,) and again.version == 1
        # The error said what happened and what to do.
        assert exc.value.outcome_unknown
        assert "is unknown" in str(exc.value) and "same seq" in str(exc.value)
        # The next write goes on with the next seq.
        X2, y2 = _data(3)
        assert s.add_instances(X2, y2).seqs == (2,)
        assert s.status()["instances_seen"] == 2 * len(X)
        batches = [e for e in s.iter_events() if e.type == "batch"]
        assert [(e.seq, e.version) for e in batches] == [(1, 1), (2, 2)]
