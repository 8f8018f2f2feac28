"""docker/Dockerfile and docker/docker-compose.yml agree with the service they run."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

import pytest

import featurestream
from featurestream.cli import build_parser
from featurestream.config import Settings
from tests.deploy import manifests as m

DEFAULT_PORT = int(Settings.model_fields["port"].default)


def runtime_stage() -> m.Stage:
    return m.dockerfile()[1][-1]


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for arg in runtime_stage().all("ENV"):
        env |= m.env_instruction(arg)
    return env


def image_command() -> list[str]:
    stage = runtime_stage()
    (entrypoint,) = stage.all("ENTRYPOINT")
    (cmd,) = stage.all("CMD")
    return m.exec_form(entrypoint) + m.exec_form(cmd)


def healthcheck_url(command: str) -> tuple[str, int]:
    """(path, port) of the URL a healthcheck command opens (port from the env default)."""
    text = command.replace(
        "' + os.environ.get('FEATURESTREAM_PORT', '8000') + '",
        str(image_env()["FEATURESTREAM_PORT"]),
    )
    match = re.search(r"http://[^'\"\s]+", text)
    assert match, f"no URL in healthcheck {command!r}"
    url = urlsplit(match.group(0))
    assert url.port is not None
    return url.path, url.port


# --------------------------------------------------------------------------- Dockerfile


def test_dockerfile_is_multi_stage_and_runtime_takes_only_the_builders_wheels() -> None:
    _, stages = m.dockerfile()
    assert len(stages) >= 2
    builder = stages[0]
    assert builder.name == "builder"
    assert any("pip wheel" in run for run in builder.all("RUN"))
    runtime = runtime_stage()
    assert runtime.base.startswith("python:3.11") and runtime.base.endswith("-slim")
    installs = [run for run in runtime.all("RUN") if "pip install" in run]
    assert len(installs) == 1
    assert "from=builder" in installs[0] and "--no-index" in installs[0]
    # Nothing from the build context reaches the runtime stage directly.
    assert not runtime.all("COPY") and not runtime.all("ADD")


def test_dockerfile_copies_only_what_the_context_keeps() -> None:
    builder = m.dockerfile()[1][0]
    sources = []
    for arg in builder.all("COPY"):
        parts = [p for p in arg.split() if not p.startswith("--")]
        sources += parts[:-1]
    assert sources, "the builder copies nothing"
    for src in sources:
        assert (m.ROOT / src).exists(), src
        assert m.dockerignore_allows(src.rstrip("/")), f"{src} is excluded by the dockerignore"
    # pyproject.toml names the readme it packages: it must be in the context.
    assert "README.md" in sources
    for heavy in (".git", ".venv", "tests", "docs", ".hypothesis", "clients"):
        assert not m.dockerignore_allows(heavy), f"{heavy} would be sent to the builder"
    assert not m.dockerignore_allows("service/featurestream/__pycache__")


def test_dockerfile_runs_as_a_non_root_numeric_user() -> None:
    users = runtime_stage().all("USER")
    assert users, "the runtime stage sets no USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0
    assert not gid or (gid.isdigit() and int(gid) != 0)
    # The same uid as the Kubernetes pod's runAsUser.
    deployment = m.one(m.overlay("in-cluster-redis"), "Deployment", "featurestream")
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(uid)


def test_dockerfile_exposes_the_port_the_server_listens_on() -> None:
    (expose,) = runtime_stage().all("EXPOSE")
    port = int(expose.split("/")[0])
    command = image_command()
    assert command[0] == "featurestream"
    assert m.serve_port(command[1:], image_env()) == port == DEFAULT_PORT


def test_dockerfile_command_listens_on_all_interfaces() -> None:
    args = build_parser().parse_args(image_command()[1:])
    assert args.command == "serve"
    assert args.host == "0.0.0.0"


def test_dockerfile_environment_names_real_settings_and_pins_blas_threads() -> None:
    env = image_env()
    for key in env:
        if key.startswith(m.ENV_PREFIX):
            assert m.setting_name(key), f"{key} is not a setting"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["OPENBLAS_NUM_THREADS"] == "1"


def test_dockerfile_defaults_make_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {k: v for k, v in image_env().items() if k.startswith(m.ENV_PREFIX)}
    settings = m.settings_from_env(env, monkeypatch)
    assert settings.store_kind == "memory" and settings.workers == 1


def test_dockerfile_healthcheck_asks_a_real_route_on_the_exposed_port() -> None:
    (check,) = runtime_stage().all("HEALTHCHECK")
    _, _, command = check.partition("CMD")
    argv = m.exec_form(command.strip())
    assert argv[:2] == ["python", "-c"], "the slim image has no curl"
    path, port = healthcheck_url(argv[2])
    assert path == "/healthz" and path in m.get_routes()
    assert port == int(runtime_stage().all("EXPOSE")[0])


# --------------------------------------------------------------------------- compose


def test_compose_has_the_service_redis_and_the_proxy() -> None:
    assert set(m.compose()["services"]) == {"featurestream", "redis", "proxy"}


def test_compose_builds_the_dockerfile_from_the_repository_root() -> None:
    build = m.compose()["services"]["featurestream"]["build"]
    context = (m.DOCKER / build["context"]).resolve()
    assert context == m.ROOT
    assert (context / build["dockerfile"]).resolve() == m.DOCKER / "Dockerfile"


def test_compose_image_tag_is_the_package_version_and_matches_kubernetes() -> None:
    image = m.compose()["services"]["featurestream"]["image"]
    assert image == f"featurestream:{featurestream.__version__}"
    for name in m.OVERLAYS:
        deployment = m.one(m.overlay(name), "Deployment", "featurestream")
        assert m.containers(deployment)[0]["image"] == image


def test_compose_environment_names_real_settings_and_validates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = m.compose_env("featurestream")
    for key in env:
        assert m.setting_name(key), f"{key} is not a setting"
    settings = m.settings_from_env(env, monkeypatch)
    assert settings.store_kind == "redis"
    assert settings.workers >= 2, "the compose deployment runs several workers on Redis"


def test_compose_store_url_points_at_the_redis_service() -> None:
    url = urlsplit(m.compose_env("featurestream")["FEATURESTREAM_STORE_URL"])
    services = m.compose()["services"]
    assert url.scheme == "redis"
    assert url.hostname in services
    assert services[url.hostname]["image"].startswith("redis:")
    assert url.port == 6379
    assert "--port" not in services[url.hostname].get("command", [])


def test_compose_publishes_only_the_proxy_which_forwards_to_the_server() -> None:
    services = m.compose()["services"]
    service = services["featurestream"]
    listens = m.serve_port(image_command()[1:], m.compose_env("featurestream"))
    assert "ports" not in service, "the server is reached only through the proxy"
    assert [str(p) for p in service["expose"]] == [str(listens)]
    assert listens == int(runtime_stage().all("EXPOSE")[0])
    conf = nginx_conf()
    (proxy_listens,) = re.findall(r"^\s*listen (\d+);", conf, re.M)
    (published,) = proxy_ports()
    assert published.split(":")[1:] == [str(listens), proxy_listens]
    assert not [name for name, s in services.items() if "ports" in s and name != "proxy"]
    assert re.search(rf"^\s*server featurestream:{listens};", conf, re.M)
    (mount,) = services["proxy"]["volumes"]
    source, target, mode = mount.split(":")
    assert (m.DOCKER / source).resolve() == m.DOCKER / "nginx.conf"
    assert target == "/etc/nginx/nginx.conf" and mode == "ro"


def proxy_ports(environ: dict[str, str] | None = None) -> list[str]:
    """The proxy's published ports, ``address:published:target``, interpolated."""
    return [m.interpolate(str(p), environ) for p in m.compose()["services"]["proxy"]["ports"]]


