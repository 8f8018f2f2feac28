"""Redis outages: clear 503s while it is down, recovery without a restart, nothing lost."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from fastapi.testclient import TestClient

from featurestream.api import create_app
from featurestream.config import Settings
from tests import support
from tests.conftest import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_redis_down_then_back_with_aof(
    redis_server_factory: Callable[..., RedisServer], key_prefix: str
) -> None:
    redis = redis_server_factory(appendonly=True)
    settings = Settings(
        store_url=redis.url,
        key_prefix=key_prefix,
        redis_socket_timeout=1.0,
        redis_connect_timeout=0.5,
    )
    X, y = support.wdbc()
    with TestClient(create_app(settings)) as client:
        assert (
            client.post(
                "/v1/streams", json={"id": "o", "algorithm": "saola", "target": y.tolist()}
            ).status_code
            == 201
        )
        body = {"producer": "p", "seq": 1, "features": [{"name": "f0", "values": X[0].tolist()}]}
        first = client.post("/v1/streams/o/features", json=body)
        assert first.status_code == 200

        redis.kill()
        down = client.post(
            "/v1/streams/o/features",
            json={"producer": "p", "seq": 2, "features": [{"name": "f1", "values": X[1].tolist()}]},
        )
        assert down.status_code == 503
        assert down.headers["content-type"].startswith("application/problem+json")
        assert down.json()["type"].endswith("store-unavailable")
        assert int(down.headers["retry-after"]) >= 1
        assert client.get("/v1/streams/o/selected").status_code == 503
        assert client.get("/readyz").status_code == 503
        assert client.get("/healthz").status_code == 200

        redis.start()  # same port and data directory: the AOF is replayed
        assert client.get("/readyz").status_code == 200
        # The acknowledged update survived; the unacknowledged one was not half-applied.
        sel = client.get("/v1/streams/o/selected").json()
        assert sel["version"] == 1
        again = client.post(
            "/v1/streams/o/features",
            json={"producer": "p", "seq": 2, "features": [{"name": "f1", "values": X[1].tolist()}]},
        )
        assert again.status_code == 200, again.text
        assert again.json()["version"] == 2
        replay = client.post("/v1/streams/o/features", json=body)
        assert replay.content == first.content
        status = client.get("/v1/streams/o/status").json()
        assert status["features_seen"] == 2


def test_creating_while_redis_is_down_is_503_and_leaves_nothing(
    redis_server_factory: Callable[..., RedisServer], key_prefix: str
) -> None:
    redis = redis_server_factory(appendonly=True)
    settings = Settings(store_url=redis.url, key_prefix=key_prefix, redis_connect_timeout=0.5)
    with TestClient(create_app(settings)) as client:
        redis.kill()
        r = client.post(
            "/v1/streams", json={"id": "x", "algorithm": "saola", "target": [1, 2, 3, 4]}
        )
        assert r.status_code == 503 and r.json()["type"].endswith("store-unavailable")
        redis.start()
        assert client.get("/v1/streams/x").status_code == 404
        assert client.get("/v1/streams").json()["streams"] == []
        ok = client.post(
            "/v1/streams", json={"id": "x", "algorithm": "saola", "target": np.arange(6.0).tolist()}
        )
        assert ok.status_code == 201
