"""Hostile array bodies against a real server process: a 4xx problem, and the process lives.

Sparse ``.npz`` bodies whose index arrays point out of range used to crash the
process inside scipy's conversions (a segfault, on ``/features``, on
``/instances`` with ``X-Label-Column: last`` and on WebSocket frames); a
kilobyte of ``.npz`` declaring the shape (8, 3e8) took it to more than a
gigabyte and stalled ``/healthz``; a zip whose header asks for version 10.8
and an event id beyond 64 bits were answered 500.
"""

from __future__ import annotations

import io
import json
import struct
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import scipy.sparse as sp
from websockets.sync.client import connect

from tests.support import ServeProcess, zip_version_needed

pytestmark = pytest.mark.slow

NPZ = {"content-type": "application/x-npz"}
LABELLED = {**NPZ, "X-Label-Column": "last"}


def npy(a: Any) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(a))
    return buf.getvalue()


def archive(
    indices: Any,
    indptr: Any,
    data: Any,
    shape: Any,
    fmt: bytes = b"csr",
    method: int = zipfile.ZIP_STORED,
) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, value in (
            ("format", np.array(fmt)),
            ("shape", np.asarray(shape)),
            ("data", np.asarray(data, dtype=np.float64)),
            ("indices", np.asarray(indices)),
            ("indptr", np.asarray(indptr)),
        ):
            zf.writestr(f"{name}.npy", npy(value))
    return buf.getvalue()


# (name, body) pairs for a csr matrix of 1 row and 4 columns.
ATTACKS = [
    ("indices out of range", archive([10**9, -(10**9), 0], [0, 3], [1.0, 2.0, 3.0], (1, 4))),
    ("index 2**63", archive(np.array([2**63], np.uint64), [0, 1], [1.0], (1, 4))),
    ("indptr past the data", archive([0], [0, 1000], [1.0], (1, 4))),
    ("zip version 10.8", zip_version_needed(archive([0], [0, 1], [1.0], (1, 4)), 108)),
]
# The report's shape bomb: under a kilobyte, deflated, declaring 8 x 3e8.
# A valid, empty csr matrix: converting it to csc would allocate 3e8 column pointers.
SHAPE_BOMB = archive(
    np.zeros(0, np.int32), [0] * 9, [], (8, 300_000_000), method=zipfile.ZIP_DEFLATED
)
NEXT_ID = 18446744073709551616  # 2**64: beyond a Redis stream id


@pytest.fixture(scope="module")
def server() -> Iterator[ServeProcess]:
    s = ServeProcess("memory://").start()
    try:
        _create(s.url)
        alive(s)  # compiled before the attacks
        yield s
    finally:
        s.kill()


def _create(url: str) -> None:
    streams = [
        # Instance stream "o" of 4 features, supervised (labels in the last column).
        {
            "id": "o",
            "algorithm": "ofs",
            "params": {"num_features": 1},
            "feature_names": list("abc"),
        },
        # Feature stream "f" over 4 instances.
        {"id": "f", "algorithm": "saola", "target": [1.0, 2.0, 3.0, 4.0]},
    ]
    for body in streams:
        assert httpx.post(url + "/v1/streams", json=body, timeout=10).status_code == 201


def alive(s: ServeProcess) -> None:
    """The process lives, answers /healthz, and takes a valid write."""
    assert s.proc is not None and s.proc.poll() is None, "the server process died"
    assert httpx.get(s.url + "/healthz", timeout=5).status_code == 200
    good = io.BytesIO()
    sp.save_npz(good, sp.csr_matrix(np.array([[1.0, 0.0, 2.0, 1.0]])))
    # The first write of a process compiles the selector's kernels: seconds on a busy host.
    r = httpx.post(
        s.url + "/v1/streams/o/instances", content=good.getvalue(), headers=LABELLED, timeout=60
    )
    assert r.status_code == 200, r.text


