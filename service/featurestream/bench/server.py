"""A ``featurestream serve`` child process for benchmarks, with its memory high-water mark."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status_kib(pid: int, key: str) -> int | None:
    """A ``VmXxx`` line of /proc/<pid>/status in KiB; None where /proc is absent."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


@dataclass
class SpawnedServer:
    """A server this process started: its URL, its process and its store."""

    url: str
    proc: subprocess.Popen[bytes]
    store: str
    key_prefix: str

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def rss_bytes(self) -> int | None:
        kib = _status_kib(self.pid, "VmRSS")
        return None if kib is None else kib * 1024

    def peak_rss_bytes(self) -> int | None:
        """VmHWM: the most resident memory since start or since :meth:`reset_peak`."""
        kib = _status_kib(self.pid, "VmHWM")
        return None if kib is None else kib * 1024

    def reset_peak(self) -> bool:
        """Reset VmHWM to the current RSS (Linux: ``5`` to /proc/<pid>/clear_refs).

        Lets one server report the peak of each run. False when the kernel
        refuses; the peak then covers the server's whole life so far.
        """
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
        except OSError:
            return False
        return True


def check_store(store: str, timeout: float = 2.0) -> None:
    """Exit at once, saying how to start one, when the Redis of ``store`` does not answer.

    Without it a benchmark against a missing Redis waits for a server that
    never gets ready. ``memory://`` needs nothing.
    """
    if not store.startswith(("redis://", "rediss://", "unix://")):
        return
    import redis

    try:
        client = redis.Redis.from_url(store, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            client.ping()
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError) as exc:
        raise SystemExit(
            f"featurestream bench: no Redis answers at {store} ({exc}). Start one, e.g. "
            "`redis-server --port 6379 --save '' --daemonize yes` (or `docker run -d -p "
            "6379:6379 redis:7`), give another with --store redis://HOST:PORT/0, or run "
            "on the embedded store with --store memory://."
        ) from None


def server_env(args: Any) -> dict[str, str]:
    """The settings a benchmark's options give its spawned server (``--compute-workers``)."""
    workers = getattr(args, "compute_workers", None)
    return {} if workers is None else {"FEATURESTREAM_COMPUTE_WORKERS": str(workers)}


@contextmanager
def spawn_server(
    store: str,
    *,
    blas_threads: int | None = 1,
    key_prefix: str | None = None,
    startup_seconds: float = 60.0,
    env: dict[str, str] | None = None,
) -> Iterator[SpawnedServer]:
    """Start ``featurestream serve`` on a free port; wait until its store is ready and
    its compiled kernels are loaded.

    The keys go under a fresh prefix (``fsbench-<random>``), so a shared Redis
    is never touched outside it; every stream the benchmark creates is deleted
    by the benchmark itself. ``blas_threads`` caps the server's BLAS threads
    (None leaves the environment as it is); ``env`` adds settings of the server.
    """
    import httpx

    check_store(store)
    port = free_port()
    prefix = key_prefix or f"fsbench-{uuid.uuid4().hex[:10]}"
    settings = dict(env or {})
    # The server's defaults, kernel warm-up included: the runs start once it is over
    # (it would compete with them), as they would on a server that has been up a while.
    env = {**os.environ, "FEATURESTREAM_KEY_PREFIX": prefix}
    # Settings read FEATURESTREAM_*: options given here must win over the caller's shell.
    for var in (
        "FEATURESTREAM_STORE_URL",
        "FEATURESTREAM_WORKERS",
        "FEATURESTREAM_COMPUTE_WORKERS",
        "FEATURESTREAM_API_KEYS_FILE",
    ):
        env.pop(var, None)
    env.update(settings)
    if blas_threads is not None:
        for var in BLAS_VARIABLES:
            env[var] = str(blas_threads)
    cmd = [
        sys.executable,
        "-m",
        "featurestream",
        "serve",
        "--port",
        str(port),
        "--store",
        store,
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_seconds
        ready = False
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the benchmark server exited with status {proc.returncode}")
            try:
                ready = httpx.get(url + "/readyz", timeout=1.0).status_code == 200
                if ready and _warm(url):
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                waited = "its compiled kernels to load (see its log)" if ready else "its store"
                raise RuntimeError(f"the benchmark server on {store} waited too long for {waited}")
            time.sleep(0.05)
        yield SpawnedServer(url, proc, store, prefix)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _warm(url: str) -> bool:
    """Whether the server's start-up kernel warm-up is over (or off): its metric."""
    import httpx

    for line in httpx.get(url + "/metrics", timeout=1.0).text.splitlines():
        if line.startswith("featurestream_kernels_warm "):
            return line.split()[1] == "1"
    return True


__all__ = ["BLAS_VARIABLES", "SpawnedServer", "check_store", "free_port", "spawn_server"]
