"""Fixtures of the CLI tests: a live server in this process, data files in a temp dir."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from featurestream.config import Settings
from tests.client.live import LiveServer


@pytest.fixture(scope="session")
def cli_server() -> Iterator[LiveServer]:
    server = LiveServer(Settings(store_url="memory://")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def cli_redis_server(redis_url: str) -> Iterator[LiveServer]:
    prefix = f"fstest-{uuid.uuid4().hex[:12]}"
    server = LiveServer(Settings(store_url=redis_url, key_prefix=prefix)).start()
    yield server
    server.stop()


@pytest.fixture
def url(cli_server: LiveServer) -> str:
    return cli_server.url


@pytest.fixture
def sid() -> str:
    return f"cli-{uuid.uuid4().hex[:12]}"
