"""Compute worker processes (engine/compute.py): the same answers as computing in the
serving process, a state sent to a worker only when its copy is not current, and a
worker killed mid-write that loses nothing acknowledged and applies nothing twice."""

from __future__ import annotations

import io
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from featurestream.config import Settings
from featurestream.engine import StreamEngine
from featurestream.engine.compute import Threads, Workers
from featurestream.store.memory import InMemoryStore
from tests.support import ServeProcess

pytestmark = pytest.mark.anyio

SETTINGS = Settings(store_url="memory://")
NPY = "application/x-npy"


def _children(pid: int) -> list[int]:
    """The compute workers a serving process started (not multiprocessing's tracker)."""
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += [int(c) for c in f.read().split()]
    workers = []
    for c in found:
        try:
            with open(f"/proc/{c}/cmdline", "rb") as f:
                if b"spawn_main" in f.read():
                    workers.append(c)
        except FileNotFoundError:
            continue
    return workers


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def _engine_writes(engine: StreamEngine) -> list[bytes]:
    """Two streams, each written three times (features, then instances); the states."""
    rng = np.random.default_rng(3)
    y = rng.normal(size=60)
    await engine.create(
        stream_id="f", algorithm="saola", params=None, target=y.tolist(), feature_names=None
    )
    await engine.create(
        stream_id="i",
        algorithm="ofs",
        params={"num_features": 2},
        target=None,
        feature_names=["a", "b", "c", "d"],
    )
    for k in range(3):
        X = rng.normal(size=(5, 60))
        X[0] = y + 0.1 * rng.normal(size=60)
        await engine.add_features("f", [f"c{k}_{j}" for j in range(5)], X)
        rows = rng.normal(size=(20, 4))
        await engine.add_instances("i", rows, np.where(rows[:, 1] > 0, 1.0, 0.0))
    return [(await engine.store.load(sid)).blob for sid in ("f", "i")]


async def test_workers_commit_the_bytes_threads_commit_and_get_each_state_once() -> None:
    by_threads = await _engine_writes(StreamEngine(InMemoryStore(), SETTINGS, compute=Threads()))
    workers = Workers(2, SETTINGS.cache_streams, SETTINGS.cache_bytes)
    try:
        engine = StreamEngine(InMemoryStore(), SETTINGS, compute=workers)
        assert await _engine_writes(engine) == by_threads
        # Created here: each state went to its worker once (its first write); the
        # worker kept every state it made since.
        assert workers.states_sent == 2
        # Read again from the store (another process may have written): sent again.
        engine.cache.drop("i")
        await engine.add_instances("i", np.ones((1, 4)), np.ones(1))
        assert workers.states_sent == 3
        assert workers.worker_of("i") == Workers(2, 0, 0).worker_of("i")
    finally:
        workers.close()


def test_a_refusal_from_a_worker_keeps_its_fields() -> None:
    """Errors cross the process boundary whole (pickled as their attributes)."""
    import pickle

    from featurestream.errors import InvalidParameter, RequestTooExpensive

    err = pickle.loads(pickle.dumps(InvalidParameter("bad k", parameter="k")))
    assert type(err) is InvalidParameter and err.parameter == "k" and err.message == "bad k"
    slow = RequestTooExpensive(completed=3, total=9, unit="columns", budget=1.0)
    back = pickle.loads(pickle.dumps(slow))
    assert back.fields() == slow.fields() and str(back) == str(slow)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def server(request: pytest.FixtureRequest, key_prefix: str) -> Iterator[ServeProcess]:
    url = "memory://" if request.param == "memory" else request.getfixturevalue("redis_url")
    proc = ServeProcess(url, prefix=key_prefix, env={"FEATURESTREAM_COMPUTE_WORKERS": "1"})
    proc.start()
    yield proc
    proc.kill()


def _columns(rng: np.random.Generator, y: np.ndarray, tag: str, b: int) -> dict[str, Any]:
    """A features write of ``b`` columns as a .npy body (rows are instances)."""
    X = rng.normal(size=(y.shape[0], b))
    X[:, 0] = y + 0.5 * rng.normal(size=y.shape[0])
    buf = io.BytesIO()
    np.save(buf, X)
    names = ",".join(f"{tag}{i}" for i in range(b))
    return {"content": buf.getvalue(), "headers": {"content-type": NPY, "x-feature-names": names}}


