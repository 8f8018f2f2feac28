"""A server loads OFS's compiled kernels at start-up, for read-only batches too.

A batch read off a request or a WebSocket frame is a read-only view of the bytes
received, a type numba specialises for separately; the warm-up covers it.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time

import httpx
import numba
import numpy as np

from featurestream.selectors import _ofs_kernel
from featurestream.selectors.ofs import warm_kernels
from tests.support import free_port


def _has_readonly(dispatcher: object) -> bool:
    return any(
        isinstance(t, numba.types.Array) and not t.mutable
        for sig in getattr(dispatcher, "signatures", ())
        for t in sig
    )


def test_warm_kernels_loads_the_read_only_specialisations() -> None:
    warm_kernels()
    assert _has_readonly(_ofs_kernel._standardise)
    # Learning a read-only batch afterwards uses what was loaded: no new specialisation.
    before = len(_ofs_kernel._standardise.signatures)
    X = np.ones((2, 3))
    X.flags.writeable = False
    from featurestream.selectors.ofs import OFS, OFSParams

    OFS.start(OFSParams.from_mapping({"num_features": 2}), ["a", "b", "c"]).learn_instances(
        X, np.array([1.0, -1.0])
    )
    assert len(_ofs_kernel._standardise.signatures) == before


def _once_listening(url: str, within: float = 5.0) -> httpx.Response:
    """GET ``url`` as soon as the server listens (at most ``within`` seconds from now)."""
    deadline = time.monotonic() + within
    while True:
        try:
            return httpx.get(url, timeout=10)
        except httpx.ConnectError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def test_a_server_warms_its_kernels_in_the_background_and_serves_meanwhile() -> None:
    port = free_port()
    env = {**os.environ, "FEATURESTREAM_WARM_KERNELS": "true"}
    cmd = [sys.executable, "-m", "featurestream", "serve", "--port", str(port)]
    cmd += ["--store", "memory://", "--log-level", "info"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stderr is not None
    reader = threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stderr], daemon=True)  # type: ignore[union-attr]
    reader.start()
    seen: list[str] = []
    answered = False
    ready_while_warming: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            seen.append(line)
            if not answered and "serving on store" in line:
                # Start-up does not wait for the kernels: the server answers at once (the
                # line comes as the app starts, just before uvicorn listens).
                r = _once_listening(f"http://127.0.0.1:{port}/healthz")
                answered = r.status_code == 200
                # Not ready until the kernels are loaded: /readyz says so meanwhile.
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10)
                warm = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
                if "featurestream_kernels_warm 0" in warm.splitlines():
                    ready_while_warming.append(ready.status_code)
                    assert ready.json()["type"].endswith("/warming-up"), ready.text
                    assert ready.headers["Retry-After"] == "1"
            if "compiled kernels loaded" in line:
                break
        assert answered, "".join(seen)
        assert any("compiled kernels loaded" in ln for ln in seen), "".join(seen)
        # Loaded, as /metrics says (the bench waits for it before its runs).
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        assert "featurestream_kernels_warm 1" in metrics.splitlines()
        assert ready_while_warming == [503], "".join(seen)
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code == 200
    finally:
        proc.kill()
        proc.wait(10)
        reader.join(10)
        proc.stderr.close()


def test_the_bench_starts_its_runs_once_a_server_has_warmed() -> None:
    """``featurestream bench`` spawns servers with their defaults, warm-up included, and
    measures only once the warm-up is over (it would compete with the runs)."""
    from featurestream.bench.server import spawn_server

    with spawn_server("memory://", env={"FEATURESTREAM_WARM_KERNELS": "true"}) as server:
        metrics = httpx.get(server.url + "/metrics", timeout=10).text.splitlines()
        assert "featurestream_kernels_warm 1" in metrics
    # Off (as the tests' servers are): no such metric, and nothing to wait for.
    with spawn_server("memory://", env={"FEATURESTREAM_WARM_KERNELS": "false"}) as server:
        metrics = httpx.get(server.url + "/metrics", timeout=10).text
        assert "featurestream_kernels_warm" not in metrics
