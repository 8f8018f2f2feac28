"""The README's quick-start environment runs every example of docs/client.md, and the
benchmark says at once how to start the Redis it needs (issue 16, point 9)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from tests.support import free_port

ROOT = Path(__file__).resolve().parents[2]
# Import names whose distribution has another name.
DISTRIBUTION = {"sklearn": "scikit-learn", "yaml": "pyyaml"}
STANDARD = set(sys.stdlib_module_names)
OWN = {"featurestream", "featurestream_client"}


def _requirement_names(specs: list[str]) -> set[str]:
    return {re.split(r"[<>=\[;! ]", spec, maxsplit=1)[0].lower() for spec in specs}


def _quick_start_install() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"pip install -e (\S+)", section)
    assert found, "the quick start installs the project"
    return found.group(1).strip("'\"")


def test_quick_start_installs_what_the_client_examples_import() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    target = _quick_start_install()
    extras = re.findall(r"\[(.*)\]", target)
    installed = _requirement_names(project["dependencies"])
    for extra in extras[0].split(",") if extras else []:
        installed |= _requirement_names(project["optional-dependencies"][extra.strip()])
    code = "\n".join(
        m.group(1)
        for m in re.finditer(r"```python\n(.*?)```", (ROOT / "docs/client.md").read_text(), re.S)
    )
    imported = {
        m.group(1).split(".")[0] for m in re.finditer(r"^\s*(?:from|import)\s+([\w.]+)", code, re.M)
    }
    needed = {DISTRIBUTION.get(name, name) for name in imported - STANDARD - OWN}
    assert "pandas" in needed  # the examples do use DataFrames
    assert needed <= installed, f"{sorted(needed - installed)} not installed by {target}"


def test_bench_quick_without_redis_fails_fast_saying_how_to_start_one() -> None:
    store = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "featurestream", "bench", "--quick", "--store", store],
        capture_output=True,
        text=True,
        timeout=60,
    )
    elapsed = time.monotonic() - started
    assert done.returncode != 0
    assert elapsed < 5, elapsed
    assert "no Redis answers at " + store in done.stderr
    assert "redis-server" in done.stderr and "--store memory://" in done.stderr
    assert "Traceback" not in done.stderr
