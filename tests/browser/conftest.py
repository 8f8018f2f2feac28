"""Headless Chromium (the OS packages) driven by Selenium, against live servers.

Chromium and its driver come from the OS (Debian: ``apt-get install -y chromium
chromium-driver``; ``.ci/run`` installs them when missing). Without them the
tests fail, saying so: they are part of the suite, not optional. Selenium is
given both paths, so it never looks for (or downloads) a browser or a driver.

Screenshots go to ``$FEATURESTREAM_TEST_ARTEFACTS/browser`` when that variable
is set, else to a directory under pytest's temporary directory; the path is
printed at the end of the run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = os.environ.get("FEATURESTREAM_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("FEATURESTREAM_CHROMEDRIVER", "/usr/bin/chromedriver")
INSTALL_HINT = (
    "the browser tests need Chromium and its WebDriver from the OS packages: "
    "apt-get install -y chromium chromium-driver (or set FEATURESTREAM_CHROMIUM and "
    "FEATURESTREAM_CHROMEDRIVER to their paths)"
)

_artefacts: list[Path] = []


def _executable(path: str) -> bool:
    return Path(path).is_file() and os.access(path, os.X_OK)


@pytest.fixture(scope="session")
def artefacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go."""
    root = os.environ.get("FEATURESTREAM_TEST_ARTEFACTS")
    if root:
        path = Path(root) / "browser"
        path.mkdir(parents=True, exist_ok=True)
    else:
        path = tmp_path_factory.mktemp("browser-artefacts")
    _artefacts.append(path)
    return path


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    """A fresh headless Chromium (its own profile: empty session storage)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not _executable(p)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found: {INSTALL_HINT}", pytrace=False)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in containers
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for path in _artefacts:
        shots = sorted(p.name for p in path.glob("*.png"))
        if shots:
            terminalreporter.write_line(f"browser screenshots ({len(shots)}): {path}")
