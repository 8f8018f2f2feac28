"""deploy/ (kustomize) agrees with the service: ports, probes, settings, store URL, Redis."""

from __future__ import annotations

import base64
import hashlib
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from featurestream.config import Settings
from tests.deploy import manifests as m

OVERLAYS = pytest.mark.parametrize("name", m.OVERLAYS)


def deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return m.one(docs, "Deployment", "featurestream")


def api_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = m.containers(deployment(docs))
    return container


def pod_labels(doc: dict[str, Any]) -> dict[str, str]:
    return dict(doc["spec"]["template"]["metadata"]["labels"])


def container_env(docs: list[dict[str, Any]]) -> dict[str, str]:
    """The FEATURESTREAM_ environment of the API container, Secrets decoded.

    A Secret the overlay does not generate (the external store URL, created by
    the operator) is left out.
    """
    container = api_container(docs)
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        ref = source["configMapRef"]["name"]
        env |= m.one(docs, "ConfigMap", ref)["data"]
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
            continue
        ref = var["valueFrom"]["secretKeyRef"]
        secrets = m.find(docs, "Secret", ref["name"])
        if secrets:
            env[var["name"]] = base64.b64decode(secrets[0]["data"][ref["key"]]).decode()
    return env


def container_port(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    (found,) = [p["containerPort"] for p in container["ports"] if p["name"] == port]
    return int(found)


@OVERLAYS
def test_overlay_renders_the_expected_resources(name: str) -> None:
    docs = m.overlay(name)
    kinds = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in docs)
    api = [
        "ConfigMap/featurestream-config",
        "Deployment/featurestream",
        "Ingress/featurestream",
        "PodDisruptionBudget/featurestream",
        "Service/featurestream",
    ]
    store = [
        "ConfigMap/featurestream-redis-config",
        "NetworkPolicy/featurestream-redis",
        "Secret/featurestream-store",
        "Service/featurestream-redis",
        "Service/featurestream-redis-headless",
        "StatefulSet/featurestream-redis",
    ]
    assert kinds == sorted(api + store if name == "in-cluster-redis" else api)
    for d in docs:
        assert d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "featurestream"


@OVERLAYS
def test_deployment_runs_several_stateless_replicas(name: str) -> None:
    spec = deployment(m.overlay(name))["spec"]
    assert spec["replicas"] >= 2
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert all(
        "emptyDir" in v or "secret" in v for v in spec["template"]["spec"].get("volumes", [])
    ), "replicas are stateless: no persistent volume"


@OVERLAYS
def test_container_listens_on_its_declared_port(name: str) -> None:
    docs = m.overlay(name)
    container = api_container(docs)
    listens = m.serve_port(container["args"], container_env(docs))
    assert [p["containerPort"] for p in container["ports"]] == [listens]
    assert listens == Settings.model_fields["port"].default


@OVERLAYS
def test_probes_ask_real_routes_on_the_container_port(name: str) -> None:
    container = api_container(m.overlay(name))
    probes = {k: container[k]["httpGet"] for k in ("readinessProbe", "livenessProbe")}
    assert probes["readinessProbe"]["path"] == "/readyz"
    assert probes["livenessProbe"]["path"] == "/healthz"
    probes["startupProbe"] = container["startupProbe"]["httpGet"]
    for probe in probes.values():
        assert probe["path"] in m.get_routes()
        assert m.get_status(probe["path"]) == 200
        port = container_port(container, probe["port"])
        assert port == container["ports"][0]["containerPort"]


