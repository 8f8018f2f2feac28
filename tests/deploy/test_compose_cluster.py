"""docker/docker-compose.cluster.yml: six cluster nodes, their init, and the service on them.

There is no Docker engine where the suite runs: the file is read as YAML
(anchors merged) and checked against the settings and the cluster the tests
start themselves (tests/deploy/cluster.py).
"""

from __future__ import annotations

from typing import Any

from featurestream.config import Settings, parse_cluster_url
from tests.deploy import manifests as m


def cluster_compose() -> dict[str, Any]:
    return m.compose("docker-compose.cluster.yml")


def redis_services() -> dict[str, Any]:
    return {
        name: s
        for name, s in cluster_compose()["services"].items()
        if name.startswith("redis-") and name != "redis-cluster-init"
    }


def test_six_redis_nodes_in_cluster_mode_with_their_own_volume_and_aof_always() -> None:
    nodes = redis_services()
    assert sorted(nodes) == [f"redis-{i}" for i in range(1, 7)]
    volumes = set()
    for name, service in nodes.items():
        command = " ".join(service["command"])
        assert service["image"] == "redis:7"
        for option in (
            "--cluster-enabled yes",
            "--appendonly yes --appendfsync always",
            "--cluster-config-file /data/nodes.conf",
            "--min-replicas-to-write 1",
        ):
            assert option in command, (name, option)
        assert service["hostname"] == name
        (volume,) = service["volumes"]
        assert volume.endswith(":/data")
        volumes.add(volume.split(":")[0])
    assert volumes == set(cluster_compose()["volumes"]) and len(volumes) == 6


def test_the_init_creates_three_masters_with_a_replica_each_after_every_node() -> None:
    init = cluster_compose()["services"]["redis-cluster-init"]
    command = " ".join(init["command"])
    assert "--cluster create" in command and "--cluster-replicas 1" in command
    assert "for n in 1 2 3 4 5 6" in command
    assert set(init["depends_on"]) == set(redis_services())
    assert all(d["condition"] == "service_healthy" for d in init["depends_on"].values())


def test_the_service_uses_every_node_as_a_seed_and_waits_for_replicas() -> None:
    service = cluster_compose()["services"]["featurestream"]
    env = {k: m.interpolate(str(v)) for k, v in service["environment"].items()}
    settings = Settings(store_url=env["FEATURESTREAM_STORE_URL"])
    assert settings.store_cluster
    hosts = {host for host, port in parse_cluster_url(settings.store_url).nodes if port == 6379}
    assert hosts == set(redis_services())
    assert int(env["FEATURESTREAM_REPLICAS_ACK"]) == 1
    assert service["depends_on"]["redis-cluster-init"]["condition"] == (
        "service_completed_successfully"
    )
    # Every FEATURESTREAM_ variable is a setting.
    for name in env:
        assert m.setting_name(name) is not None, name
