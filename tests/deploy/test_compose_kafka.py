"""docker/docker-compose.kafka.yml: the optional Kafka broker and its consumer, checked as YAML."""

from __future__ import annotations

from urllib.parse import urlsplit

import featurestream
from featurestream.ingest.kafka_source import parse
from tests.deploy import manifests as m

KAFKA = "docker-compose.kafka.yml"


def test_the_overlay_adds_a_broker_and_a_consumer_of_the_same_image() -> None:
    services = m.compose(KAFKA)["services"]
    assert set(services) == {"kafka", "consumer"}
    assert services["consumer"]["image"] == f"featurestream:{featurestream.__version__}"
    assert services["kafka"]["image"].startswith("apache/kafka:")


def test_the_consumer_reads_the_broker_and_writes_to_the_redis_of_the_base_file() -> None:
    consumer = m.compose(KAFKA)["services"]["consumer"]
    command = consumer["command"]
    assert command[0] == "consume"
    source = parse(command[1])
    host, _, port = source.servers.partition(":")
    assert host in m.compose(KAFKA)["services"] and port == "9092"
    env = consumer["environment"]
    for key in env:
        assert m.setting_name(key), f"{key} is not a setting"
    store = urlsplit(env["FEATURESTREAM_STORE_URL"])
    assert store.hostname in m.compose()["services"]
    assert set(consumer["depends_on"]) == {"redis", "kafka"}


def test_the_broker_advertises_the_address_the_consumer_uses() -> None:
    env = m.compose(KAFKA)["services"]["kafka"]["environment"]
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert env["KAFKA_NUM_PARTITIONS"] == "4"
