"""Messages for the consumer tests, the consumer processes, and the same writes over HTTP."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import pytest

from tests.support import ServeProcess

D = 8
NAMES = [f"x{i}" for i in range(D)]
CREATE = {"algorithm": "ofs", "params": {"num_features": 3}, "feature_names": NAMES}
JSON = {"content-type": "application/json"}


@dataclass
class Sent:
    """One message: its fields (``body`` bytes or text), and where the log put it."""

    stream: str
    fields: dict[str, Any]
    X: np.ndarray | None = None
    y: np.ndarray | None = None
    npy: bool = False
    hostile: bool = False
    key: str = ""
    ref: str = ""  # the log's id of it (a Redis entry id, a stream sequence)
    position: int = 0


def npy(A: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, A)
    return buf.getvalue()


def messages(streams: int, count: int, seed: int, started: set[str] | None = None) -> list[Sent]:
    """``count`` messages over ``streams`` streams, mixed JSON and .npy; 2% hostile
    (a truncated .npy, a wrong shape, an unknown stream)."""
    rng = np.random.default_rng(seed)
    sent: list[Sent] = []
    started = set() if started is None else started
    for k in range(count):
        sid = f"s{rng.integers(streams)}"
        X = rng.normal(size=(5, D))
        y = np.where(X[:, 0] + 0.3 * X[:, 1] > 0, 1.0, -1.0)
        fields: dict[str, Any] = {"stream": sid, "kind": "instances"}
        hostile = k % 50 == 25 and sid in started
        if sid not in started:
            fields["create"] = json.dumps({**CREATE, "id": sid})
            started.add(sid)
        as_npy = bool(k % 2)
        if hostile:
            bad = k // 50 % 3
            if bad == 0:  # truncated .npy
                fields |= {"content-type": "application/x-npy", "body": npy(X)[:-9]}
            elif bad == 1:  # wrong shape
                fields["body"] = json.dumps({"X": X[:, :3].tolist(), "y": y.tolist()})
            else:  # unknown stream, no create
                fields = {"stream": "nowhere", "kind": "instances", "body": b"{}"}
        elif as_npy:
            fields |= {"content-type": "application/x-npy", "body": npy(np.column_stack([X, y]))}
        else:
            fields["body"] = json.dumps({"X": X.tolist(), "y": y.tolist()})
        sent.append(Sent(sid, fields, X, y, as_npy, hostile))
    return sent


_LOGS: dict[int, str] = {}  # a consumer process's pid: the file its log goes to


def consumer(
    store_url: str, prefix: str, source: str, name: str, *extra: str
) -> subprocess.Popen[bytes]:
    """``featurestream consume SOURCE`` (and ``extra`` options) in a child process, on the
    store ``store_url``; its log goes to a file that :func:`started` reads."""
    exe = shutil.which("featurestream")
    cmd = [exe] if exe else [sys.executable, "-m", "featurestream"]
    cmd += ["consume", source, "--store", store_url, "--name", name, "--log-level", "info"]
    cmd += extra
    env = {**os.environ, "FEATURESTREAM_KEY_PREFIX": prefix}
    fd, path = tempfile.mkstemp(prefix=f"consume-{name}-", suffix=".log")
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=fd)
    finally:
        os.close(fd)
    _LOGS[proc.pid] = path
    return proc


def started(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Wait until ``proc`` logged that it reads its source: from then on SIGTERM stops it
    cleanly (before, the interpreter is still importing and the signal kills it)."""
    path = _LOGS[proc.pid]
    deadline = time.monotonic() + timeout
    while True:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if " reading " in text:
            return
        assert proc.poll() is None, f"the consumer exited ({proc.returncode}):\n{text}"
        assert time.monotonic() < deadline, f"the consumer did not start:\n{text}"
        time.sleep(0.1)


def batch_seqs(events: list[tuple[Any, dict[bytes, bytes]]]) -> list[int]:
    """The seqs of a stream's batch events, from its stored event log (XRANGE)."""
    return [
        e["seq"] for _, f in events for e in json.loads(f[b"e"])["events"] if e["type"] == "batch"
    ]


def reference(redis_url: str, sent: list[Sent]) -> str:
    """The same messages written over HTTP, in the same order: the stored states' prefix."""
    prefix = f"fsref-{random.getrandbits(40):x}"
    server = ServeProcess(redis_url, prefix=prefix).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for s in sent:
                if s.hostile:
                    continue
                if "create" in s.fields:
                    r = http.post("/v1/streams", content=s.fields["create"], headers=JSON)
                    assert r.status_code == 201, r.text
                if s.npy:
                    r = http.post(
                        f"/v1/streams/{s.stream}/instances",
                        content=npy(np.column_stack([s.X, s.y])),
                        headers={"content-type": "application/x-npy", "X-Label-Column": "last"},
                    )
                else:
                    r = http.post(
                        f"/v1/streams/{s.stream}/instances", content=s.fields["body"], headers=JSON
                    )
                assert r.status_code == 200, r.text
    finally:
        server.stop()
    return prefix


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        with contextlib.suppress(OSError, KeyError):
            os.unlink(_LOGS.pop(p.pid))
