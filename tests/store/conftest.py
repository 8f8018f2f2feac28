from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from featurestream.config import Settings
from featurestream.store import StateStore, open_store


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def store_settings(request: pytest.FixtureRequest, key_prefix: str) -> Iterator[Settings]:
    if request.param == "memory":
        yield Settings(store_url="memory://")
    else:
        yield Settings(store_url=request.getfixturevalue("redis_url"), key_prefix=key_prefix)


@pytest.fixture
async def store(store_settings: Settings) -> AsyncIterator[StateStore]:
    st = open_store(store_settings)
    await st.open()
    yield st
    await st.close()
