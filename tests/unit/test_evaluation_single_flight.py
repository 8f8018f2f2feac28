"""Identical evaluation queries asked at once share one computation, which a caller that
goes away does not cancel."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from featurestream.engine import evaluation

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_one_computation_for_queries_asked_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    release = threading.Event()

    def cross_validation(
        view: Any, model: str, folds: int, repeats: int, work: Any
    ) -> dict[str, Any]:
        calls.append(view.version)
        release.wait(10)
        return {"version": view.version, "score": 0.5}

    monkeypatch.setattr(evaluation, "cross_validation", cross_validation)

    async def run(fn: Any) -> Any:
        return await asyncio.to_thread(fn)

    algorithm = sorted(evaluation.FEATURE_COLUMNS)[0]
    # A small state: its cost (2 fits x 5 folds) passes the bounds checked before queueing.
    state = SimpleNamespace(selected=["a"], y=[0.0] * 20)
    view = SimpleNamespace(
        info={"kind": "features"}, algorithm=algorithm, incarnation="i", version=3, state=state
    )
    cache = evaluation.EvaluationCache()
    ask = lambda: evaluation.evaluate(view, cache, "s", "knn", 5, 1, run)  # noqa: E731
    first = asyncio.ensure_future(ask())
    await asyncio.sleep(0.05)
    others = [asyncio.ensure_future(ask()) for _ in range(4)]
    await asyncio.sleep(0.05)
    first.cancel()  # the first caller goes away: the others still get the answer
    release.set()
    docs = await asyncio.gather(*others)
    assert calls == [3]
    assert all(d == {"version": 3, "score": 0.5} for d in docs)
    assert cache.get(("s", "i", 3, "knn", 5, 1)) == docs[0] and not cache.running
    # Cached now: no new computation.
    assert await ask() == docs[0] and calls == [3]
