"""Shared fixtures: hypothesis profiles, data loaders, stores (memory and real Redis)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings

from tests.support import free_port

settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev",
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The servers the tests start (hundreds of them, in and out of process) do not load
# the compiled kernels in the background at start-up: on a small machine that would
# compete with the tests themselves. tests/service/test_warm_kernels.py turns it on.
os.environ.setdefault("FEATURESTREAM_WARM_KERNELS", "false")
# Apps built in the test process compute in its threads (compute_workers 0); the server
# processes the tests start (tests/support.py, tests/faults/harness.py) run one compute worker.
os.environ.setdefault("FEATURESTREAM_COMPUTE_WORKERS", "0")


# --------------------------------------------------------------------------- Redis


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--redis-url",
        default=None,
        help="Redis server for the redis-marked tests (default: $REDIS_URL, else a private "
        "redis-server started on a free port).",
    )


@dataclass
class RedisServer:
    """A redis-server process owned by the tests (restartable, with its own data dir)."""

    port: int
    directory: str
    appendonly: bool = True
    process: subprocess.Popen[bytes] | None = None
    extra: tuple[str, ...] = ()  # further redis-server arguments (--maxmemory 4mb, ...)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed (apt-get install redis-server)")
        args = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            self.directory,
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            "always",
            "--daemonize",
            "no",
            "--logfile",
            "redis.log",
            *self.extra,
        ]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None

    def pause(self) -> None:
        """SIGSTOP: Redis hangs, its connections stay open and its port accepts."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


@pytest.fixture
def redis_server_factory() -> Iterator[Callable[..., RedisServer]]:
    """Start private redis-server processes (for restarts, persistence, outages)."""
    servers: list[RedisServer] = []
    dirs: list[str] = []

    def make(appendonly: bool = True, extra: tuple[str, ...] = ()) -> RedisServer:
        d = tempfile.mkdtemp(prefix="fs-redis-")
        dirs.append(d)
        server = RedisServer(free_port(), d, appendonly, extra=extra)
        server.start()
        servers.append(server)
        return server

    yield make
    for s in servers:
        s.kill()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """URL of a Redis server shared by the session; keys are namespaced per test."""
    url = request.config.getoption("--redis-url") or os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    d = tempfile.mkdtemp(prefix="fs-redis-")
    server = RedisServer(free_port(), d, appendonly=False)
    server.start()
    yield server.url
    server.kill()
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def key_prefix() -> str:
    """A Redis key prefix unique to this test: the shared server is never flushed."""
    return f"fstest-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
