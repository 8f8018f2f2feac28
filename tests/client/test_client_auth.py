"""API keys: the client's Bearer key over HTTP and the WebSocket; refusals are Unauthorized."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import featurestream_client as fc
from featurestream.config import Settings
from featurestream_client import Client, RetryPolicy
from tests.client.live import WS_MISSING, LiveServer, has_websocket_route

KEY = "k-0123456789abcdef"


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    path: Path = tmp_path_factory.mktemp("keys") / "keys"
    path.write_text(f"acme:{hashlib.sha256(KEY.encode()).hexdigest()}\n")
    server = LiveServer(Settings(store_url="memory://", api_keys_file=str(path))).start()
    yield server
    server.stop()


def test_requests_carry_the_key(keyed_server: LiveServer) -> None:
    with Client(keyed_server.url, api_key=KEY) as c:
        s = c.create_stream("saola", target=np.arange(10.0), id="keyed", target_type="continuous")
        assert s.add_features(np.arange(10.0)[:, None], names=["a"]).selected == ("a",)
        assert [i.id for i in c.streams()] == ["keyed"]
    for key in (None, "wrong"):
        with Client(keyed_server.url, api_key=key, retry=RetryPolicy.never()) as c:
            with pytest.raises(fc.Unauthorized) as exc:
                c.streams()
            assert exc.value.status == 401 and exc.value.type.endswith("/unauthorized")


@pytest.mark.skipif(not has_websocket_route(), reason=WS_MISSING)
def test_the_websocket_carries_the_key(keyed_server: LiveServer) -> None:
    X = np.random.default_rng(0).normal(size=(200, 4))
    y = np.sign(X[:, 0])
    with Client(keyed_server.url, api_key=KEY) as c:
        s = c.create_stream("ofs", feature_names=list("abcd"), params={"num_features": 1})
        assert s.stream_instances(X, y, batch_size=50).instances_seen == 200
        assert next(s.subscribe(mode="websocket")).names == ["a"]
    never = RetryPolicy.never()
    with (
        Client(keyed_server.url, api_key="wrong", retry=never) as c,
        pytest.raises(fc.Unauthorized),
    ):
        c.stream(s.id, producer="p", next_seq=1).stream_instances(X, y)