@OVERLAYS
def test_environment_names_real_settings_and_validates(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = m.overlay(name)
    container = api_container(docs)
    names = [v["name"] for v in container.get("env", [])]
    env = container_env(docs)
    for key in [*names, *env]:
        assert m.setting_name(key), f"{key} is not a setting"
    assert f"{m.ENV_PREFIX}STORE_URL" in names, "the store URL is required, from a Secret"
    if name == "external-redis":
        env[f"{m.ENV_PREFIX}STORE_URL"] = "rediss://:secret@redis.example.internal:6380/0"
    settings = m.settings_from_env(env, monkeypatch)
    assert settings.store_kind in ("redis", "rediss")


def test_base_configmap_lists_every_tunable_setting() -> None:
    env = m.one(m.render(m.DEPLOY / "base"), "ConfigMap", "featurestream-config")["data"]
    tunable = m.setting_fields() - {"store_url", "host"}
    assert {m.setting_name(k) for k in env} == tunable


def test_store_url_secret_points_at_the_redis_service() -> None:
    docs = m.overlay("in-cluster-redis")
    url = urlsplit(container_env(docs)[f"{m.ENV_PREFIX}STORE_URL"])
    service = m.one(docs, "Service", url.hostname)
    (port,) = service["spec"]["ports"]
    assert url.scheme == "redis" and url.port == port["port"]
    sts = m.one(docs, "StatefulSet", "featurestream-redis")
    assert m.matches(service["spec"]["selector"], pod_labels(sts))
    (redis,) = m.containers(sts)
    assert container_port(redis, port["targetPort"]) == 6379


def test_external_overlay_generates_no_store_secret() -> None:
    docs = m.overlay("external-redis")
    assert not m.find(docs, "Secret")
    assert not m.find(docs, "StatefulSet")


@OVERLAYS
def test_service_selects_the_pods_and_targets_the_container_port(name: str) -> None:
    docs = m.overlay(name)
    service = m.one(docs, "Service", "featurestream")
    assert m.matches(service["spec"]["selector"], pod_labels(deployment(docs)))
    (port,) = service["spec"]["ports"]
    container = api_container(docs)
    assert container_port(container, port["targetPort"]) == container["ports"][0]["containerPort"]


@OVERLAYS
def test_ingress_routes_to_the_service_and_bounds_what_it_forwards(name: str) -> None:
    docs = m.overlay(name)
    ingress = m.one(docs, "Ingress", "featurestream")
    service = m.one(docs, "Service", "featurestream")
    (rule,) = ingress["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    assert path["path"] == "/" and path["pathType"] == "Prefix"
    backend = path["backend"]["service"]
    assert backend["name"] == service["metadata"]["name"]
    assert backend["port"]["name"] in [p["name"] for p in service["spec"]["ports"]]
    notes = ingress["metadata"]["annotations"]
    # Bodies reach a pod only whole, and no larger than the server takes.
    assert notes["nginx.ingress.kubernetes.io/proxy-request-buffering"] == "on"
    size = notes["nginx.ingress.kubernetes.io/proxy-body-size"]
    env = m.one(docs, "ConfigMap", "featurestream-config")["data"]
    assert int(size.removesuffix("m")) * 2**20 == int(env["FEATURESTREAM_MAX_REQUEST_BYTES"])


@OVERLAYS
def test_disruption_budget_covers_the_pods_and_allows_a_drain(name: str) -> None:
    docs = m.overlay(name)
    pdb = m.one(docs, "PodDisruptionBudget", "featurestream")
    assert m.matches(pdb["spec"]["selector"]["matchLabels"], pod_labels(deployment(docs)))
    assert 1 <= pdb["spec"]["minAvailable"] < deployment(docs)["spec"]["replicas"]


@OVERLAYS
def test_pods_have_requests_limits_and_run_as_non_root(name: str) -> None:
    docs = m.overlay(name)
    for workload in m.find(docs, "Deployment") + m.find(docs, "StatefulSet"):
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] > 0
        for c in m.containers(workload):
            assert {"cpu", "memory"} <= set(c["resources"]["requests"])
            assert "memory" in c["resources"]["limits"]
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]


def redis_conf(docs: list[dict[str, Any]]) -> dict[str, str]:
    text = m.one(docs, "ConfigMap", "featurestream-redis-config")["data"]["redis.conf"]
    conf = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition(" ")
            conf[key] = value.strip()
    return conf


