"""Readers of the deployment files: docker-compose.yml, the Dockerfile and the kustomizations.

The Kubernetes manifests are rendered by a small subset of kustomize (resources,
config/secret generators, images, labels), enough to check what the service
will see. A kustomization using any other feature fails loudly here, so the
checks never silently read less than kubectl would apply.
"""

from __future__ import annotations

import base64
import fnmatch
import re
import shlex
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from featurestream.api import create_app
from featurestream.cli import build_parser
from featurestream.config import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DEPLOY = ROOT / "deploy"
OVERLAYS = ("in-cluster-redis", "external-redis")
ENV_PREFIX = "FEATURESTREAM_"


# --------------------------------------------------------------------------- the service


def setting_fields() -> set[str]:
    """Names of every setting, as ``FEATURESTREAM_<NAME>`` suffixes (lower case)."""
    return set(Settings.model_fields)


def setting_name(env_var: str) -> str | None:
    """The Settings field an environment variable sets, None when it names none."""
    if not env_var.startswith(ENV_PREFIX):
        return None
    name = env_var[len(ENV_PREFIX) :].lower()
    return name if name in Settings.model_fields else None


@cache
def get_routes() -> frozenset[str]:
    """Paths the app answers with GET.

    ``app.routes`` lists the app's own routes; routes of included routers are
    taken from the OpenAPI schema, which every FastAPI version builds from the
    full route tree (newer versions wrap included routers in ``app.routes``).
    """
    app = create_app(Settings())
    out = {
        route.path
        for route in app.routes
        if "GET" in (getattr(route, "methods", None) or ()) and hasattr(route, "path")
    }
    out |= {path for path, ops in app.openapi()["paths"].items() if "get" in ops}
    return frozenset(out)


def get_status(path: str) -> int:
    """Status of GET ``path`` on a fresh app (memory store, lifespan run)."""
    from starlette.testclient import TestClient

    with TestClient(create_app(Settings())) as client:
        return int(client.get(path).status_code)


def settings_from_env(env: dict[str, str], monkeypatch: Any) -> Settings:
    """Settings as a process with exactly this FEATURESTREAM_ environment would build them."""
    import os

    for key in list(os.environ):
        if key.startswith(ENV_PREFIX):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Settings()


def serve_port(args: list[str], env: dict[str, str]) -> int:
    """The port ``featurestream <args>`` listens on with this environment."""
    parsed = build_parser().parse_args(args)
    assert parsed.command == "serve", args
    if parsed.port is not None:
        return int(parsed.port)
    if f"{ENV_PREFIX}PORT" in env:
        return int(env[f"{ENV_PREFIX}PORT"])
    return int(Settings.model_fields["port"].default)


# --------------------------------------------------------------------------- compose

_INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::?-(?P<default>[^}]*))?\}")


def interpolate(value: str, environ: dict[str, str] | None = None) -> str:
    """Compose's ``${VAR:-default}`` with ``environ`` (default: nothing) set in the shell."""
    environ = environ or {}

    def sub(m: re.Match[str]) -> str:
        if environ.get(m.group("name")):
            return environ[m.group("name")]
        if m.group("default") is None:
            raise AssertionError(f"{m.group(0)} has no default: compose would need it set")
        return m.group("default")

    return _INTERPOLATION.sub(sub, value)


@cache
def compose(name: str = "docker-compose.yml") -> dict[str, Any]:
    return dict(yaml.safe_load((DOCKER / name).read_text()))


def compose_variables() -> set[str]:
    """The shell variables the compose files interpolate (``${NAME...}``)."""
    return {
        match.group("name")
        for path in DOCKER.glob("docker-compose*.yml")
        for match in _INTERPOLATION.finditer(path.read_text())
    }


def compose_env(service: str) -> dict[str, str]:
    env = compose()["services"][service].get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: interpolate(str(v)) for k, v in env.items()}


# --------------------------------------------------------------------------- Dockerfile


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [arg for kw, arg in self.instructions if kw == keyword]


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) pairs, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        keyword, _, rest = buf.partition(" ")
        out.append((keyword.upper(), rest.strip()))
        buf = ""
    assert not buf, "Dockerfile ends inside a continued line"
    return out


