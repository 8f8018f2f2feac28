"""Subscribers that do not read, against a real server process.

Every selection message used to carry the whole selection, and a subscriber
that read nothing had a backlog of them queued for it: 50 idle subscribers of a
stream of 20,000 selected features grew the server by more than 300 MB in ten
writes, and the writes slowed from 0.2 s to several seconds. Now a
large selection is announced by a notice (its version and size), a subscription
keeps only the newest notification, and a client that reads nothing for
``ws_send_timeout`` seconds is closed (1013, ``slow reader``).
"""

from __future__ import annotations

import base64
import io
import json
import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.support import ServeProcess, names

pytestmark = pytest.mark.slow

WIDE = 40_000  # features of the stream
SELECTED = 20_000  # selected: a selection document of about 0.9 MB
SUBSCRIBERS = 50
WRITES = 10
MB = 2**20


def rss(pid: int) -> int:
    """The resident set size of process ``pid``, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def create_wide(url: str, sid: str) -> None:
    """An OFS stream of WIDE features selecting SELECTED: nearly every write changes it."""
    body = {
        "id": sid,
        "algorithm": "ofs",
        "params": {"num_features": SELECTED},
        "feature_names": names(WIDE),
    }
    r = httpx.post(url + "/v1/streams", json=body, timeout=60)
    assert r.status_code == 201, r.text


def write(url: str, sid: str, rng: np.random.Generator) -> float:
    """Two labelled instances (an .npy body); the seconds the write took."""
    buf = io.BytesIO()
    np.save(buf, np.hstack([rng.normal(size=(2, WIDE)), [[0.0], [1.0]]]))
    headers = {"Content-Type": "application/x-npy", "X-Label-Column": "last"}
    t0 = time.monotonic()
    r = httpx.post(
        f"{url}/v1/streams/{sid}/instances", content=buf.getvalue(), headers=headers, timeout=60
    )
    assert r.status_code == 200, r.text[:300]
    return time.monotonic() - t0


def paused_subscriber(port: int, sid: str) -> socket.socket:
    """A WebSocket to ``sid`` that completed its handshake and then reads nothing
    (a receive buffer as small as the kernel allows)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(
        f"GET /v1/streams/{sid}/ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        byte = s.recv(1)
        assert byte, head
        head += byte
    assert head.startswith(b"HTTP/1.1 101 "), head
    return s


def read_frames(s: socket.socket, within: float) -> list[tuple[int, bytes]]:
    """The (opcode, payload) of the frames ``s`` receives, until a close frame, the end
    of the connection, or ``within`` seconds."""
    deadline = time.monotonic() + within
    data = b""
    frames: list[tuple[int, bytes]] = []
    while time.monotonic() < deadline:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = s.recv(1 << 20)
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
        while len(data) >= 2:
            opcode, n, at = data[0] & 0x0F, data[1] & 0x7F, 2
            if n == 126:
                n, at = struct.unpack("!H", data[2:4])[0], 4
            elif n == 127:
                n, at = struct.unpack("!Q", data[2:10])[0], 10
            if len(data) < at + n:
                break
            frames.append((opcode, data[at : at + n]))
            data = data[at + n :]
            if opcode == 8:
                return frames
    return frames


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    log = tmp_path_factory.mktemp("fanout") / "server.log"
    s = ServeProcess("memory://", env={"FEATURESTREAM_WS_SEND_TIMEOUT": "3"}, log=log)
    s.start()
    try:
        yield s
    finally:
        s.kill()


def test_fifty_paused_subscribers_of_a_large_selection_keep_memory_bounded(
    server: ServeProcess,
) -> None:
    assert server.proc is not None
    create_wide(server.url, "wide")
    subscribers = [paused_subscriber(server.port, "wide") for _ in range(SUBSCRIBERS)]
    try:
        time.sleep(0.5)
        before = rss(server.proc.pid)
        peak = before
        rng = np.random.default_rng(1)
        took = []
        for _ in range(WRITES):
            took.append(write(server.url, "wide", rng))
            peak = max(peak, rss(server.proc.pid))
        time.sleep(1.0)
        peak = max(peak, rss(server.proc.pid))
        grown = (peak - before) / MB
        assert grown < 100, f"RSS grew {grown:.0f} MB (writes took {took})"
        # The subscribers were told of each version, without the 20,000 features.
        frames = read_frames(subscribers[0], within=5)
        texts = [json.loads(p) for op, p in frames if op == 1]
        assert texts[0]["version"] == 0
        assert texts[0]["selected"] == [] and texts[0]["producer"].startswith("ws-")
        version = httpx.get(server.url + "/v1/streams/wide/selected", timeout=30).json()["version"]
        notice = {"type": "selection", "version": version, "size": SELECTED, "truncated": True}
        assert texts[-1] == notice
        assert max(len(p) for _, p in frames) < 1000
    finally:
        for s in subscribers:
            s.close()


def test_a_subscriber_that_reads_nothing_is_closed_as_a_slow_reader(
    tmp_path: Path,
) -> None:
    """Full messages (the limit raised) fill the socket's buffers; the send that waits
    for room longer than ws_send_timeout closes the connection, with its reason."""
    log = tmp_path / "server.log"
    env = {
        "FEATURESTREAM_WS_SEND_TIMEOUT": "2",
        "FEATURESTREAM_WS_SELECTION_MAX_FEATURES": "100000",
    }
    server = ServeProcess("memory://", env=env, log=log).start()
    try:
        create_wide(server.url, "slow")
        s = paused_subscriber(server.port, "slow")
        rng = np.random.default_rng(2)
        deadline = time.monotonic() + 30
        while "read nothing for" not in log.read_text() and time.monotonic() < deadline:
            write(server.url, "slow", rng)
        assert "read nothing for" in log.read_text()
        # Read now: the buffered messages, then the close frame, with its reason.
        frames = read_frames(s, within=10)
        opcode, payload = frames[-1]
        assert opcode == 8, [op for op, _ in frames]
        assert struct.unpack("!H", payload[:2])[0] == 1013
        assert payload[2:] == b"slow reader"
        s.close()
        # The server still serves the others.
        assert httpx.get(server.url + "/v1/streams/slow/selected", timeout=30).status_code == 200
    finally:
        server.kill()
