"""The selector core stays pure: no web framework, no store client, no event loop."""

from __future__ import annotations

import subprocess
import sys

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
