"""Fixtures of the ``featurestream compare`` tests: a ``featurestream serve`` child process."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support import ServeProcess


@pytest.fixture(scope="module")
def serve() -> Iterator[ServeProcess]:
    server = ServeProcess("memory://").start()
    yield server
    server.stop()


@pytest.fixture
def redis_serve(redis_url: str) -> Iterator[ServeProcess]:
    server = ServeProcess(redis_url, prefix=f"fstest-{uuid.uuid4().hex[:12]}").start()
    yield server
    server.stop()
