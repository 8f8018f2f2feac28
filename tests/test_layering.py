"""The selector core stays pure: no web framework, no store client, no event loop."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = [
    "featurestream.selectors",
    "featurestream.stats",
    "featurestream.codec",
    "featurestream.errors",
]
FORBIDDEN = ["fastapi", "starlette", "pydantic", "redis", "asyncio", "anyio", "httpx", "uvicorn"]


def test_core_imports_no_service_dependencies() -> None:
    code = (
        "import sys\n"
        f"for m in {CORE!r}: __import__(m)\n"
        f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the core imported {out.stdout.strip()}"


def _module_imports(root: Path, package: str) -> dict[str, set[str]]:
    """Every module of ``package`` and the modules of the same package it imports.

    Imports inside functions count too: a cycle through a lazy import is still a
    cycle a reader has to hold in their head.
    """
    modules: dict[str, Path] = {}
    for path in (root / package).rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            found.update(t for t in targets if t in modules and t != name)
        graph[name] = found
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_itself_through_others() -> None:
    top = Path(__file__).resolve().parent.parent
    for root, package in (
        (top / "service", "featurestream"),
        (top / "clients", "featurestream_client"),
    ):
        graph = _module_imports(root, package)
        # A package's __init__ re-exporting its own modules is not a cycle between modules.
        for name in graph:
            graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
        assert _cycles(graph) == [], package
