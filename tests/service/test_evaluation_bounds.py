"""GET /evaluation is bounded: its cost in model fits before it queues, the time budget
once it runs, the queries a tenant (and everyone) may have under way, and a computation
nobody waits for any more stops."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import httpx
import numpy as np
import pytest

from featurestream.config import Settings
from featurestream.engine import evaluation as judged
from featurestream.engine.core import StreamEngine
from featurestream.errors import LimitExceeded, QuotaExceeded, RequestTooExpensive
from featurestream.store.memory import InMemoryStore
from tests import support
from tests.support import ServeProcess


def _columns(X: np.ndarray) -> list[dict[str, Any]]:
    return [{"name": f"x{j}", "values": X[j].tolist()} for j in range(X.shape[0])]


def test_an_evaluation_past_the_time_budget_answers_413_on_a_real_server(
    servers: list[ServeProcess],
) -> None:
    # Regression: an evaluation ran as long as its fits took (30 s and more), whatever
    # the budget of a request.
    server = ServeProcess("memory://", env={"FEATURESTREAM_REQUEST_TIME_BUDGET": "0.2"})
    servers.append(server.start())
    X, y = support.wdbc()
    with httpx.Client(base_url=server.url, timeout=60) as c:
        body = {"id": "e", "algorithm": "saola", "target": y.tolist()}
        assert c.post("/v1/streams", json=body).status_code == 201
        r = c.post("/v1/streams/e/features", json={"features": _columns(X)})
        k = len(r.json()["selected"])
        assert 2 <= k <= 19  # (k + 1) x 100 fits stay within MAX_FITS
        r = c.get(
            "/v1/streams/e/evaluation", params={"model": "logistic", "folds": 10, "repeats": 10}
        )
        assert r.status_code == 413, r.text
        doc = r.json()
        assert doc["type"] == "/problems/request-too-expensive"
        assert doc["unit"] == "fits" and doc["total"] == (k + 1) * 100
        assert doc["completed"] < doc["total"]
        # Nothing is left stuck: the next query runs (within the budget, or stopped by it
        # on a machine too busy for even that one).
        r = c.get("/v1/streams/e/evaluation", params={"folds": 2})
        assert r.status_code == 200 or r.json()["type"] == "/problems/request-too-expensive"


def test_cost_counts_model_fits_and_is_refused_before_queueing() -> None:
    state = SimpleNamespace(selected=[f"f{i}" for i in range(417)], y=np.zeros(30))
    view = judged.StateView({"kind": "features"}, "i", 1, "saola", state)
    calls: list[int] = []

    async def run(fn: Callable[[], Any]) -> Any:
        calls.append(1)
        return fn()

    cache = judged.EvaluationCache()
    with pytest.raises(LimitExceeded) as err:
        asyncio.run(judged.evaluate(view, cache, "s", "logistic", 5, 1, run))
    assert "2090 model fits" in str(err.value)  # (417 + 1) x 5 x 1
    assert err.value.maximum == judged.MAX_FITS
    assert calls == [] and not cache.running and not cache.tenants


def _engine() -> StreamEngine:
    X, y = support.wdbc()

    async def setup() -> StreamEngine:
        engine = StreamEngine(InMemoryStore(), Settings(store_url="memory://"))
        await engine.create(
            stream_id="s", algorithm="saola", params=None, target=y.tolist(), feature_names=None
        )
        await engine.add_features("s", [f"x{j}" for j in range(X.shape[0])], X)
        return engine

    return asyncio.run(setup())


def test_queries_under_way_are_bounded_per_tenant_and_refused_429() -> None:
    engine = _engine()

    async def scenario() -> None:
        gate = asyncio.Event()

        async def held(fn: Callable[[], Any]) -> Any:
            await gate.wait()
            return fn()

        def ask(tenant: str, folds: int) -> asyncio.Task[Any]:
            return asyncio.ensure_future(
                engine.evaluation("s", "knn", folds, 1, held, tenant=tenant)
            )

        mine = [ask("a", folds) for folds in range(2, 2 + judged.MAX_QUEUED_PER_TENANT)]
        await asyncio.sleep(0.05)
        with pytest.raises(QuotaExceeded) as err:
            await engine.evaluation("s", "knn", 9, 1, held, tenant="a")
        assert err.value.maximum == judged.MAX_QUEUED_PER_TENANT
        # The same query again waits for the one computation (no new one, no refusal).
        again = ask("a", 2)
        # Another tenant is not refused for tenant a's queries.
        theirs = ask("b", 9)
        await asyncio.sleep(0.05)
        assert engine.evaluations.tenants == {"a": 4, "b": 1}
        gate.set()
        docs = await asyncio.gather(*mine, again, theirs)
        assert [d["folds"] for d in docs] == [2, 3, 4, 5, 2, 9]
        assert docs[0] == docs[4]
        assert not engine.evaluations.tenants and not engine.evaluations.running

    asyncio.run(scenario())


def test_all_tenants_together_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judged, "MAX_QUEUED", 2)
    engine = _engine()

    async def scenario() -> None:
        gate = asyncio.Event()

        async def held(fn: Callable[[], Any]) -> Any:
            await gate.wait()
            return fn()

        first = [
            asyncio.ensure_future(engine.evaluation("s", "knn", f, 1, held, tenant=t))
            for f, t in ((2, "a"), (3, "b"))
        ]
        await asyncio.sleep(0.05)
        with pytest.raises(QuotaExceeded) as err:
            await engine.evaluation("s", "knn", 4, 1, held, tenant="c")
        assert err.value.maximum == 2
        gate.set()
        await asyncio.gather(*first)

    asyncio.run(scenario())


def test_a_computation_nobody_waits_for_stops_at_its_next_check() -> None:
    engine = _engine()
    checks: list[int] = []
    real = judged.Work.__call__

    def counted(self: judged.Work, done: int) -> None:
        checks.append(done)
        real(self, done)

    async def scenario() -> None:
        gate = asyncio.Event()
        outcome: list[BaseException | None] = []

        async def held(fn: Callable[[], Any]) -> Any:
            await gate.wait()
            try:
                return fn()
            except BaseException as exc:
                outcome.append(exc)
                raise

        caller = asyncio.ensure_future(engine.evaluation("s", "logistic", 5, 2, held))
        await asyncio.sleep(0.05)
        caller.cancel()  # the client left
        with pytest.raises(asyncio.CancelledError):
            await caller
        gate.set()
        for _ in range(100):
            if outcome:
                break
            await asyncio.sleep(0.01)
        assert len(outcome) == 1 and isinstance(outcome[0], judged.Abandoned)
        assert checks == [0]  # stopped before its first fit
        assert not engine.evaluations.running and not engine.evaluations.tenants
        # Asked again, it is computed anew, in full.
        doc = await engine.evaluation("s", "logistic", 5, 2, held)
        assert doc["folds"] == 5 and len(checks) == 1 + doc["features"] + 1

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(judged.Work, "__call__", counted)
        asyncio.run(scenario())


def test_the_budget_is_checked_between_sets_of_fits() -> None:
    engine = _engine()
    now = [0.0]

    async def view() -> judged.StateView:
        return await engine._view("s")

    v = asyncio.run(view())
    k = len(v.state.selected)
    budget = judged.Budget(1.0, "fits", (k + 1) * 2, clock=lambda: now[0])
    work = judged.Work(budget)
    seen: list[int] = []
    real = judged.Work.__call__

    def tick(self: judged.Work, done: int) -> None:
        seen.append(done)
        if len(seen) == 3:
            now[0] = 5.0  # past the deadline before the third set
        real(self, done)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(judged.Work, "__call__", tick)
        started = time.monotonic()
        with pytest.raises(RequestTooExpensive) as err:
            judged.cross_validation(v, "knn", 2, 1, work)
    assert time.monotonic() - started < 30
    assert seen == [0, 2, 4]
    assert (err.value.completed, err.value.total, err.value.unit) == (2, (k + 1) * 2, "fits")


def test_tenants_take_turns_at_the_evaluation_slot() -> None:
    # Regression: first come, first served: after tenant a's queries, tenant b's waited
    # for all of them (a 0.18 s evaluation took 48 s).
    engine = _engine()
    order: list[tuple[str, int]] = []

    async def scenario() -> None:
        def ran(tenant: str) -> Callable[[Callable[[], Any]], Any]:
            async def run(fn: Callable[[], Any]) -> Any:
                doc = fn()
                order.append((tenant, doc["folds"]))
                await asyncio.sleep(0.01)
                return doc

            return run

        asks = [
            engine.evaluation("s", "knn", folds, 1, ran(tenant), tenant=tenant)
            for tenant, folds in (("a", 2), ("a", 3), ("a", 4), ("a", 5), ("b", 6))
        ]
        await asyncio.gather(*asks)

    asyncio.run(scenario())
    assert order == [("a", 2), ("a", 3), ("b", 6), ("a", 4), ("a", 5)]
    assert engine.evaluations.gate.busy == 0 and engine.evaluations.gate.waiting == 0
