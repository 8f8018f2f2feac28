"""The image docker/Dockerfile builds, without a Docker engine: its install steps, replayed.

The builder's COPY steps are replayed into a temporary context (only what the
dockerignore keeps), the featurestream wheel is built from it as the builder's
``pip wheel`` does, and installed into a fresh virtual environment with the
extras the runtime stage's ``pip install`` names. The wheels of the
dependencies are not rebuilt: the fresh environment reads them from this one's
site-packages through a ``.pth`` line, which adds the directory but runs none
of its own ``.pth`` files, so the editable checkout of the repository stays out
and every featurestream module comes from the wheel.
"""

from __future__ import annotations

import argparse
import os
import site
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from featurestream_client.cli import add_commands
from tests.deploy import manifests as m
from tests.support import free_port

pytestmark = pytest.mark.slow


def builder_run(command: str) -> str:
    (run,) = [r for r in m.dockerfile()[1][0].all("RUN") if f"pip {command}" in r]
    return run


def runtime_run(command: str) -> str:
    (run,) = [r for r in m.dockerfile()[1][-1].all("RUN") if f"pip {command}" in r]
    return run


def clean_env() -> dict[str, str]:
    drop = ("FEATURESTREAM_", "PYTHONPATH", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def client_commands() -> set[str]:
    sub = argparse.ArgumentParser().add_subparsers()
    add_commands(sub)
    return set(sub.choices)


class Image:
    def __init__(self, root: Path, wheel: Path) -> None:
        self.root = root
        self.wheel = wheel
        self.bin = root / "venv" / "bin"

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=clean_env(),
            cwd=self.root,
        )


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    root = tmp_path_factory.mktemp("image")
    context = root / "src"
    context.mkdir()
    m.build_context_copy(context)
    requirement = m.pip_requirement(builder_run("wheel"), "wheel")
    project = requirement.split("[")[0]
    wheels = root / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = ["wheel", "--no-deps", "--no-build-isolation", "--no-index", "--wheel-dir"]
    subprocess.run(
        [*pip, *build, str(wheels), str(context / project)],
        check=True,
        timeout=300,
        env=clean_env(),
    )
    (wheel,) = wheels.glob("*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (fresh,) = venv.glob("lib/python*/site-packages")
    (fresh / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    extras = ",".join(sorted(m.extras_of(m.pip_requirement(runtime_run("install"), "install"))))
    target = ["--python", str(venv / "bin" / "python"), "install", "--no-deps", "--no-index"]
    subprocess.run(
        [*pip, *target, f"{wheel}[{extras}]" if extras else str(wheel)],
        check=True,
        timeout=300,
        env=clean_env(),
    )
    return Image(root, wheel)


def test_the_runtime_installs_the_client_extra_the_builder_built_wheels_for() -> None:
    built = m.extras_of(m.pip_requirement(builder_run("wheel"), "wheel"))
    installed = m.pip_requirement(runtime_run("install"), "install")
    assert installed.split("[")[0] == "featurestream"
    assert "client" in m.extras_of(installed), "the image must carry the client's dependencies"
    # --no-index: every wheel the runtime needs was built by the builder.
    assert m.extras_of(installed) <= built


def test_the_context_keeps_the_client_package_and_nothing_else_of_clients() -> None:
    assert m.dockerignore_allows("clients/featurestream_client/cli.py")
    assert m.dockerignore_allows("clients/featurestream_client/py.typed")
    assert not m.dockerignore_allows("clients/featurestream_client/__pycache__")
    assert not m.dockerignore_allows("clients/pyproject.toml")


def test_the_wheel_holds_the_server_and_the_client_and_declares_the_extra(image: Image) -> None:
    with zipfile.ZipFile(image.wheel) as wheel:
        names = wheel.namelist()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = wheel.read(metadata).decode()
    assert "featurestream/_entry.py" in names
    assert "featurestream_client/cli.py" in names
    assert "featurestream_client/py.typed" in names
    assert "Provides-Extra: client" in text.splitlines()
    # The web page and the Swagger UI it serves itself (package data).
    static = "featurestream/api/ui/static/"
    for name in ("index.html", "app.js", "app.css", "favicon.svg"):
        assert static + name in names
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "LICENSE"):
        assert f"{static}vendor/swagger-ui/{name}" in names


def test_the_packages_come_from_the_wheel(image: Image) -> None:
    out = image.run(
        "python",
        "-c",
        "import featurestream, featurestream_client; "
        "print(featurestream.__file__); print(featurestream_client.__file__)",
    )
    assert out.returncode == 0, out.stderr
    for line in out.stdout.split():
        assert Path(line).is_relative_to(image.root / "venv"), line


def test_the_command_lists_the_client_commands(image: Image) -> None:
    out = image.run("featurestream", "--help")
    assert out.returncode == 0, out.stderr
    for command in {"serve", "bench", *client_commands()}:
        assert command in out.stdout, f"featurestream --help does not list {command}"
    for command in client_commands():
        helped = image.run("featurestream", command, "--help")
        assert helped.returncode == 0, helped.stderr


def test_client_commands_work_against_a_server_run_from_the_image(image: Image) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [str(image.bin / "featurestream"), "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=clean_env(),
        cwd=image.root,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert server.poll() is None, f"the server exited with {server.returncode}"
            try:
                if httpx.get(url + "/healthz", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        else:
            pytest.fail("the server did not answer /healthz")
        for path in ("/ui/", "/ui/app.js", "/docs", "/ui/vendor/swagger-ui/swagger-ui-bundle.js"):
            assert httpx.get(url + path, timeout=10).status_code == 200, path
        data = image.root / "small.csv"
        rows = [f"{i},{(i * 7) % 5},{i % 2}" for i in range(20)]
        data.write_text("a,b,y\n" + "\n".join(rows) + "\n")
        replay = image.run(
            "featurestream",
            "replay",
            str(data),
            "--algorithm",
            "saola",
            "--target",
            "y",
            "--stream-id",
            "in-image",
            "--quiet",
            "--url",
            url,
        )
        assert replay.returncode == 0, replay.stderr
        listed = image.run("featurestream", "streams", "--json", "--url", url)
        assert listed.returncode == 0, listed.stderr
        assert "in-image" in listed.stdout
    finally:
        server.terminate()
        server.wait(15)
