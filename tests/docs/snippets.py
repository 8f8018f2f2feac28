"""Code blocks of the Markdown documentation, and how to check each kind of command.

The docs are executable: every ``sh`` block is split into commands and each
command is checked by the handler of its program, every ``python`` block is
run, and a ``json`` block that follows a block of curl commands is compared
with the answer the last of them got. Conventions the docs follow:

* ``localhost:8000`` is the server; the tests rewrite it to a live server;
* a comment ``# -> 409`` before a curl command gives the status it must get
  (otherwise any 2xx);
* a program without a handler here fails the test, so a new kind of command
  cannot slip into the docs unchecked.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import shlex
import shutil
import subprocess
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from pydantic import ValidationError

from featurestream._entry import build_parser
from featurestream.config import Settings
from tests.deploy import manifests as m

ROOT = m.ROOT
DOC_HOSTS = ("localhost:8000", "127.0.0.1:8000")
SHELL_LANGUAGES = {"sh", "bash", "shell"}
IGNORED_LANGUAGES = {"", "text", "console-output"}


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int
    prose_before: str  # the text between the previous block and this one


def blocks(text: str) -> list[Block]:
    """Fenced code blocks (```lang ... ```) in order."""
    out: list[Block] = []
    lines = text.splitlines()
    i = 0
    prose: list[str] = []
    while i < len(lines):
        match = re.match(r"^```\s*([\w+-]*)\s*$", lines[i])
        if not match:
            prose.append(lines[i])
            i += 1
            continue
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        assert i < len(lines), f"unclosed code block at line {start + 1}"
        out.append(
            Block(match.group(1).lower(), "\n".join(body) + "\n", start + 1, "\n".join(prose))
        )
        prose = []
        i += 1
    return out


@dataclass(frozen=True)
class Command:
    argv: list[str]
    expect_status: int | None
    text: str


def _complete(buffer: str) -> bool:
    if buffer.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(buffer, comments=True)
    except ValueError:  # an open quote: the command goes on on the next line
        return False
    return True


def commands(code: str) -> list[Command]:
    """The commands of a shell block: continuations joined, ``&&`` chains split."""
    out: list[Command] = []
    expect: int | None = None
    buffer = ""
    for line in code.splitlines():
        if not buffer:
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith("#"):
                status = re.match(r"#\s*->\s*(\d{3})\b", stripped)
                if status:
                    expect = int(status.group(1))
                continue
        buffer += line + "\n"
        if not _complete(buffer):
            continue
        text = buffer.replace("\\\n", " ")
        buffer = ""
        lexer = shlex.shlex(text, posix=True, punctuation_chars="&|;<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
        part: list[str] = []
        for token in [*tokens, "&&"]:
            # The one pipe the docs use: a manifest printed by kubectl, into kubectl apply
            # (each side checked as a command of its own).
            if token == "|" and part[-3:] != ["--dry-run=client", "-o", "yaml"]:
                raise AssertionError(f"shell operator '|' in {text.strip()!r}: keep docs simple")
            if token in ("&&", "|"):
                assert part, f"empty command in {text!r}"
                out.append(Command(part, expect, text.strip()))
                part = []
            elif set(token) <= set("&|;<>"):
                raise AssertionError(
                    f"shell operator {token!r} in {text.strip()!r}: keep docs simple"
                )
            else:
                part.append(token)
        expect = None
    assert not buffer.strip(), f"unfinished command: {buffer!r}"
    return out


# --------------------------------------------------------------------------- comparing


def assert_like(documented: Any, actual: Any, where: str = "$") -> None:
    """The documented JSON has the shape and values of the actual answer.

    Keys ending in ``_at`` (timestamps) may differ; numbers agree to the
    precision the docs print them with (three decimals).
    """
    if isinstance(documented, dict):
        assert isinstance(actual, dict), f"{where}: object documented, got {actual!r}"
        assert set(documented) == set(actual), (
            f"{where}: keys {sorted(documented)} documented, got {sorted(actual)}"
        )
        for key, value in documented.items():
            if key.endswith("_at"):
                continue
            assert_like(value, actual[key], f"{where}.{key}")
    elif isinstance(documented, list):
        assert isinstance(actual, list) and len(actual) == len(documented), (
            f"{where}: {len(documented)} items documented, got {actual!r}"
        )
        for i, (d, a) in enumerate(zip(documented, actual, strict=True)):
            assert_like(d, a, f"{where}[{i}]")
    elif isinstance(documented, bool) or documented is None or isinstance(documented, str):
        assert documented == actual, f"{where}: {documented!r} documented, got {actual!r}"
    elif isinstance(documented, (int, float)):
        assert isinstance(actual, (int, float)) and not isinstance(actual, bool)
        assert math.isclose(documented, actual, abs_tol=5e-4 * max(1.0, abs(documented))), (
            f"{where}: {documented!r} documented, got {actual!r}"
        )
    else:  # pragma: no cover - JSON has no other types
        raise AssertionError(f"{where}: unexpected {documented!r}")


# --------------------------------------------------------------------------- context


@dataclass
class Context:
    """What the commands of one document run against."""

    server: Callable[[], str]  # the base URL of the live server, started on first use
    cwd: Path
    monkeypatch: pytest.MonkeyPatch
    redis_port: Callable[[], int]
    responses: list[httpx.Response] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return self.server()


Handler = Callable[[list[str], Command, Context], None]
HANDLERS: dict[str, Handler] = {}


def handles(*names: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for name in names:
            HANDLERS[name] = fn
        return fn

    return register


def run(command: Command, ctx: Context) -> None:
    argv = list(command.argv)
    env: dict[str, str] = {}
    while argv and re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]):
        key, _, value = argv.pop(0).partition("=")
        env[key] = value
    compose = argv[:2] == ["docker", "compose"]
    for key in env:
        assert (
            m.setting_name(key)
            or key in client_env_names()
            or (compose and key in m.compose_variables())
        ), f"{key} is not a setting ({command.text})"
    assert argv, command.text
    handler = HANDLERS.get(argv[0])
    assert handler is not None, (
        f"no check for {argv[0]!r} in {command.text!r}: add a handler in tests/docs/snippets.py"
    )
    with _environment(env, ctx.monkeypatch):
        handler(argv, command, ctx)


@contextlib.contextmanager
def _environment(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with monkeypatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        yield


def _settings(**overrides: Any) -> Settings:
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:  # pragma: no cover - the message is the point
        raise AssertionError(f"invalid settings {overrides}: {exc}") from exc


# --------------------------------------------------------------------------- curl


@handles("curl")
def _curl(argv: list[str], command: Command, ctx: Context) -> None:
    method: str | None = None
    headers: dict[str, str] = {}
    data: bytes | None = None
    url: str | None = None
    retries = 0
    args = argv[1:]
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-s", "-S", "-sS", "--silent", "--show-error", "-i", "--include", "-f", "--fail"):
            pass
        elif a in ("-X", "--request"):
            i += 1
            method = args[i]
        elif a in ("-H", "--header"):
            i += 1
            key, _, value = args[i].partition(":")
            headers[key.strip()] = value.strip()
        elif a in ("-d", "--data", "--data-raw", "--data-binary"):
            i += 1
            raw = args[i]
            if raw.startswith("@") and a != "--data-raw":
                data = (ctx.cwd / raw[1:]).read_bytes()
            else:
                data = raw.encode()
        elif a == "--retry":
            i += 1
            retries = int(args[i])
        elif a.startswith("-"):
            raise AssertionError(f"curl option {a!r} is not modelled ({command.text})")
        else:
            assert url is None, f"two URLs in {command.text!r}"
            url = a
        i += 1
    assert url, command.text
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    assert parts.netloc in DOC_HOSTS, f"docs talk to localhost:8000, not {parts.netloc}"
    target = ctx.base_url + url.split(parts.netloc, 1)[1]
    if data is not None and not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = "application/x-www-form-urlencoded"  # what curl sends
    method = method or ("POST" if data is not None else "GET")
    response = httpx.request(method, target, headers=headers, content=data, timeout=30)
    # --retry N: curl's transient answers (408, 429, 5xx but 501) again, after 1 s, 2 s, ...
    for attempt in range(retries):
        if response.status_code not in (408, 429, 500, 502, 503, 504):
            break
        time.sleep(2**attempt)
        response = httpx.request(method, target, headers=headers, content=data, timeout=30)
    if command.expect_status is not None:
        assert response.status_code == command.expect_status, (
            f"{command.text}\n-> {response.status_code} {response.text[:500]}"
        )
    else:
        assert 200 <= response.status_code < 300, (
            f"{command.text}\n-> {response.status_code} {response.text[:500]}"
        )
    ctx.responses.append(response)


# --------------------------------------------------------------------------- featurestream


def _bench_options(subcommand: list[str]) -> set[str]:
    """The options of ``featurestream bench`` (``subcommand``: ["drift"], or [])."""
    from featurestream.bench import main as bench_main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        bench_main([*subcommand, "--help"])
    return set(re.findall(r"(--[a-z][a-z-]*)", out.getvalue()))


def client_env_names() -> set[str]:
    """Environment variables the command line itself reads (server URL, API key, ...)."""
    import featurestream.cli as cli
    import featurestream_client.cli as client_cli

    source = Path(cli.__file__).read_text() + Path(client_cli.__file__).read_text()
    return set(re.findall(r"os\.environ\.get\(\s*\"(FEATURESTREAM_\w+)\"", source))


@handles("featurestream")
def _featurestream(argv: list[str], command: Command, ctx: Context) -> None:
    if argv[1:2] == ["bench"]:
        known = _bench_options([a for a in argv[2:3] if not a.startswith("-")])
        for token in argv[2:]:
            if token.startswith("--"):
                assert token.split("=")[0] in known, f"featurestream bench has no {token}"
        return
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            args = build_parser().parse_args(argv[1:])
    except SystemExit as exc:
        if exc.code == 0 and {"--version", "--help", "-h"} & set(argv):
            return
        raise AssertionError(f"featurestream cannot parse {command.text!r}") from exc
    if args.command == "serve":
        _settings(
            host=args.host,
            port=args.port,
            store_url=args.store,
            workers=args.workers,
            log_level=args.log_level,
        )
        return
    if "--follow" in argv:
        return  # runs until interrupted: parsing it is the check
    # A client command: run it against the live server.
    from featurestream._entry import main

    rewritten = [
        a.replace("http://localhost:8000", ctx.base_url).replace(
            "http://127.0.0.1:8000", ctx.base_url
        )
        for a in argv[1:]
    ]
    out = io.StringIO()
    with ctx.monkeypatch.context() as mp:
        mp.setenv("FEATURESTREAM_URL", ctx.base_url)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(rewritten)
    assert code == 0, f"{command.text} exited {code}: {out.getvalue()[-500:]}"


@handles("python", "python3")
def _python(argv: list[str], command: Command, ctx: Context) -> None:
    if argv[1:3] == ["-m", "venv"]:
        assert len(argv) == 4, command.text
    elif argv[1:3] == ["-m", "pytest"]:
        pass
    elif argv[1:3] == ["-m", "featurestream"]:
        _featurestream(["featurestream", *argv[3:]], command, ctx)
    elif argv[1:3] == ["-m", "tests.fuzz.bodies"]:
        # The long fuzz run takes minutes: its arguments must parse, the short run runs it.
        from tests.fuzz.bodies import build_parser

        build_parser().parse_args(argv[3:])
    elif argv[1] == "docs/generate.py":
        assert (ROOT / argv[1]).is_file()
        assert set(argv[2:]) <= {"--check"}, command.text
    else:
        raise AssertionError(f"python command not modelled: {command.text}")


@handles(".", "source")
def _activate(argv: list[str], command: Command, ctx: Context) -> None:
    assert len(argv) == 2 and argv[1].endswith("/bin/activate"), command.text


@handles("pip")
def _pip(argv: list[str], command: Command, ctx: Context) -> None:
    args = [a for a in argv[1:] if a not in ("-q", "--quiet")]
    assert args[:2] == ["install", "-e"] and len(args) == 3, f"pip usage: {command.text}"
    match = re.fullmatch(r"\.(?:\[([\w,]+)\])?", args[2])
    assert match, f"install the checkout, not {args[2]!r}"
    extras = (match.group(1) or "").split(",") if match.group(1) else []
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for extra in extras:
        assert extra in declared.get("optional-dependencies", {}), f"no extra {extra!r}"


# --------------------------------------------------------------------------- docker


def _image() -> str:
    return str(m.compose()["services"]["featurestream"]["image"])


@handles("docker")
def _docker(argv: list[str], command: Command, ctx: Context) -> None:
    if argv[1] == "compose":
        assert argv[2] == "-f", "name the compose file: docker compose -f docker/docker-compose.yml"
        assert (ROOT / argv[3]).resolve() == m.DOCKER / "docker-compose.yml", argv[3]
        at = 4
        while argv[at] == "-f":  # override files, on top of the main one
            override = (ROOT / argv[at + 1]).resolve()
            assert override.parent == m.DOCKER and override.is_file(), argv[at + 1]
            assert set(m.compose(override.name)["services"]) <= set(m.compose()["services"])
            at += 2
        sub, rest = argv[at], argv[at + 1 :]
        services = set(m.compose()["services"])
        allowed = {"up": {"-d", "--build"}, "down": {"-v"}, "ps": set(), "pull": set()}
        if sub in allowed:
            assert set(rest) <= allowed[sub], command.text
        elif sub in ("logs", "restart", "stop"):
            assert set(rest) <= services | {"-f"}, command.text
        elif sub == "exec":
            assert rest[0] in services, command.text
            if rest[1] == "redis-cli":
                _redis_cli(rest[1:], command, ctx)
            elif rest[1] == "featurestream":
                # The image holds the client: its commands run inside (the server's
                # own URL, http://127.0.0.1:8000, is the default).
                parsed = build_parser().parse_args(rest[2:])
                assert parsed.command not in ("serve", "bench"), command.text
            else:
                raise AssertionError(f"docker compose exec not modelled: {command.text}")
        else:
            raise AssertionError(f"docker compose {sub} not modelled: {command.text}")
    elif argv[1] == "build":
        args = argv[2:]
        assert args[args.index("-f") + 1] == "docker/Dockerfile"
        assert args[args.index("-t") + 1] == _image()
        assert args[-1] == ".", "the build context is the repository root"
    elif argv[1] == "run":
        args = argv[2:]
        env: dict[str, str] = {}
        i = 0
        while args[i].startswith("-"):
            if args[i] == "--rm":
                i += 1
            elif args[i] == "-p":
                # [address:]published:container
                container = args[i + 1].rsplit(":", 1)[1]
                expose = m.dockerfile()[1][-1].all("EXPOSE")[0]
                assert int(container) == int(expose), command.text
                i += 2
            elif args[i] == "-e":
                key, _, value = args[i + 1].partition("=")
                assert m.setting_name(key), f"{key} is not a setting"
                env[key] = value
                i += 2
            else:
                raise AssertionError(f"docker run option {args[i]!r} not modelled")
        assert args[i] == _image() and len(args) == i + 1, command.text
        m.settings_from_env(env, ctx.monkeypatch)
    else:
        raise AssertionError(f"docker {argv[1]} not modelled: {command.text}")


# --------------------------------------------------------------------------- kubectl

_KINDS = {
    "deployment": "Deployment",
    "deploy": "Deployment",
    "statefulset": "StatefulSet",
    "sts": "StatefulSet",
    "service": "Service",
    "svc": "Service",
}


def _all_manifests() -> list[dict[str, Any]]:
    return [d for name in m.OVERLAYS for d in m.overlay(name)]


def _resource(ref: str) -> dict[str, Any]:
    kind, _, name = ref.partition("/")
    assert kind in _KINDS, f"kubectl resource kind {kind!r} not modelled"
    found = m.find(_all_manifests(), _KINDS[kind], name)
    assert found, f"no {_KINDS[kind]} named {name!r} in deploy/"
    return found[0]


@handles("kubectl")
def _kubectl(argv: list[str], command: Command, ctx: Context) -> None:
    sub, rest = argv[1], argv[2:]
    if sub == "apply" and rest == ["-f", "-"]:
        assert "kubectl create secret generic" in command.text, command.text
        assert "--dry-run=client -o yaml |" in command.text, command.text
    elif sub in ("apply", "delete"):
        assert rest[0] == "-k" and len(rest) == 2, command.text
        assert (ROOT / rest[1] / "kustomization.yaml").is_file(), rest[1]
    elif sub == "kustomize":
        assert (ROOT / rest[0] / "kustomization.yaml").is_file(), rest[0]
    elif sub == "rollout":
        assert rest[0] in ("status", "restart", "undo"), command.text
        _resource(rest[1])
    elif sub == "scale":
        _resource(rest[0])
        (replicas,) = [a for a in rest[1:] if a.startswith("--replicas=")]
        assert int(replicas.split("=")[1]) >= 1
    elif sub == "port-forward":
        service = _resource(rest[0])
        _, _, remote = rest[1].partition(":")
        assert int(remote) in [p["port"] for p in service["spec"]["ports"]], command.text
    elif sub == "create":
        assert rest[:2] == ["secret", "generic"], command.text
        name = rest[2]
        deployment = m.one(m.overlay("external-redis"), "Deployment", "featurestream")
        refs = {
            (v["valueFrom"]["secretKeyRef"]["name"], v["valueFrom"]["secretKeyRef"]["key"]): v[
                "name"
            ]
            for c in m.containers(deployment)
            for v in c.get("env", [])
            if "valueFrom" in v
        }
        options = list(rest[3:])
        if options[-3:] == ["--dry-run=client", "-o", "yaml"]:
            options = options[:-3]
        for literal in options:
            if literal.startswith("--from-file="):
                _keys_secret_file(name, literal.removeprefix("--from-file="), command)
                continue
            assert literal.startswith("--from-literal="), command.text
            key, _, value = literal.removeprefix("--from-literal=").partition("=")
            env_var = refs.get((name, key))
            assert env_var, f"the Deployment reads no key {key!r} of Secret {name!r}"
            setting = m.setting_name(env_var)
            assert setting
            _settings(**{setting: value})
    elif sub == "exec":
        pod, sep, inner = rest[0], rest[1], rest[2:]
        assert sep == "--", "kubectl exec POD -- COMMAND"
        base, _, ordinal = pod.rpartition("-")
        assert ordinal.isdigit(), f"{pod} is not a StatefulSet pod"
        sts = _resource(f"statefulset/{base}")
        assert int(ordinal) < sts["spec"]["replicas"]
        assert inner[0] == "redis-cli", command.text
        _redis_cli(inner, command, ctx)
    else:
        raise AssertionError(f"kubectl {sub} not modelled: {command.text}")


def _keys_secret_file(name: str, source: str, command: Command) -> None:
    """``--from-file=KEY=PATH`` of a Secret the Deployment mounts: KEY is the keys file."""
    from featurestream.api.auth import parse_keys

    key, _, path = source.partition("=")
    docs = m.overlay("external-redis")
    pod = m.one(docs, "Deployment", "featurestream")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == name]
    (mount,) = [
        v for c in pod["containers"] for v in c["volumeMounts"] if v["name"] == volume["name"]
    ]
    env = m.one(docs, "ConfigMap", "featurestream-config")["data"]
    assert env["FEATURESTREAM_API_KEYS_FILE"] == f"{mount['mountPath']}/{key}", command.text
    parse_keys((ROOT / path).read_text())


# --------------------------------------------------------------------------- redis-cli


@handles("redis-cli")
def _redis_cli(argv: list[str], command: Command, ctx: Context) -> None:
    """Run against a private redis-server of the test (host and port replaced)."""
    binary = shutil.which("redis-cli")
    assert binary, "redis-cli is not installed"
    args: list[str] = []
    rest = argv[1:]
    i = 0
    while i < len(rest):
        if rest[i] in ("-h", "-p", "-a", "-n"):
            i += 2
            continue
        if rest[i] == "--tls":
            i += 1
            continue
        args.append(rest[i])
        i += 1
    result = subprocess.run(
        [binary, "-p", str(ctx.redis_port()), *args],
        cwd=ctx.cwd,
        capture_output=True,
        text=True,
        timeout=30,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{command.text}: {output}"
    assert not re.match(r"^\(?error\)?|^ERR", output.strip()), f"{command.text}: {output}"


# --------------------------------------------------------------------------- python blocks


def run_python(code: str, namespace: dict[str, Any], ctx: Context) -> None:
    """Run a block; the server is started only if the block talks to it."""
    for host in DOC_HOSTS:
        if f"http://{host}" in code:
            code = code.replace(f"http://{host}", ctx.base_url)
    exec(compile(code, "<docs>", "exec"), namespace)
