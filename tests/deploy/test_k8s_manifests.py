"""deploy/ (kustomize) agrees with the service: ports, probes, settings, store URL, Redis."""

from __future__ import annotations

import base64
import shutil
import subprocess
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
        "Secret/featurestream-api-keys",
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
    assert [d["metadata"]["name"] for d in m.find(docs, "Secret")] == ["featurestream-api-keys"]
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


@OVERLAYS
def test_api_keys_file_is_the_mounted_secret(name: str) -> None:
    from featurestream.api.auth import parse_keys

    docs = m.overlay(name)
    env = m.one(docs, "ConfigMap", "featurestream-config")["data"]
    path = env[f"{m.ENV_PREFIX}API_KEYS_FILE"]
    pod = deployment(docs)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mount = next(v for v in container["volumeMounts"] if path.startswith(v["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    secret = m.one(docs, "Secret", volume["secret"]["secretName"])
    key = path[len(mount["mountPath"]) + 1 :]
    text = base64.b64decode(secret["data"][key]).decode()
    # The shipped file parses (so pods start) and holds no key: access is opt-in.
    assert parse_keys(text) == ()


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
