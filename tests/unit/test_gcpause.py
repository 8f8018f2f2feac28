"""Large writes neither trigger garbage collections nor free their documents in one step.

A write of thousands of columns makes containers per column (decisions,
response documents, events); the cyclic collector walked them while they were
alive, holding the interpreter lock for 10-20 ms, and freeing them all at once
held it for milliseconds more: the event loop, and every read it was about to
answer, waited. These tests pin the mechanisms: collection paused while a
large write is applied, documents freed a piece at a time, long arrays encoded
a piece at a time, and the server's interpreter switch interval.
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from featurestream import gcpause
from featurestream.config import Settings
from featurestream.engine import wire
from featurestream.engine.core import StreamEngine
from featurestream.selectors.saola import SAOLA
from featurestream.store.memory import InMemoryStore


def test_collection_is_paused_inside_and_resumes_after() -> None:
    assert gc.isenabled()
    with gcpause.paused():
        assert not gc.isenabled()
        with gcpause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with gcpause.paused(False):
        assert gc.isenabled()


def test_a_process_with_collection_off_keeps_it_off() -> None:
    gc.disable()
    try:
        with gcpause.paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_release_frees_every_item_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gcpause, "RELEASE_PIECE", 7)
    sizes: list[int] = []

    class Watched(list):  # type: ignore[type-arg]
        def __delitem__(self, key: Any) -> None:
            sizes.append(len(self[key]))
            super().__delitem__(key)

    a = Watched({"i": i} for i in range(30))
    b: list[Any] = []
    gcpause.release(a, b)
    assert a == [] and b == []
    assert sizes == [7, 7, 7, 7, 2]


def _engine_write(columns: int) -> list[bool]:
    """Collection's state each time SAOLA decides a batch, in a write of ``columns``."""
    seen: list[bool] = []
    real = SAOLA._learn_batch

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real(self, *args, **kwargs)

    async def run() -> None:
        engine = StreamEngine(InMemoryStore(), Settings())
        rng = np.random.default_rng(0)
        y = (rng.random(50) < 0.5).astype(float).tolist()
        await engine.create(
            stream_id="s", algorithm="saola", params=None, target=y, feature_names=None
        )
        X = rng.random((columns, 50))
        names = [f"f{j}" for j in range(columns)]
        await engine.add_features("s", names, X, producer="p", seq=1)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SAOLA, "_learn_batch", spy)
        asyncio.run(run())
    return seen


def test_a_large_write_is_applied_with_collection_paused() -> None:
    assert _engine_write(1500) and not any(_engine_write(1500))
    assert gc.isenabled()


def test_a_small_write_leaves_collection_alone() -> None:
    assert _engine_write(20) == [True]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(items=st.lists(json_values, max_size=40), piece=st.integers(1, 9))
def test_a_long_array_encodes_to_the_same_bytes(items: list[Any], piece: int) -> None:
    old = wire.ARRAY_PIECE
    wire.ARRAY_PIECE = piece
    try:
        doc = {"a": 1, "items": wire.long_array(items), "z": [2]}
        assert orjson.dumps(doc) == orjson.dumps({"a": 1, "items": items, "z": [2]})
    finally:
        wire.ARRAY_PIECE = old


def test_the_server_switches_threads_as_its_setting_says() -> None:
    code = (
        "import sys; from featurestream.api.app import app_from_env; app_from_env(); "
        "print(sys.getswitchinterval())"
    )
    env = {
        **os.environ,
        "FEATURESTREAM_SWITCH_INTERVAL": "0.0003",
        "FEATURESTREAM_STORE": "memory://",
    }
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-500:]
    assert float(out.stdout.split()[-1]) == pytest.approx(0.0003)
    env.pop("FEATURESTREAM_SWITCH_INTERVAL")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert float(out.stdout.split()[-1]) == pytest.approx(Settings().switch_interval)
