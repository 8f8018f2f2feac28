"""One version: the server package's ``__version__`` is the source of every other one."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import featurestream
import featurestream_client

ROOT = Path(__file__).resolve().parents[2]


def test_the_distribution_takes_its_version_from_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    source = project["tool"]["setuptools"]["dynamic"]["version"]
    assert source == {"attr": "featurestream.__version__"}


def test_the_installed_metadata_agrees_with_the_package() -> None:
    installed = importlib.metadata.version("featurestream")
    assert installed == featurestream.__version__, (
        f"installed metadata says {installed}, the package {featurestream.__version__}: "
        'reinstall (pip install -e ".[test]")'
    )


def test_the_client_reports_the_same_version() -> None:
    assert featurestream_client.__version__ == featurestream.__version__


def test_the_standalone_client_distribution_has_the_same_version() -> None:
    project = tomllib.loads((ROOT / "clients" / "pyproject.toml").read_text())
    assert project["project"]["version"] == featurestream.__version__
