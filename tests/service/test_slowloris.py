"""Slowloris against a real server process with API keys on.

``body_timeout`` used to apply to each chunk of a body, so a client sending a
byte now and then held its request open forever; and the API key was checked
only after the body had been read, so anyone could do it, unauthenticated, on
``POST /v1/streams``. Now one deadline bounds the whole body, and a request
with a body but no valid key is answered 401 before any of it is read.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from featurestream.api.auth import hash_key
from tests.support import ServeProcess

pytestmark = pytest.mark.slow

KEY = "acme-secret"
BODY_TIMEOUT = 1.5
SLACK = 1.5


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    keys: Path = tmp_path_factory.mktemp("keys") / "api-keys.txt"
    keys.write_text(f"acme:{hash_key(KEY)}\n")
    env = {
        "FEATURESTREAM_API_KEYS_FILE": str(keys),
        "FEATURESTREAM_BODY_TIMEOUT": str(BODY_TIMEOUT),
    }
    s = ServeProcess("memory://", env=env).start()
    try:
        yield s
    finally:
        s.kill()


def trickle(
    server: ServeProcess, headers: dict[str, str], interval: float, within: float
) -> tuple[str, float]:
    """POST /v1/streams announcing 1000 bytes, then one byte every ``interval`` seconds
    until the server answers or ``within`` seconds pass: (the reply, seconds taken)."""
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    request = (
        "POST /v1/streams HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: 1000\r\n{head}\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(request.encode())
        t0 = time.monotonic()
        reply = b""
        sent = 0
        while time.monotonic() - t0 < within:
            readable, _, _ = select.select([s], [], [], interval)
            if readable:
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
                if b"\r\n\r\n" in reply:
                    break
                continue
            if sent < 999:
                try:
                    s.sendall(b" ")
                except OSError:
                    break
                sent += 1
        return reply.decode("latin-1"), time.monotonic() - t0


def test_a_trickled_body_gets_408_within_the_body_timeout(server: ServeProcess) -> None:
    # A byte every 0.25 s: never a pause as long as the timeout, but the body as a
    # whole (1000 bytes) would take four minutes.
    reply, waited = trickle(
        server, {"Authorization": f"Bearer {KEY}"}, 0.25, within=BODY_TIMEOUT + 10
    )
    assert reply.startswith("HTTP/1.1 408"), (reply[:200], waited)
    assert waited < BODY_TIMEOUT + SLACK, waited


@pytest.mark.parametrize("auth", [None, "Bearer wrong-key", "Basic abc"])
def test_an_unauthenticated_body_is_refused_unread(server: ServeProcess, auth: str | None) -> None:
    headers = {} if auth is None else {"Authorization": auth}
    reply, waited = trickle(server, headers, 0.25, within=BODY_TIMEOUT + 10)
    assert reply.startswith("HTTP/1.1 401"), (reply[:200], waited)
    assert "www-authenticate: bearer" in reply.lower()
    assert waited < 0.5 * BODY_TIMEOUT, waited


def test_honest_clients_are_served(server: ServeProcess) -> None:
    ok = {"Authorization": f"Bearer {KEY}"}
    body = {"id": "s", "algorithm": "saola", "target": [1.0, 2.0, 3.0]}
    assert httpx.post(server.url + "/v1/streams", json=body, headers=ok).status_code == 201
    assert httpx.get(server.url + "/v1/streams/s/status", headers=ok).status_code == 200
    # Without a key: 401 with or without a body, as before.
    assert httpx.get(server.url + "/v1/streams/s/status").status_code == 401
    assert httpx.post(server.url + "/v1/streams", json=body).status_code == 401
    assert httpx.get(server.url + "/healthz").status_code == 200