def rss_bytes(s: ServeProcess) -> int:
    assert s.proc is not None
    for line in Path(f"/proc/{s.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def assert_problem(r: httpx.Response, statuses: tuple[int, ...] = (413, 422)) -> dict[str, Any]:
    assert r.status_code in statuses, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/problem+json")
    doc = r.json()
    assert doc["status"] == r.status_code
    return dict(doc)


@pytest.mark.parametrize(("name", "body"), ATTACKS, ids=[n for n, _ in ATTACKS])
def test_hostile_npz_bodies_are_refused_on_every_route(
    server: ServeProcess, name: str, body: bytes
) -> None:
    url = server.url + "/v1/streams"
    for route, headers in (("/o/instances", LABELLED), ("/o/instances", NPZ), ("/f/features", NPZ)):
        doc = assert_problem(httpx.post(url + route, content=body, headers=headers, timeout=10))
        assert doc["type"] in ("/problems/invalid-input", "/problems/limit-exceeded"), doc
        alive(server)
    # The same bytes as a WebSocket frame: an error message, and the connection goes on.
    with connect(
        server.url.replace("http", "ws") + "/v1/streams/o/ws?producer=w-" + name.split()[0]
    ) as ws:
        assert json.loads(ws.recv(10))["type"] == "selection"
        ws.send(body)
        good = io.BytesIO()
        sp.save_npz(good, sp.csr_matrix(np.array([[0.0, 1.0, 1.0, 0.0]])))
        ws.send(good.getvalue())
        answers = []
        while len(answers) < 2:
            msg = json.loads(ws.recv(10))
            if msg["type"] != "selection":
                answers.append(msg)
    assert answers[0]["type"] == "error", answers
    assert answers[0]["error"]["status"] in (413, 422)
    assert answers[1]["type"] == "ack", answers
    alive(server)


def test_a_shape_bomb_is_refused_before_anything_is_allocated(server: ServeProcess) -> None:
    assert len(SHAPE_BOMB) < 1200
    url = server.url + "/v1/streams"
    before = rss_bytes(server)
    stop = threading.Event()
    latencies: list[float] = []

    def poll() -> None:
        with httpx.Client(timeout=5) as c:
            while not stop.is_set():
                t0 = time.perf_counter()
                assert c.get(server.url + "/healthz").status_code == 200
                latencies.append(time.perf_counter() - t0)
                time.sleep(0.01)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    # The attacks start once the poller has been answered: its first request is timed too.
    deadline = time.monotonic() + 10
    while not latencies and poller.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert latencies, "/healthz never answered before the attacks"
    try:
        with httpx.Client(timeout=30) as c:
            for _ in range(5):
                for route, headers in (("/o/instances", LABELLED), ("/f/features", NPZ)):
                    doc = assert_problem(c.post(url + route, content=SHAPE_BOMB, headers=headers))
                    assert doc["limit"] == "max_columns_per_request"
                # The same declared shape as a dense .npy header: refused unread too.
                header = (
                    b"{'descr': '<f8', 'fortran_order': False, 'shape': (8, 300000000), }"
                ).ljust(117) + b"\n"
                dense = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header
                assert_problem(
                    c.post(
                        url + "/o/instances",
                        content=dense,
                        headers={"content-type": "application/x-npy"},
                    )
                )
    finally:
        stop.set()
        poller.join(10)
    grown = rss_bytes(server) - before
    assert grown < 200 * 1024 * 1024, f"the server grew by {grown / 2**20:.0f} MiB"
    assert latencies and max(latencies) < 0.2, f"/healthz took up to {max(latencies):.3f} s"
    alive(server)


def test_a_deflate_bomb_inflates_no_further_than_the_limit(tmp_path: Path) -> None:
    # 8 MiB of zeros deflate to about 8 KiB; the server takes 1 MiB bodies.
    zeros = npy(np.zeros(1 << 20))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, value in (("format", np.array(b"csr")), ("shape", np.array([1, 4]))):
            zf.writestr(f"{name}.npy", npy(value))
        zf.writestr("data.npy", zeros)
        zf.writestr("indices.npy", npy(np.zeros(1 << 20, np.int32)))
        zf.writestr("indptr.npy", npy(np.array([0, 1 << 20])))
    bomb = buf.getvalue()
    assert len(bomb) < 100_000
    s = ServeProcess("memory://", env={"FEATURESTREAM_MAX_REQUEST_BYTES": str(1 << 20)}).start()
    try:
        _create(s.url)
        r = httpx.post(s.url + "/v1/streams/o/instances", content=bomb, headers=LABELLED)
        assert assert_problem(r, (413,))["limit"] == "max_request_bytes"
        alive(s)
    finally:
        s.kill()


@pytest.mark.redis
def test_an_event_id_beyond_64_bits_is_a_4xx(redis_url: str, key_prefix: str) -> None:
    s = ServeProcess(redis_url, prefix=key_prefix).start()
    try:
        _create(s.url)
        events = s.url + "/v1/streams/f/events"
        for after in (f"{NEXT_ID}-0", f"1-{NEXT_ID}", f"{2**63}-0", "99999999999999999999-0"):
            r = httpx.get(events, params={"after": after}, timeout=10)
            doc = assert_problem(r, (422,))
            assert doc["errors"][0]["field"] == "after", doc
        # The largest id there can be is fine: nothing after it.
        r = httpx.get(events, params={"after": f"{2**63 - 1}-0"}, timeout=10)
        assert r.status_code == 200 and r.json()["events"] == []
        assert httpx.get(events, params={"limit": 1}, timeout=10).status_code == 200
    finally:
        s.kill()


@pytest.mark.parametrize(
    "body",
    [
        # A parameter name, and a parameter value, carrying a lone surrogate (a JSON
        # escape no UTF-8 encoder takes): the problem quoting it used to fail to encode.
        b'{"algorithm": "ofs", "params": {"x\\udcda": 1}, "feature_names": ["a", "b"]}',
        b'{"algorithm": "ofs", "params": {"mode": "\\ud800x"}, "feature_names": ["a", "b"]}',
    ],
    ids=["name", "value"],
)
def test_a_lone_surrogate_in_a_create_body_is_a_422_that_quotes_it(
    server: ServeProcess, body: bytes
) -> None:
    r = httpx.post(
        server.url + "/v1/streams",
        content=body,
        headers={"content-type": "application/json"},
        timeout=10,
    )
    doc = assert_problem(r, (422,))
    assert "\\ud" in doc["detail"], doc  # quoted as its escape, not dropped
    alive(server)


def test_a_label_beyond_float64_is_a_422(server: ServeProcess) -> None:
    # Found by the long body fuzz: an integer label of 400 digits overflowed float() in
    # the label check and was answered 500.
    huge = b"1" + b"0" * 400
    before = httpx.get(server.url + "/v1/streams/o/status", timeout=10).json()
    for path, body in (
        ("/v1/streams/o/instances", b'{"X": [[1.0, 2.0, 3.0]], "y": [' + huge + b"]}"),
        ("/v1/streams", b'{"algorithm": "saola", "target": [1, ' + huge + b"]}"),
    ):
        r = httpx.post(
            server.url + path, content=body, headers={"content-type": "application/json"}
        )
        doc = assert_problem(r, (422,))
        assert "label" in doc["detail"], doc
    assert httpx.get(server.url + "/v1/streams/o/status", timeout=10).json() == before
    alive(server)
