"""Every command and Python block of the docs and the README runs, against a live server.

Each document gets a fresh ``featurestream serve`` process (memory store) and,
when it uses ``redis-cli``, a private redis-server with the append-only file
on. Its blocks run in order, so later examples may build on earlier ones.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import RedisServer, free_port
from tests.deploy.manifests import ENV_PREFIX
from tests.docs import snippets as s

# docs/client.md is run, block by block against a live server, by its own test
# (tests/client/test_docs_examples.py), with the client's conventions.
TESTED_ELSEWHERE = {s.ROOT / "docs" / "client.md"}
DOCUMENTS = sorted(
    [
        p
        for p in [s.ROOT / "README.md", *(s.ROOT / "docs").rglob("*.md")]
        if p not in TESTED_ELSEWHERE
    ],
    key=lambda p: str(p.relative_to(s.ROOT)),
)


def _doc_id(path: Path) -> str:
    return str(path.relative_to(s.ROOT))


@pytest.fixture
def server() -> Iterator[Callable[[], str]]:
    """``featurestream serve`` on the memory store, started the first time a document needs it."""
    procs: list[tuple[subprocess.Popen[bytes], str]] = []

    def get() -> str:
        if procs:
            return procs[0][1]
        port = free_port()
        exe = shutil.which("featurestream")
        cmd = [exe] if exe else [sys.executable, "-m", "featurestream"]
        cmd += ["serve", "--port", str(port), "--log-level", "warning"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        procs.append((proc, url))
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, f"server exited with {proc.returncode}"
            try:
                if httpx.get(url + "/healthz", timeout=0.5).status_code == 200:
                    return url
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "server did not answer /healthz"
            time.sleep(0.05)

    yield get
    for proc, _ in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@pytest.fixture
def redis_port(
    redis_server_factory: Callable[..., RedisServer],
) -> Callable[[], int]:
    """Starts a private redis-server the first time a document needs one."""
    started: list[RedisServer] = []

    def get() -> int:
        if not started:
            started.append(redis_server_factory(appendonly=True))
        return started[0].port

    return get


@pytest.mark.parametrize("path", DOCUMENTS, ids=_doc_id)
def test_document_examples_run(
    path: Path,
    server: Callable[[], str],
    redis_port: Callable[[], int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    ctx = s.Context(server=server, cwd=tmp_path, monkeypatch=monkeypatch, redis_port=redis_port)
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    last_curl: int | None = None  # index in ctx.responses after the previous sh block
    for block in s.blocks(path.read_text()):
        where = f"{_doc_id(path)}:{block.line}"
        if block.language in s.SHELL_LANGUAGES:
            before = len(ctx.responses)
            for command in s.commands(block.code):
                try:
                    s.run(command, ctx)
                except AssertionError as exc:
                    raise AssertionError(f"{where}: {exc}") from exc
            last_curl = len(ctx.responses) - 1 if len(ctx.responses) > before else None
        elif block.language == "python":
            s.run_python(block.code, namespace, ctx)
            last_curl = None
        elif block.language == "json":
            documented = json.loads(block.code)
            if last_curl is not None:
                actual = json.loads(ctx.responses[last_curl].content)
                try:
                    s.assert_like(documented, actual)
                except AssertionError as exc:
                    raise AssertionError(f"{where}: documented answer differs: {exc}") from exc
            last_curl = None
        elif block.language == "yaml":
            list(yaml.safe_load_all(block.code))
        elif block.language in s.IGNORED_LANGUAGES:
            pass
        else:
            raise AssertionError(f"{where}: code block language {block.language!r} not checked")


# --------------------------------------------------------------------------- the harness


def test_commands_split_chains_and_continuations() -> None:
    code = (
        "# -> 409\n"
        "curl -s -X POST localhost:8000/x -H 'a: b' \\\n"
        "  -d '{\n  \"k\": 1}'\n"
        "python3 -m venv .venv && . .venv/bin/activate\n"
    )
    cmds = s.commands(code)
    assert [c.argv[0] for c in cmds] == ["curl", "python3", "."]
    assert cmds[0].expect_status == 409 and cmds[1].expect_status is None
    assert cmds[0].argv[-1] == '{\n  "k": 1}'


def test_commands_refuse_pipes() -> None:
    with pytest.raises(AssertionError, match="operator"):
        s.commands("curl -s localhost:8000/x | jq .\n")


def test_unknown_programs_fail(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ctx = s.Context(lambda: "http://127.0.0.1:1", tmp_path, monkeypatch, lambda: 0)
    with pytest.raises(AssertionError, match="no check for 'wget'"):
        s.run(s.commands("wget localhost:8000/healthz\n")[0], ctx)


def test_version_and_client_commands_parse(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ctx = s.Context(lambda: "http://127.0.0.1:1", tmp_path, monkeypatch, lambda: 0)
    s.run(s.commands("featurestream --version\n")[0], ctx)
    with pytest.raises(AssertionError, match="cannot parse"):
        s.run(s.commands("featurestream selected\n")[0], ctx)


def test_unknown_settings_fail(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ctx = s.Context(lambda: "http://127.0.0.1:1", tmp_path, monkeypatch, lambda: 0)
    with pytest.raises(AssertionError, match="not a setting"):
        s.run(s.commands("FEATURESTREAM_THREADS=4 featurestream serve\n")[0], ctx)
    with pytest.raises(AssertionError, match="invalid settings"):
        s.run(s.commands("featurestream serve --workers 2\n")[0], ctx)


def test_kubectl_references_must_exist(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ctx = s.Context(lambda: "http://127.0.0.1:1", tmp_path, monkeypatch, lambda: 0)
    s.run(s.commands("kubectl scale deployment/featurestream --replicas=3\n")[0], ctx)
    with pytest.raises(AssertionError, match="no Deployment named"):
        s.run(s.commands("kubectl scale deployment/featurestreams --replicas=3\n")[0], ctx)


def test_assert_like_compares_shape_and_values() -> None:
    s.assert_like({"a": 0.976, "t_at": "x"}, {"a": 0.9761904, "t_at": "y"})
    with pytest.raises(AssertionError):
        s.assert_like({"a": 0.9}, {"a": 0.97})
    with pytest.raises(AssertionError):
        s.assert_like({"a": 1}, {"a": 1, "b": 2})
    with pytest.raises(AssertionError):
        s.assert_like(["x"], ["x", "y"])
