"""The async client in process (httpx's ASGI transport), on the memory store and on Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import numpy as np
import pandas as pd
import pytest

import featurestream_client as fc
from featurestream.api import create_app
from featurestream.config import Settings
from featurestream_client import AsyncClient, Client, RetryPolicy
from tests import support
from tests.client.live import LiveServer

pytestmark = pytest.mark.anyio
NAMES = support.names(30)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def settings(request: pytest.FixtureRequest, key_prefix: str) -> Settings:
    if request.param == "memory":
        return Settings(store_url="memory://")
    return Settings(store_url=request.getfixturevalue("redis_url"), key_prefix=key_prefix)


@pytest.fixture
async def aclient(settings: Settings) -> AsyncIterator[AsyncClient]:
    app = create_app(settings)
    # httpx's ASGI transport does not run the lifespan: enter it here.
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with AsyncClient("http://featurestream.test", transport=transport) as c:
            yield c


async def test_async_features_equal_the_sync_client(
    aclient: AsyncClient, memory_server: LiveServer, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    s = await aclient.create_stream("saola", target=y, params={"alpha": 0.01})
    result = await s.add_features(pd.DataFrame(X, columns=NAMES), chunk_columns=4)
    with Client(memory_server.url) as sync:
        reference = sync.create_stream("saola", target=y).add_features(X, names=NAMES)
    assert result.decisions == reference.decisions and result.selected == ("f21", "f27")
    assert result.seqs == tuple(range(1, 9)) and s.next_seq == 9
    assert (await s.selected()).names == ["f21", "f27"]
    events = [e async for e in s.iter_events(page_size=10)]
    assert [e.seq for e in events if e.type == "batch"] == list(range(1, 9))
    assert (await s.status())["features_seen"] == 30
    assert s.id in {i.id for i in await aclient.streams()}
    assert (await aclient.get_stream(s.id)).info == (await s.refresh())
    await s.delete()
    with pytest.raises(fc.StreamNotFound):
        await s.selected()


async def test_async_groups_instances_and_errors(aclient: AsyncClient) -> None:
    case = support.expected()["instance_streams"]["ofs"]
    X, y = support.instances()
    s = await aclient.create_stream(
        "ofs", feature_names=support.names(100, "x"), params=case["params"]
    )
    result = await s.add_instances(X, y, batch_size=400)
    assert list(result.selected) == [f"x{i}" for i in case["selected"]]
    with pytest.raises(fc.WrongStreamKind):
        await aclient.stream(s.id).add_features(np.ones((3, 1)))
    with pytest.raises(fc.InvalidParameter):
        await aclient.create_stream("saola", target=[1.0, 2.0, 3.0], params={"alpha": 2})
    g = await aclient.create_stream("group_saola", target=np.arange(20.0))
    out = await g.add_groups({"a": np.column_stack([np.arange(20.0), np.ones(20)])})
    assert [d.name for d in out.decisions] == ["a:0", "a:1"]
    assert [a.name async for a in _names(aclient)]
    assert await aclient.health() and await aclient.ready()


async def _names(client: AsyncClient) -> AsyncIterator[fc.Algorithm]:
    for a in await client.algorithms():
        yield a


async def test_async_named_producer_resumes(aclient: AsyncClient) -> None:
    y = np.arange(10.0)
    s = await aclient.create_stream("saola", target=y, producer="etl")
    await s.add_features(np.column_stack([y]), names=["a"])
    later = aclient.stream(s.id, producer="etl")
    result = await later.add_features(np.column_stack([y**2]), names=["b"])
    assert result.seqs == (2,)


async def test_async_retries_a_lost_answer_once(
    settings: Settings, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    app = create_app(settings)

    class LoseFirstFeatures(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.ASGITransport(app=app)
            self.lost = 0

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await self.inner.handle_async_request(request)
            if request.url.path.endswith("/features") and self.lost == 0:
                self.lost += 1
                await response.aread()
                raise httpx.ConnectError("answer lost", request=request)
            return response

    async with app.router.lifespan_context(app):
        transport = LoseFirstFeatures()
        retry = RetryPolicy(backoff=0.001)
        async with AsyncClient("http://t", transport=transport, retry=retry) as c:
            s = await c.create_stream("saola", target=y)
            result = await s.add_features(X, names=NAMES)
            assert transport.lost == 1 and result.replayed and result.version == 1
            assert (await s.status())["features_seen"] == 30