def test_compose_publishes_the_unauthenticated_api_on_this_machine_only() -> None:
    # The compose deployment runs without API keys ...
    assert f"{m.ENV_PREFIX}API_KEYS_FILE" not in m.compose_env("featurestream")
    # ... so its one published port listens on the loopback interface by default.
    (published,) = proxy_ports()
    address, port, _ = published.split(":")
    assert ipaddress.ip_address(address).is_loopback
    assert int(port) == DEFAULT_PORT
    # PUBLISH_ADDRESS overrides it, with the keys file added, as the comments and docs say.
    (everywhere,) = proxy_ports({"PUBLISH_ADDRESS": "0.0.0.0"})
    assert everywhere.startswith("0.0.0.0:")
    command = (
        "PUBLISH_ADDRESS=0.0.0.0 docker compose -f docker/docker-compose.yml"
        " -f docker/docker-compose.keys.yml up"
    )
    for text in (
        (m.DOCKER / "docker-compose.yml").read_text(),
        (m.DOCKER / "docker-compose.keys.yml").read_text(),
        compose_docs(),
    ):
        assert command in text
    assert "127.0.0.1" in compose_docs()


def compose_docs() -> str:
    operations = (m.ROOT / "docs" / "operations.md").read_text()
    return operations.split("## Docker Compose")[1].split("\n## ")[0]


