"""The client against a real ``featurestream serve`` process on Redis."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from featurestream_client import Client
from tests import support
from tests.client.live import has_websocket_route
from tests.support import ServeProcess

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture
def serve(redis_url: str, key_prefix: str) -> Iterator[ServeProcess]:
    server = ServeProcess(redis_url, key_prefix).start()
    yield server
    server.stop()


def test_client_against_a_served_process_on_redis(
    serve: ServeProcess, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    names = support.names(30)
    with Client(serve.url) as c:
        assert c.health() and c.ready()
        s = c.create_stream("saola", target=y, params={"alpha": 0.01}, id="served")
        result = s.add_features(X, names=names, chunk_columns=10)
        assert list(result.selected) == ["f21", "f27"] and result.seqs == (1, 2, 3)
        assert [e.seq for e in s.iter_events() if e.type == "batch"] == [1, 2, 3]
        case = support.expected()["instance_streams"]["ofs"]
        Xi, yi = support.instances()
        inst = c.create_stream("ofs", feature_names=support.names(100, "x"), params=case["params"])
        if has_websocket_route():
            out = inst.stream_instances(Xi, yi, batch_size=400)
        else:
            out = inst.add_instances(Xi, yi, batch_size=400)
        assert list(out.selected) == [f"x{i}" for i in case["selected"]]
        assert out.instances_seen == 2000
    # A second process (another client) sees the same state.
    with Client(serve.url) as other:
        assert other.stream("served").selected().names == ["f21", "f27"]
        later = other.stream("served", producer=s.producer)
        assert later.add_features(np.column_stack([-y]), names=["neg"]).seqs == (4,)
