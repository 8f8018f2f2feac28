"""Every code block of docs/client.md runs, in order, against a live server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.client.live import WS_MISSING, LiveServer, has_websocket_route

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```\s*$", re.S | re.M)
DOC_URL = "http://localhost:8000"


def blocks() -> list[tuple[str, str, int]]:
    """(language, code, first line) of each fenced block."""
    text = DOC.read_text()
    return [
        (m.group(1), m.group(2), text.count("\n", 0, m.start()) + 2) for m in FENCE.finditer(text)
    ]


def test_every_block_is_python_or_sh() -> None:
    found = blocks()
    assert len(found) >= 15
    assert {lang for lang, _, _ in found} == {"python", "sh"}
    # A stray fence would leave a block unparsed: fences come in pairs.
    assert DOC.read_text().count("```") == 2 * len(found)


@pytest.mark.skipif(not has_websocket_route(), reason=WS_MISSING)
def test_docs_examples_run(
    memory_server: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    namespace: dict[str, object] = {"__name__": "__docs__"}
    ran = 0
    for lang, code, line in blocks():
        code = code.replace(DOC_URL, memory_server.url)
        where = f"{DOC.name}:{line}"
        if lang == "python":
            exec(compile(code, where, "exec"), namespace)
        else:
            proc = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", code],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert proc.returncode == 0, f"{where}: {proc.stderr}"
        ran += 1
    assert ran == len(blocks())
    assert DOC_URL not in str(namespace.get("c"))  # the examples talked to the test server
