"""A client that leaves in the middle of its request body, against a real server process.

Starlette raises ``ClientDisconnect`` from the route's read of the body; the
catch-all handler logged it as an unhandled error, traceback included, and the
request was counted a 500. It is one info line now, and the stream is as it was.
A body the server refuses mid-way (413) is not taken for a client that left.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import ServeProcess

pytestmark = pytest.mark.slow

PATH = "/v1/streams/left/instances"
BATCH = {"X": [[1.0, 0.0, 2.0], [0.0, 1.0, 1.0]], "y": [1.0, -1.0]}
LIMIT = 1024


def records(log: Path) -> list[dict[str, Any]]:
    """The server's JSON log lines so far."""
    text = log.read_text(encoding="utf-8", errors="replace")
    return [json.loads(ln) for ln in text.splitlines() if ln.startswith("{")]


def posts_logged(log: Path) -> list[int]:
    """The statuses of the access lines of POSTs to ``PATH`` so far."""
    return [
        r["status"]
        for r in records(log)
        if r.get("logger") == "featurestream.access"
        and r.get("method") == "POST"
        and r.get("path") == PATH
    ]


def wait_posts(log: Path, count: int) -> list[int]:
    deadline = time.monotonic() + 15
    while len(posts_logged(log)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return posts_logged(log)


def start(log: Path) -> tuple[ServeProcess, dict[str, Any]]:
    """A server on the memory store with stream "left" and one batch in it: (it, its status)."""
    env = {"FEATURESTREAM_MAX_REQUEST_BYTES": str(LIMIT)}
    server = ServeProcess("memory://", env=env, log=log, log_level="info").start()
    streams = server.url + "/v1/streams"
    body = {"id": "left", "algorithm": "ofs", "params": {"num_features": 1}}
    r = httpx.post(streams, json=body | {"feature_names": ["a", "b", "c"]}, timeout=10)
    assert r.status_code == 201, r.text
    r = httpx.post(server.url + PATH, json=BATCH, timeout=30)
    assert r.status_code == 200, r.text
    status = httpx.get(streams + "/left/status", timeout=10).json()
    assert status["instances_seen"] == 2
    return server, status


def head(framing: str) -> bytes:
    """The head of a JSON POST to ``PATH`` whose body is framed by header ``framing``."""
    return (
        f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
    ).encode()


def quiet(log: Path) -> tuple[str, list[dict[str, Any]]]:
    """The log of a stopped server, checked free of errors: (its text, its lines)."""
    text = log.read_text(encoding="utf-8", errors="replace")
    lines = records(log)
    assert "unhandled error" not in text, text
    assert "Traceback" not in text, text
    assert not [r for r in lines if "exc" in r], text
    assert not [r for r in lines if r["level"] in ("error", "critical")], text
    return text, lines


def disconnects(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in lines if r["logger"] != "featurestream.access" and "disconnect" in r["msg"]]


def test_a_client_leaving_mid_body_is_one_info_line_and_changes_nothing(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    server, before = start(log)
    try:
        # Announce 1000 bytes, send the start of a batch, and leave.
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(head("Content-Length: 1000") + json.dumps(BATCH).encode()[:20])
        # "Client closed request" in the access line, not a 500.
        assert wait_posts(log, 2) == [200, 499], log.read_text()

        after = httpx.get(server.url + "/v1/streams/left/status", timeout=10).json()
        assert after["instances_seen"] == before["instances_seen"]
        assert after == before
        metrics = httpx.get(server.url + "/metrics", timeout=10).text
        assert 'status="500"' not in metrics, metrics
    finally:
        server.stop()

    text, lines = quiet(log)
    gone = disconnects(lines)
    assert len(gone) == 1, text
    assert gone[0]["level"] == "info" and PATH in gone[0]["msg"], gone


def test_a_body_refused_mid_way_is_its_413_and_no_disconnect(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    server, before = start(log)
    try:
        # No Content-Length: the limit strikes while the body is read.
        chunk = b" " * (2 * LIMIT)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(head("Transfer-Encoding: chunked") + b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            reply = s.recv(65536).decode("latin-1")
        assert reply.startswith("HTTP/1.1 413"), reply
        assert wait_posts(log, 2) == [200, 413], log.read_text()
        after = httpx.get(server.url + "/v1/streams/left/status", timeout=10).json()
        assert after == before
    finally:
        server.stop()

    text, lines = quiet(log)
    assert disconnects(lines) == [], text
