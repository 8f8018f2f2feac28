from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from featurestream.api import create_app
from featurestream.config import Settings
from tests import support
from tests.faults.harness import Processes
from tests.support import ServeProcess


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def settings(request: pytest.FixtureRequest, key_prefix: str) -> Settings:
    if request.param == "memory":
        return Settings(store_url="memory://")
    return Settings(store_url=request.getfixturevalue("redis_url"), key_prefix=key_prefix)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        yield c


@pytest.fixture(scope="session")
def wdbc() -> tuple[np.ndarray, np.ndarray]:
    """(X feature-major, y)."""
    return support.wdbc()


@pytest.fixture
def server(settings: Settings) -> Iterator[ServeProcess]:
    """One ``featurestream serve`` process on the memory store, or on real Redis."""
    proc = ServeProcess(settings.store_url, prefix=settings.key_prefix).start()
    yield proc
    proc.kill()


@pytest.fixture
def servers() -> Iterator[list[ServeProcess]]:
    """Server processes a test starts: SIGKILLed at its end, whatever happened."""
    started: list[ServeProcess] = []
    yield started
    for s in started:
        s.kill()


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    """``featurestream serve`` processes (logs in tmp_path), every one killed at the end."""
    procs = Processes(tmp_path)
    yield procs
    procs.close()
