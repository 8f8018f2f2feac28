"""API keys revoked while a server process runs: WebSockets opened before are closed.

A real ``featurestream serve`` process on Redis, with keys on. Rewriting the
keys file without key A closes A's WebSocket (1008) within seconds, while
B's stays open and keeps streaming; HTTP requests with A get 401. Deleting
the keys file keeps the keys in force and says so in the log.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from featurestream.api.auth import hash_key
from tests.faults.harness import Processes, ServerProcess

pytestmark = [pytest.mark.redis, pytest.mark.slow]

KEY_A, KEY_B = "key-of-acme", "key-of-beta"
D = 6
# The bound within which a revoked WebSocket must be closed (the file is polled every second).
REVOKE_WITHIN = 5.0


def write_keys(path: Path, keys: dict[str, str]) -> None:
    """Replace the file and move its mtime on, as a rotation tool would."""
    path.write_text("".join(f"{tenant}:{hash_key(key)}\n" for tenant, key in keys.items()))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def start(processes: Processes, redis_url: str, key_prefix: str, keys: Path) -> ServerProcess:
    server = processes.server(redis_url, key_prefix, env={"FEATURESTREAM_API_KEYS_FILE": str(keys)})
    return server.start()


def create_stream(server: ServerProcess, key: str) -> None:
    body = {
        "id": "s",
        "algorithm": "ofs",
        "params": {"num_features": 3},
        "feature_names": [f"f{i}" for i in range(D)],
    }
    r = httpx.post(server.url + "/v1/streams", json=body, headers=auth(key), timeout=30)
    assert r.status_code == 201, r.text


class Streamer:
    """Sends a JSON frame every 50 ms from a thread and records what comes back."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.acks = 0
        self.closed_at: float | None = None
        self.close_code: int | None = None
        self._stop = threading.Event()
        rng = np.random.default_rng(1)
        self._frame = json.dumps({"X": rng.normal(size=(4, D)).tolist(), "y": [0, 1, 0, 1]})
        self._sender = threading.Thread(target=self._send, daemon=True)
        self._reader = threading.Thread(target=self._read, daemon=True)

    def start(self) -> Streamer:
        self._sender.start()
        self._reader.start()
        return self

    def _send(self) -> None:
        for _ in range(2000):  # bounded: at most 100 s of frames
            if self._stop.is_set():
                return
            try:
                self.ws.send(self._frame)
            except ConnectionClosed:
                return
            time.sleep(0.05)

    def _read(self) -> None:
        try:
            for _ in range(100_000):
                message: dict[str, Any] = json.loads(self.ws.recv(timeout=30))
                if message["type"] == "ack":
                    self.acks += 1
        except ConnectionClosed as exc:
            self.closed_at = time.monotonic()
            self.close_code = exc.rcvd.code if exc.rcvd is not None else None
        except TimeoutError:
            pass

    def wait_acks(self, n: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while self.acks < n and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.acks >= n, f"only {self.acks} acks"

    def wait_closed(self, since: float, timeout: float) -> None:
        """Wait until the server closed the socket: 1008 within ``timeout`` of ``since``."""
        deadline = since + timeout + 5
        while self.closed_at is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.closed_at is not None, "the socket is still open"
        assert self.close_code == 1008
        assert self.closed_at - since < timeout

    def stop(self) -> None:
        self._stop.set()
        self._sender.join(10)


def test_a_revoked_key_closes_its_websockets_and_gets_401(
    processes: Processes, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    write_keys(keys, {"acme": KEY_A, "beta": KEY_B})
    server = start(processes, redis_url, key_prefix, keys)
    create_stream(server, KEY_A)
    create_stream(server, KEY_B)
    url = f"ws://127.0.0.1:{server.port}/v1/streams/s/ws"
    with (
        connect(url + "?producer=a", additional_headers=auth(KEY_A)) as ws_a,
        connect(url + f"?producer=b&token={KEY_B}") as ws_b,
    ):
        a, b = Streamer(ws_a).start(), Streamer(ws_b).start()
        try:
            a.wait_acks(5)
            b.wait_acks(5)
            revoked = time.monotonic()
            write_keys(keys, {"beta": KEY_B})
            a.wait_closed(revoked, REVOKE_WITHIN)
            # B is untouched: still open, still acknowledged.
            acks_b = b.acks
            b.wait_acks(acks_b + 5)
            assert b.closed_at is None
        finally:
            a.stop()
            b.stop()
    assert httpx.get(server.url + "/v1/streams/s", headers=auth(KEY_A)).status_code == 401
    assert httpx.get(server.url + "/v1/streams/s", headers=auth(KEY_B)).status_code == 200
    # A new socket with A is refused too.
    with connect(url, additional_headers=auth(KEY_A)) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "error"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


def test_a_key_moved_to_another_tenant_closes_its_websockets(
    processes: Processes, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    write_keys(keys, {"acme": KEY_A})
    server = start(processes, redis_url, key_prefix, keys)
    create_stream(server, KEY_A)
    url = f"ws://127.0.0.1:{server.port}/v1/streams/s/ws"
    with connect(url, additional_headers=auth(KEY_A)) as ws:
        a = Streamer(ws).start()
        try:
            a.wait_acks(3)
            moved = time.monotonic()
            write_keys(keys, {"beta": KEY_A})  # the same key now names another tenant
            a.wait_closed(moved, REVOKE_WITHIN)
        finally:
            a.stop()


def test_deleting_the_keys_file_keeps_the_keys_and_logs_a_warning(
    processes: Processes, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    write_keys(keys, {"acme": KEY_A})
    server = start(processes, redis_url, key_prefix, keys)
    keys.unlink()
    deadline = time.monotonic() + 10
    while "cannot be read" not in server.log_tail(200) and time.monotonic() < deadline:
        time.sleep(0.1)
    log = server.log_tail(200)
    assert "cannot be read" in log and str(keys) in log and "stay in force" in log
    assert "WARNING" in log or '"warning"' in log.lower()
    # Still authenticated with the old keys: deleting the file opens nothing, closes nothing.
    assert httpx.get(server.url + "/v1/streams", headers=auth(KEY_A)).status_code == 200
    assert httpx.get(server.url + "/v1/streams").status_code == 401
    # Logged once per disappearance, not every second.
    time.sleep(2.5)
    assert server.log_tail(400).count("cannot be read") == 1
    # Back with new contents: read again.
    write_keys(keys, {"acme": KEY_B})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if httpx.get(server.url + "/v1/streams", headers=auth(KEY_B)).status_code == 200:
            break
        time.sleep(0.2)
    assert httpx.get(server.url + "/v1/streams", headers=auth(KEY_B)).status_code == 200
    assert httpx.get(server.url + "/v1/streams", headers=auth(KEY_A)).status_code == 401
