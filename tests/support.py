"""Helpers shared by the tests (not fixtures): test data and small builders."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import numpy as np

DATA = Path(__file__).parent / "data"


@cache
def expected() -> dict[str, Any]:
    """The public conformance vectors, with the parameters they were produced with.

    The OFS vectors come from the reference implementation, which learns from
    the values as sent: their params say ``scale: "none"`` here explicitly
    (OFS standardises by default). The file itself is left as published.
    """
    vectors = dict(json.loads((DATA / "expected.json").read_text()))
    for case in ("ofs", "ofs_untruncated"):
        if case in vectors.get("instance_streams", {}):
            params = vectors["instance_streams"][case]["params"]
            vectors["instance_streams"][case]["params"] = {**params, "scale": "none"}
    return vectors


@cache
def _load(name: str) -> np.ndarray:
    return np.loadtxt(DATA / name, delimiter=",", skiprows=1)


def wdbc() -> tuple[np.ndarray, np.ndarray]:
    """(X feature-major (30, 569), y) of the public feature-stream vector."""
    D = _load("wdbc.csv")
    return np.ascontiguousarray(D[:, :-1].T), D[:, -1].copy()


def discrete() -> tuple[np.ndarray, np.ndarray]:
    """(X feature-major (30, 800) integer codes, y) of the public discrete vector."""
    D = _load("discrete.csv")
    return np.ascontiguousarray(D[:, :-1].T), D[:, -1].copy()


def instances() -> tuple[np.ndarray, np.ndarray]:
    """(X (2000, 100), y) of the public instance-stream vector."""
    D = _load("instances.csv")
    return np.ascontiguousarray(D[:, :-1]), D[:, -1].copy()


def names(count: int, prefix: str = "f") -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


class ServeProcess:
    """``featurestream serve`` in a child process (start, SIGKILL, or a clean stop).

    ``env`` adds environment variables (settings) for the server; with ``log``, its
    log lines (at ``log_level``) go to that file rather than the test's stderr.
    """

    def __init__(
        self,
        store_url: str,
        prefix: str = "fs",
        port: int | None = None,
        env: dict[str, str] | None = None,
        log: Path | None = None,
        log_level: str = "warning",
    ) -> None:
        self.port = port or free_port()
        self.store_url = store_url
        self.prefix = prefix
        self.env = dict(env or {})
        self.log = log
        self.log_level = log_level
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServeProcess:
        exe = shutil.which("featurestream")
        cmd = [exe] if exe else [sys.executable, "-m", "featurestream"]
        cmd += ["serve", "--port", str(self.port), "--store", self.store_url]
        cmd += ["--log-level", self.log_level]
        env = {**os.environ, "FEATURESTREAM_KEY_PREFIX": self.prefix}
        # One compute worker, unless the test asks for others: the worker path is the
        # one served, and each server spawns no more processes than its test needs.
        env["FEATURESTREAM_COMPUTE_WORKERS"] = "1"
        env.update(self.env)
        if self.log is None:
            self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
        else:
            with self.log.open("ab") as err:
                self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}")
            try:
                if httpx.get(self.url + "/healthz", timeout=0.5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server did not answer /healthz")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None


def check_first_message(message: dict[str, Any]) -> None:
    """The first WebSocket message on a new stream, to a connection that named no producer:
    the selection, its own producer (``ws-<uuid>``) and the seq of its first frame."""
    message = dict(message)
    assert message.pop("producer").startswith("ws-")
    assert message == {"type": "selection", "selected": [], "version": 0, "features": [], "seq": 1}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def zip_version_needed(body: bytes, version: int) -> bytes:
    """A zip ``body`` whose every header says "version needed to extract: version / 10"."""
    out = bytearray(body)
    for signature, offset in ((b"PK\x03\x04", 4), (b"PK\x01\x02", 6)):
        at = out.find(signature)
        while at >= 0:
            struct.pack_into("<H", out, at + offset, version)
            at = out.find(signature, at + 4)
    return bytes(out)


def default_sigint() -> None:
    """``preexec_fn`` of a child the test interrupts: SIGINT back to its default.

    A shell starting a command in the background without job control (``cmd &``
    in a script) makes it ignore SIGINT, and its children inherit that; Python
    then installs no KeyboardInterrupt handler, and Ctrl-C tests would hang.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
