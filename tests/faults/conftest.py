"""Fixtures of the fault-injection suite: server processes, and their logs on failure."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.faults.harness import Processes


@pytest.fixture
def processes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Processes]:
    """Server processes of one test; all killed at its end, their logs shown if it fails."""
    procs = Processes(tmp_path)
    request.node.fault_processes = procs
    yield procs
    procs.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    procs = getattr(item, "fault_processes", None)
    if report.failed and procs is not None and procs.servers:
        report.sections.append(("featurestream server logs", procs.logs()))
    return report
