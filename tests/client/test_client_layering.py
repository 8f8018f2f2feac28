"""The client package stands alone: it never imports the server, nor its optional extras."""

from __future__ import annotations

import subprocess
import sys


def test_client_imports_neither_the_server_nor_optional_packages() -> None:
    code = (
        "import sys\n"
        "import featurestream_client\n"
        "from featurestream_client import Client, AsyncClient, RetryPolicy\n"
        "bad = [m for m in ('featurestream', 'pandas', 'scipy', 'sklearn', 'fastapi',"
        " 'pydantic', 'redis', 'starlette') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the client imported {out.stdout.strip()}"


def test_the_sklearn_adapter_is_imported_on_demand() -> None:
    code = (
        "import sys, featurestream_client as fc\n"
        "assert 'sklearn' not in sys.modules\n"
        "cls = fc.FeatureStreamSelector\n"
        "assert 'sklearn' in sys.modules and 'featurestream' not in sys.modules\n"
        "print(cls.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "FeatureStreamSelector"


def test_no_module_of_the_client_names_the_server_package() -> None:
    from pathlib import Path

    import featurestream_client

    root = Path(featurestream_client.__file__).parent
    for path in root.glob("*.py"):
        text = path.read_text()
        assert "import featurestream\n" not in text and "from featurestream." not in text, path
