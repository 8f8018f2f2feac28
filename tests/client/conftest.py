"""Fixtures of the client tests: live servers on both stores, clients, test data."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pytest

from featurestream.config import Settings
from featurestream_client import Client
from tests import support
from tests.client.live import LiveServer


@pytest.fixture(scope="session")
def memory_server() -> Iterator[LiveServer]:
    server = LiveServer(Settings(store_url="memory://")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_live_server(redis_url: str) -> Iterator[LiveServer]:
    # One namespace for the session's streams; every test uses its own stream ids.
    prefix = f"fstest-{uuid.uuid4().hex[:12]}"
    server = LiveServer(Settings(store_url=redis_url, key_prefix=prefix)).start()
    yield server
    server.stop()


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def live(request: pytest.FixtureRequest) -> LiveServer:
    """A running server (in this process) on the memory store and on real Redis."""
    name = "memory_server" if request.param == "memory" else "redis_live_server"
    server: LiveServer = request.getfixturevalue(name)
    return server


@pytest.fixture
def client(live: LiveServer) -> Iterator[Client]:
    with Client(live.url, timeout=30) as c:
        yield c


@pytest.fixture
def sid() -> str:
    """A stream id of this test's own."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def wdbc_rows() -> tuple[np.ndarray, np.ndarray]:
    """(X (569, 30) instance-major, y) of the public feature-stream vector."""
    X, y = support.wdbc()
    return np.ascontiguousarray(X.T), y