def test_the_keys_file_turns_keys_on_for_the_compose_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from featurestream.api.auth import KeyRing, parse_keys

    keys = m.compose("docker-compose.keys.yml")
    assert set(keys["services"]) == {"featurestream"}
    service = keys["services"]["featurestream"]
    env = m.compose_env("featurestream") | {
        k: m.interpolate(str(v)) for k, v in service["environment"].items()
    }
    settings = m.settings_from_env(env, monkeypatch)
    assert settings.api_keys_file is not None
    path = str(settings.api_keys_file)
    (mount,) = service["volumes"]
    source, target, mode = mount.split(":")
    assert mode == "ro"
    # A directory, so that an editor replacing the file still reaches the container.
    assert path.startswith(target + "/")
    shipped = (m.DOCKER / source).resolve() / path[len(target) + 1 :]
    assert shipped.is_file()
    # It parses (the server starts) and holds no key: every /v1 call refused until one is added.
    assert parse_keys(shipped.read_text()) == ()
    assert KeyRing.from_file(shipped).enabled


def nginx_conf() -> str:
    return (m.DOCKER / "nginx.conf").read_text()


def nginx_seconds(name: str) -> float:
    (value,) = re.findall(rf"^\s*{name} (\d+)s;", nginx_conf(), re.M)
    return float(value)


def test_the_proxy_bounds_slow_clients_and_takes_the_servers_bodies() -> None:
    # uvicorn sets no timeout on reading headers: the proxy must.
    assert 0 < nginx_seconds("client_header_timeout") <= 30
    assert 0 < nginx_seconds("client_body_timeout") <= 60
    assert 0 < nginx_seconds("keepalive_timeout") <= 60
    conf = nginx_conf()
    assert re.search(r"^\s*proxy_request_buffering on;", conf, re.M)
    (size,) = re.findall(r"^\s*client_max_body_size (\d+)m;", conf, re.M)
    assert int(size) * 2**20 == Settings.model_fields["max_request_bytes"].default
    # The WebSocket route is upgraded.
    assert "proxy_set_header Upgrade $http_upgrade;" in conf
    assert conf.count("{") == conf.count("}")


def test_compose_healthcheck_asks_a_real_route() -> None:
    test = m.compose()["services"]["featurestream"]["healthcheck"]["test"]
    assert test[0] == "CMD"
    match = re.search(r"http://[^'\"\s]+", " ".join(test))
    assert match
    url = urlsplit(match.group(0))
    assert url.path in m.get_routes()
    assert url.port == m.serve_port(image_command()[1:], m.compose_env("featurestream"))


def test_compose_starts_the_service_after_redis_is_healthy() -> None:
    services = m.compose()["services"]
    assert services["featurestream"]["depends_on"] == {"redis": {"condition": "service_healthy"}}
    assert services["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


def test_compose_redis_keeps_an_append_only_file_on_a_named_volume() -> None:
    doc = m.compose()
    redis = doc["services"]["redis"]
    assert redis["image"] == "redis:7"
    command = " ".join(redis["command"])
    assert "--appendonly yes" in command
    assert re.search(r"--appendfsync (everysec|always)\b", command)
    volume, _, target = redis["volumes"][0].partition(":")
    assert target == "/data"
    assert volume in doc["volumes"], "the data volume must be a named volume"
    # The same image as the in-cluster StatefulSet.
    sts = m.one(m.overlay("in-cluster-redis"), "StatefulSet", "featurestream-redis")
    assert m.containers(sts)[0]["image"] == redis["image"]


def test_interpolation_needs_defaults() -> None:
    assert m.interpolate("${A:-2}") == "2"
    assert m.interpolate("${A:-2}", {"A": "3"}) == "3"
    with pytest.raises(AssertionError):
        m.interpolate("${A}")