def test_redis_statefulset_keeps_an_append_only_file_on_a_claim() -> None:
    docs = m.overlay("in-cluster-redis")
    sts = m.one(docs, "StatefulSet", "featurestream-redis")
    conf = redis_conf(docs)
    assert conf["appendonly"] == "yes"
    assert conf["appendfsync"] in ("everysec", "always")
    assert conf["maxmemory-policy"] == "noeviction", "evicting a key would lose a stream"
    (redis,) = m.containers(sts)
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    mounts = {v["name"]: v["mountPath"] for v in redis["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == conf["dir"]
    # redis-server reads the mounted file.
    config_volume = next(v for v in sts["spec"]["template"]["spec"]["volumes"] if "configMap" in v)
    assert config_volume["configMap"]["name"] == "featurestream-redis-config"
    assert redis["args"] == ["redis-server", mounts[config_volume["name"]] + "/redis.conf"]
    # maxmemory stays under the container's memory limit (the AOF rewrite forks).
    limit = redis["resources"]["limits"]["memory"]
    assert limit.endswith("Gi") and conf["maxmemory"].endswith("mb")
    assert int(conf["maxmemory"][:-2]) < 1024 * float(limit[:-2])
    # The headless Service governs the StatefulSet.
    headless = m.one(docs, "Service", sts["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"


def test_network_policy_admits_only_the_api_pods_to_redis() -> None:
    docs = m.overlay("in-cluster-redis")
    policy = m.one(docs, "NetworkPolicy", "featurestream-redis")
    sts = m.one(docs, "StatefulSet", "featurestream-redis")
    assert m.matches(policy["spec"]["podSelector"]["matchLabels"], pod_labels(sts))
    (rule,) = policy["spec"]["ingress"]
    (source,) = rule["from"]
    assert m.matches(source["podSelector"]["matchLabels"], pod_labels(deployment(docs)))
    assert not m.matches(source["podSelector"]["matchLabels"], pod_labels(sts))


KEYS_SECRET = "featurestream-api-keys"


def keys_secret_commands(text: str) -> list[list[str]]:
    """The ``kubectl create secret generic featurestream-api-keys ...`` commands of a text."""
    joined = re.sub(r"\\\n\s*#?\s*", " ", text)
    found = re.findall(rf"kubectl create secret generic {KEYS_SECRET} [^\n|`]*", joined)
    return [shlex.split(command) for command in found]


def documented_keys_secret(tmp_path: Path) -> dict[str, Any]:
    """The Secret the documented command creates, from the shipped template with a key added."""
    (command, *_) = keys_secret_commands((m.DEPLOY / "base" / "kustomization.yaml").read_text())
    (source,) = [a for a in command if a.startswith("--from-file=")]
    key, _, path = source.removeprefix("--from-file=").partition("=")
    assert (m.ROOT / path).resolve() == m.DEPLOY / "base" / "api-keys.txt"
    template = (m.ROOT / path).read_text()
    copy = tmp_path / "api-keys.txt"
    copy.write_text(template + f"acme:{hashlib.sha256(b'k').hexdigest()}\n")
    secret = {
        "kind": "Secret",
        "metadata": {"name": command[4]},
        "data": {key: base64.b64encode(copy.read_bytes()).decode()},
    }
    if shutil.which("kubectl"):
        argv = [*command[:5], f"--from-file={key}={copy}", "--dry-run=client", "-o", "yaml"]
        out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
        real = yaml.safe_load(out.stdout)
        assert real["metadata"]["name"] == secret["metadata"]["name"]
        decoded = {k: base64.b64decode(v) for k, v in real["data"].items()}
        assert decoded == {key: copy.read_bytes()}
    return secret


@OVERLAYS
def test_the_documented_keys_secret_is_the_file_the_server_reads(name: str, tmp_path: Path) -> None:
    from featurestream.api.auth import parse_keys

    docs = m.overlay(name)
    secret = documented_keys_secret(tmp_path)
    env = m.one(docs, "ConfigMap", "featurestream-config")["data"]
    path = env[f"{m.ENV_PREFIX}API_KEYS_FILE"]
    pod = deployment(docs)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mount = next(v for v in container["volumeMounts"] if path.startswith(v["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    key = path[len(mount["mountPath"]) + 1 :]
    text = base64.b64decode(secret["data"][key]).decode()
    assert [tenant for tenant, _ in parse_keys(text)] == ["acme"]
    # The shipped template parses and holds no key: access is opt-in.
    assert parse_keys((m.DEPLOY / "base" / "api-keys.txt").read_text()) == ()


@OVERLAYS
def test_a_changed_keys_secret_reaches_running_pods_without_a_rollout(name: str) -> None:
    """The keys rotate in place, as the manifests' comments and docs/operations.md say.

    kustomize names a generated Secret after a hash of its content, so a change
    would be a new Secret and a rollout. The keys Secret is a plain one, made by
    ``kubectl create`` (never generated), mounted as a whole volume: the
    kubelet updates a volume in place, never a ``subPath`` mount.
    """
    docs = m.overlay(name)
    kz = yaml.safe_load((m.DEPLOY / "base" / "kustomization.yaml").read_text())
    generated = [g["name"] for g in kz.get("secretGenerator", [])]
    assert KEYS_SECRET not in generated
    assert not m.find(docs, "Secret", KEYS_SECRET)
    pod = deployment(docs)["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == KEYS_SECRET]
    assert not volume["secret"].get("items"), "items would still update, but name only one file"
    (container,) = pod["containers"]
    (mount,) = [v for v in container["volumeMounts"] if v["name"] == volume["name"]]
    assert "subPath" not in mount, "a subPath mount never sees a Secret's update"
    # Every place that says how to create or rotate it says the same.
    operations = (m.ROOT / "docs" / "operations.md").read_text()
    texts = {
        "docs/operations.md": operations,
        "deploy/base/kustomization.yaml": (m.DEPLOY / "base" / "kustomization.yaml").read_text(),
        "deploy/base/api-keys.txt": (m.DEPLOY / "base" / "api-keys.txt").read_text(),
        f"overlays/{name}": (m.DEPLOY / "overlays" / name / "kustomization.yaml").read_text(),
    }
    (create, *_) = keys_secret_commands(texts["deploy/base/kustomization.yaml"])
    for where, text in texts.items():
        commands = keys_secret_commands(text)
        assert commands, f"{where} does not say how to create the keys Secret"
        for command in commands:
            assert command[:5] == create[:5] and command[5] == create[5], (where, command)
    for where in ("docs/operations.md", "deploy/base/kustomization.yaml"):
        rotate = [c for c in keys_secret_commands(texts[where]) if "--dry-run=client" in c]
        assert rotate, f"{where} does not say how to update the keys Secret in place"
        assert "kubectl apply -f -" in texts[where]
    assert "without a restart" in operations


def test_renderer_rejects_kustomize_features_it_does_not_model(tmp_path: Any) -> None:
    (tmp_path / "kustomization.yaml").write_text("patches: []\n")
    with pytest.raises(AssertionError, match="patches"):
        m.render(tmp_path)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@OVERLAYS
def test_kubectl_kustomize_renders_what_the_checks_read(name: str) -> None:
    """The real kustomize agrees with the subset modelled here (names without hash)."""
    out = subprocess.run(
        ["kubectl", "kustomize", str(m.DEPLOY / "overlays" / name)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    real = [d for d in yaml.safe_load_all(out) if d]
    ours = m.overlay(name)

    def key(d: dict[str, Any]) -> str:
        return f"{d['kind']}/{d['metadata']['name']}"

    generated = {key(d) for d in ours if d["kind"] in ("ConfigMap", "Secret")}

    def strip(d: dict[str, Any]) -> str:
        k = key(d)
        base = k.rsplit("-", 1)[0] if k.rsplit("-", 1)[0] in generated else k
        return base

    assert sorted(strip(d) for d in real) == sorted(key(d) for d in ours)
    for d in real:
        match = next(o for o in ours if key(o) == strip(d))
        if d["kind"] == "ConfigMap":
            assert d["data"] == match["data"]
        elif d["kind"] == "Secret":
            # kubectl wraps base64 lines; compare what the pods will read.
            decoded = {k: base64.b64decode(v) for k, v in d["data"].items()}
            assert decoded == {k: base64.b64decode(v) for k, v in match["data"].items()}
        elif d["kind"] == "Deployment":
            assert api_container([d])["image"] == api_container(ours)["image"]
            assert api_container([d])["readinessProbe"] == api_container(ours)["readinessProbe"]
            # No hash suffix on the keys Secret: kustomize leaves a Secret it does not
            # generate under its own name.
            volumes = d["spec"]["template"]["spec"]["volumes"]
            assert volumes == deployment(ours)["spec"]["template"]["spec"]["volumes"]