def _write(c: httpx.Client, sid: str, body: dict[str, Any], seq: int) -> httpx.Response:
    headers = {**body["headers"], "x-producer": "p", "x-seq": str(seq)}
    return c.post(f"/v1/streams/{sid}/features", content=body["content"], headers=headers)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_compute_worker_killed_mid_write_loses_nothing_and_applies_nothing_twice(
    server: ServeProcess,
) -> None:
    assert server.proc is not None
    rng = np.random.default_rng(5)
    y = rng.normal(size=1000)
    small, big = _columns(rng, y, "s", 20), _columns(rng, y, "b", 5000)
    with httpx.Client(base_url=server.url, timeout=120) as c:
        for sid in ("s", "twin"):
            body = {"id": sid, "algorithm": "fast_osfs", "target": y.tolist()}
            assert c.post("/v1/streams", json=body).status_code == 201
            assert _write(c, sid, small, 1).status_code == 200
        (worker,) = _children(server.proc.pid)
        answers: list[httpx.Response] = []
        write = threading.Thread(target=lambda: answers.append(_write(c, "s", big, 2)))
        # The worker is held (SIGSTOP) while the write reaches it, then killed with it.
        os.kill(worker, signal.SIGSTOP)
        write.start()
        time.sleep(1.5)
        assert write.is_alive(), [a.status_code for a in answers]
        os.kill(worker, signal.SIGKILL)
        write.join(60)
        (r,) = answers
        assert r.status_code == 503, r.text[:300]
        assert r.json()["type"] == "/problems/compute-unavailable"
        assert r.headers["retry-after"] == "1"
        # Nothing of it was committed; another worker took its place.
        assert c.get("/v1/streams/s/status").json()["version"] == 1
        assert _children(server.proc.pid) not in ([], [worker])
        # Sent again with its seq: applied once; once more: the stored answer.
        again = _write(c, "s", big, 2)
        assert again.status_code == 200 and again.json()["version"] == 2
        replay = _write(c, "s", big, 2)
        assert replay.headers.get("idempotent-replay") == "true"
        assert replay.json() == again.json()
        # The same as a stream that was never interrupted.
        assert _write(c, "twin", big, 2).status_code == 200
        mine, theirs = (c.get(f"/v1/streams/{sid}/selected").json() for sid in ("s", "twin"))
        assert mine["version"] == theirs["version"] == 2
        assert mine["features"] == theirs["features"]


@pytest.mark.timeout(120)
def test_the_compute_workers_end_with_a_killed_server(key_prefix: str) -> None:
    server = ServeProcess(
        "memory://", prefix=key_prefix, env={"FEATURESTREAM_COMPUTE_WORKERS": "2"}
    )
    server.start()
    assert server.proc is not None
    deadline = time.monotonic() + 30
    while len(workers := _children(server.proc.pid)) < 2:
        assert time.monotonic() < deadline, workers
        time.sleep(0.1)
    server.kill()
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers):
        assert time.monotonic() < deadline, "compute workers outlived their server"
        time.sleep(0.1)


def test_a_worker_computes_from_the_state_it_holds_and_asks_for_any_other() -> None:
    """The worker's side (``compute._serve``), called in this process."""
    from featurestream import codec
    from featurestream.engine import compute
    from featurestream.engine.budget import Budget
    from featurestream.engine.compute import Call
    from featurestream.engine.work import InstancesWork
    from featurestream.selectors import OFS, OFSParams

    compute._bounds[:] = [1, 1 << 30]  # one stream held at most
    compute._held.clear()
    sel = OFS.start(OFSParams(num_features=1), ["a", "b"])
    blob = codec.encode(sel.name, sel.params.to_dict(), sel.snapshot())
    info = {"id": "s", "kind": "instances"}

    def call(sid: str, token: str, nxt: str, state: bytes | None) -> Any:
        budget = Budget(0.0, "instances", 1)
        work = InstancesWork(
            None, "p", budget, "2026-01-01T00:00:00Z", b"", np.ones((1, 2)), np.ones(1)
        )
        return compute._serve(Call(sid, info, "inc", 0, token, state, nxt, work))

    assert call("s", "t0", "t1", None) is None  # holds nothing: asks for the state
    (body, sealed), outcome = call("s", "t0", "t1", blob)
    assert outcome is not None and sealed == b"" and b'"instances_seen":1' in body
    # Holds the state the write made, under its token: no state needed.
    assert call("s", "t1", "t2", None) is not None
    # Asked for another state of the stream (its commit failed, say): asks again.
    assert call("s", "t1", "t3", None) is None
    # Another stream pushes the first out (one held at most).
    assert call("u", "u0", "u1", blob) is not None
    assert list(compute._held) == ["u"]
    compute._held.clear()
