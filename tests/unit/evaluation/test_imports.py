"""The evaluation statistics stay pure: no web framework, store client or event loop."""

from __future__ import annotations

import subprocess
import sys

SERVICE = ["fastapi", "starlette", "pydantic", "redis", "anyio", "httpx", "uvicorn"]


def imported_after(module: str, names: list[str]) -> list[str]:
    code = (
        "import sys\n"
        f"__import__({module!r})\n"
        f"print(','.join(m for m in {names!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def test_stability_and_compare_import_no_service_dependencies() -> None:
    assert imported_after("featurestream.evaluation", [*SERVICE, "asyncio", "sklearn"]) == []


def test_crossval_imports_no_service_dependencies() -> None:
    # asyncio is not checked here: scikit-learn's joblib imports it; we never run a loop.
    assert imported_after("featurestream.evaluation.crossval", SERVICE) == []