@cache
def dockerfile() -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages)."""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for keyword, rest in dockerfile_instructions((DOCKER / "Dockerfile").read_text()):
        if keyword == "FROM":
            parts = rest.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], parts[0])
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(base, name))
        elif not stages:
            assert keyword == "ARG", f"{keyword} before the first FROM"
            key, _, default = rest.partition("=")
            args[key] = default
        else:
            stages[-1].instructions.append((keyword, rest))
    return args, stages


def env_instruction(arg: str) -> dict[str, str]:
    """``ENV A=1 B=2`` (the key=value form) as a dict."""
    out = {}
    for token in shlex.split(arg):
        key, sep, value = token.partition("=")
        assert sep, f"ENV {arg!r}: use the KEY=value form"
        out[key] = value
    return out


def exec_form(arg: str) -> list[str]:
    """The JSON (exec) form of CMD/ENTRYPOINT/HEALTHCHECK CMD."""
    import json

    value = json.loads(arg)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), arg
    return value


def dockerignore_allows(path: str) -> bool:
    """Whether docker/Dockerfile.dockerignore keeps ``path`` in the build context."""
    keep = True
    for raw in (DOCKER / "Dockerfile.dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(
            fnmatch.fnmatchcase(p, pattern) or fnmatch.fnmatchcase(p, pattern.replace("**/", ""))
            for p in prefixes
        ):
            keep = negate
    return keep


def builder_copies() -> list[tuple[str, str]]:
    """(source, destination) of each COPY of the builder stage (destinations under WORKDIR)."""
    builder = dockerfile()[1][0]
    out = []
    for arg in builder.all("COPY"):
        parts = [p for p in arg.split() if not p.startswith("--")]
        *sources, dest = parts
        if len(sources) == 1 and dest not in ("./", "."):
            out.append((sources[0], dest))
        else:
            out += [(src, f"./{Path(src).name}") for src in sources]
    return out


def build_context_copy(target: Path) -> None:
    """The builder's WORKDIR after its COPY steps: what the context keeps, where COPY puts it."""
    for src, dest in builder_copies():
        origin = ROOT / src
        files = [origin] if origin.is_file() else sorted(origin.rglob("*"))
        for path in files:
            rel = path.relative_to(ROOT).as_posix()
            if not path.is_file() or not dockerignore_allows(rel):
                continue
            inside = path.relative_to(origin) if origin.is_dir() else Path()
            out = (target / dest / inside).resolve()
            if origin.is_file() and dest.endswith("/"):
                out = (target / dest / path.name).resolve()
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(path.read_bytes())


def pip_requirement(run: str, command: str) -> str:
    """The one requirement (path or name, with extras) a ``pip <command>`` RUN line names."""
    words = shlex.split(run[run.index(f"pip {command}") :])[2:]
    reqs = [w for w in words if not w.startswith("-") and "=" not in w.split("[")[0]]
    # --wheel-dir DIR, --find-links DIR: options with a separate value.
    values = {words[i + 1] for i, w in enumerate(words[:-1]) if w in ("--wheel-dir", "-w")}
    reqs = [r for r in reqs if r not in values]
    assert len(reqs) == 1, f"pip {command} names {reqs}: expected one requirement"
    return reqs[0]


def extras_of(requirement: str) -> set[str]:
    match = re.fullmatch(r"([^\[]+)(?:\[([^\]]*)\])?", requirement)
    assert match, requirement
    return {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}


# --------------------------------------------------------------------------- kustomize


def _load_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _env_file(path: Path) -> dict[str, str]:
    out = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"{path.name}: {raw!r} is not KEY=value"
            out[key] = value
    return out


_KNOWN_KEYS = {
    "apiVersion",
    "kind",
    "resources",
    "configMapGenerator",
    "secretGenerator",
    "images",
    "labels",
}


def render(directory: Path) -> list[dict[str, Any]]:
    """The resources of a kustomization, generated names without their hash suffix."""
    kz = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kz) - _KNOWN_KEYS
    assert not unknown, f"{directory}: kustomize features this test does not model: {unknown}"
    docs: list[dict[str, Any]] = []
    for entry in kz.get("resources", []):
        target = (directory / entry).resolve()
        docs += render(target) if target.is_dir() else _load_docs(target)
    for gen in kz.get("configMapGenerator", []):
        data: dict[str, str] = {}
        for env in gen.get("envs", []):
            data |= _env_file(directory / env)
        for f in gen.get("files", []):
            data[Path(f).name] = (directory / f).read_text()
        for lit in gen.get("literals", []):
            key, _, value = lit.partition("=")
            data[key] = value
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": gen["name"]},
                "data": data,
            }
        )
    for gen in kz.get("secretGenerator", []):
        assert set(gen) <= {"name", "literals", "files", "type"}, gen
        data = {}
        for lit in gen.get("literals", []):
            key, _, value = lit.partition("=")
            data[key] = base64.b64encode(value.encode()).decode()
        for name in gen.get("files", []):
            data[Path(name).name] = base64.b64encode((directory / name).read_bytes()).decode()
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": gen["name"]},
                "type": gen.get("type", "Opaque"),
                "data": data,
            }
        )
    for label in kz.get("labels", []):
        for d in docs:
            d.setdefault("metadata", {}).setdefault("labels", {}).update(label["pairs"])
    for image in kz.get("images", []):
        for d in docs:
            for c in _containers(d):
                if c["image"].split(":")[0] == image["name"]:
                    c["image"] = f"{image.get('newName', image['name'])}:{image['newTag']}"
    return docs


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    return list(spec.get("containers", [])) + list(spec.get("initContainers", []))


def overlay(name: str) -> list[dict[str, Any]]:
    return render(DEPLOY / "overlays" / name)


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return _containers(doc)


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())
