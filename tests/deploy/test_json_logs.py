"""Every line a ``featurestream serve`` process writes is a JSON object, uvicorn's own included.

Real server processes: their stdout and stderr go to files, read once they
have stopped, so every line (start-up, requests, warnings, errors, tracebacks,
shutdown) is checked.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import free_port

pytestmark = pytest.mark.slow

KEY = "a-key-of-the-tenant-acme"
# uvicorn stops cleanly on SIGTERM, then re-raises it: exit status 0 or "killed by SIGTERM".
STOPPED = (0, -signal.SIGTERM)


class Server:
    def __init__(self, tmp: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.out = tmp / "stdout.txt"
        self.err = tmp / "stderr.txt"
        exe = shutil.which("featurestream")
        cmd = [exe] if exe else [sys.executable, "-m", "featurestream"]
        cmd += ["serve", "--port", str(self.port), *args]
        base = {k: v for k, v in os.environ.items() if not k.startswith("FEATURESTREAM_")}
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.proc = subprocess.Popen(
                cmd, env={**base, **(env or {})}, stdin=subprocess.DEVNULL, stdout=out, stderr=err
            )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"exited with {self.proc.returncode}: {self.text()}"
            try:
                if httpx.get(self.url + "/healthz", timeout=0.5).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        pytest.fail(f"the server did not answer /healthz: {self.text()}")

    def wait_for(self, found: Callable[[str], bool], what: str) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if found(self.text()):
                return
            time.sleep(0.1)
        pytest.fail(f"the server did not log {what}: {self.text()}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return int(self.proc.returncode)

    def text(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")

    def records(self) -> list[dict[str, Any]]:
        """Every line of stdout and stderr, each parsed as one JSON object."""
        assert self.proc.poll() is not None, "read the lines once the server has stopped"
        out = []
        for path in (self.out, self.err):
            for line in path.read_text().splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    pytest.fail(f"{path.name}: a line is not JSON: {line!r}")
                assert isinstance(record, dict), line
                assert {"ts", "level", "logger", "msg"} <= set(record), line
                assert "color_message" not in record, line
                out.append(record)
        return out


def keys_line(tenant: str, key: str) -> str:
    return f"{tenant}:{hashlib.sha256(key.encode()).hexdigest()}\n"


def has(records: list[dict[str, Any]], logger: str, level: str, text: str) -> bool:
    return any(r["logger"] == logger and r["level"] == level and text in r["msg"] for r in records)


def test_every_line_is_json_through_requests_warnings_errors_and_shutdown(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(keys_line("acme", KEY))
    server = Server(tmp_path, "--log-level", "info", env={"FEATURESTREAM_API_KEYS_FILE": str(keys)})
    try:
        server.wait_ready()
        auth = {"Authorization": f"Bearer {KEY}"}
        assert httpx.get(server.url + "/v1/streams", headers=auth).status_code == 200
        assert httpx.get(server.url + "/v1/streams").status_code == 401
        bad = httpx.post(
            server.url + "/v1/streams",
            headers={**auth, "content-type": "application/json"},
            content=b'{"id": ',
        )
        assert 400 <= bad.status_code < 500
        # Not HTTP at all: uvicorn itself warns.
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as conn:
            conn.sendall(b"\x00\x01 NOT HTTP\r\n\r\n")
            with contextlib.suppress(OSError):
                while conn.recv(4096):
                    pass
        server.wait_for(lambda t: "Invalid HTTP request" in t, "uvicorn's warning")
        # A keys file that no longer parses: an error, the previous keys kept.
        keys.write_text("not a key line\n")
        server.wait_for(lambda t: "keeping the previous API keys" in t, "the keys error")
        # ... and one that disappears: a warning.
        keys.unlink()
        server.wait_for(lambda t: "cannot be read" in t, "the keys warning")
        assert httpx.get(server.url + "/v1/streams", headers=auth).status_code == 200
    finally:
        status = server.stop()
    assert status in STOPPED
    records = server.records()
    assert has(records, "uvicorn.error", "info", "Started server process")
    assert has(records, "uvicorn.error", "info", "Application startup complete")
    assert has(records, "uvicorn.error", "warning", "Invalid HTTP request")
    assert has(records, "uvicorn.error", "info", "Finished server process")
    assert has(records, "featurestream", "info", "serving on store memory")
    assert has(records, "featurestream.auth", "error", "keeping the previous API keys")
    assert has(records, "featurestream.auth", "warning", "cannot be read")
    access = [r for r in records if r["logger"] == "featurestream.access"]
    assert {r["status"] for r in access} >= {200, 401}
    assert all(r["request_id"] for r in access)
    # One access line per request: uvicorn's own access log stays off.
    assert not [r for r in records if r["logger"] == "uvicorn.access"]


def test_a_failure_at_start_is_one_json_line_with_its_traceback(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("not a key line\n")
    server = Server(tmp_path, env={"FEATURESTREAM_API_KEYS_FILE": str(keys)})
    try:
        server.proc.wait(60)
    finally:
        status = server.stop()
    assert status != 0
    records = server.records()
    (failure,) = [r for r in records if r["level"] == "critical"]
    assert "KeyFileError" in failure["msg"]
    assert failure["exc"].startswith("Traceback (most recent call last):")
    assert "KeyFileError" in failure["exc"]


@pytest.mark.redis
def test_several_workers_on_redis_log_json_lines_only(tmp_path: Path, redis_url: str) -> None:
    """The supervisor and each worker process (started afresh by uvicorn) log JSON."""
    server = Server(
        tmp_path,
        "--workers",
        "2",
        "--store",
        redis_url,
        "--log-level",
        "info",
        env={"FEATURESTREAM_KEY_PREFIX": f"fs-logs-{uuid.uuid4().hex[:8]}"},
    )
    try:
        server.wait_ready()
        for _ in range(4):
            assert httpx.get(server.url + "/v1/streams").status_code == 200
    finally:
        status = server.stop()
    assert status in STOPPED
    records = server.records()
    assert has(records, "uvicorn.error", "info", "Started parent process")
    started = [r for r in records if "serving on store redis" in r["msg"]]
    assert len(started) == 2, "each worker logs its start"
    assert has(records, "uvicorn.error", "info", "Stopping parent process")


def test_an_invalid_setting_is_a_json_line_naming_it(tmp_path: Path) -> None:
    server = Server(tmp_path, env={"FEATURESTREAM_WORKERS": "0"})
    try:
        server.proc.wait(60)
    finally:
        status = server.stop()
    assert status == 2
    (line,) = server.records()
    assert line["level"] == "error" and line["setting"] == "workers"
    assert line["msg"].startswith("featurestream serve: workers: ")
