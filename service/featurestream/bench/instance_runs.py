"""Instance streams: one selector on one data set, in process or over one WebSocket.

The service run sends pipelined frames encoded beforehand: binary (``raw``,
labels in the last column for supervised selectors: float32 .npy for dense
sets, .npz of the non-zeros for sparse ones) or JSON text frames (``json``).
The in-process run applies the same frames to the selector directly. Times
cover the frames only, from the first one sent to the last ack.
"""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

from featurestream.bench.datasets import InstanceData
from featurestream.bench.runs import (
    FRAME_WINDOW,
    Deadline,
    RunResult,
    check,
    peak_rss,
    run_result,
    service_result,
    start_rss,
)
from featurestream.bench.server import SpawnedServer
from featurestream.engine import catalogue
from featurestream.selectors import REGISTRY
from featurestream.selectors.base import InstanceSelector


def _frame_bounds(data: InstanceData) -> list[tuple[int, int]]:
    f = data.spec.frame
    return [(lo, min(data.spec.n, lo + f)) for lo in range(0, data.spec.n, f)]


def instances_in_process(
    data: InstanceData, algorithm: str, params: dict[str, Any], budget: float | None = None
) -> RunResult:
    cls = REGISTRY[algorithm]
    assert issubclass(cls, InstanceSelector)
    params_obj = cls.params_type.from_mapping(params)
    bounds = _frame_bounds(data)
    # Untimed: the first batch loads compiled kernels (once per process), as the
    # service runs warm their server first.
    lo, hi = bounds[0]
    first = data.X[lo:hi] if data.spec.sparse else data.rows(lo, hi)
    warm = cls.start(params_obj, data.names)
    if cls.supervised:
        warm.learn_instances(first, data.y[lo:hi])
    else:
        warm.learn_instances(first)
    sel = cls.start(params_obj, data.names)
    deadline = Deadline(budget)
    done = 0
    elapsed = 0.0
    for lo, hi in bounds:
        # Sparse sets go in as CSR rows, as the service receives them.
        X = data.X[lo:hi] if data.spec.sparse else data.rows(lo, hi)
        t0 = time.perf_counter()
        if cls.supervised:
            sel.learn_instances(X, data.y[lo:hi])
        else:
            sel.learn_instances(X)
        elapsed += time.perf_counter() - t0
        done = hi
        if deadline.passed():
            break
    chosen = list(sel.selected())
    return run_result(data, algorithm, "in-process", params, done, elapsed, chosen)


def _frame_payload(data: InstanceData, lo: int, hi: int, supervised: bool) -> bytes:
    """A binary frame: .npz sparse rows for sparse sets, .npy otherwise; labels last."""
    if data.spec.sparse:
        import scipy.sparse

        part = data.X[lo:hi]
        if supervised:
            part = scipy.sparse.hstack([part, data.y[lo:hi, None]], format="csr")
        buf = io.BytesIO()
        scipy.sparse.save_npz(buf, part.astype(np.float32), compressed=False)
        return buf.getvalue()
    X = data.rows(lo, hi, dtype="float32")
    if supervised:
        X = np.column_stack([X, data.y[lo:hi].astype(np.float32)])
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(X))
    return buf.getvalue()


def _frame_json(data: InstanceData, lo: int, hi: int, supervised: bool) -> str:
    """A JSON text frame of rows ``lo:hi`` (labels in ``y``)."""
    body: dict[str, Any] = {"X": data.rows(lo, hi).tolist()}
    if supervised:
        body["y"] = data.y[lo:hi].tolist()
    return json.dumps(body, separators=(",", ":"))


def instances_service(
    url: str,
    data: InstanceData,
    algorithm: str,
    params: dict[str, Any],
    budget: float | None = None,
    server: SpawnedServer | None = None,
    window: int = FRAME_WINDOW,
    path: str = "raw",
) -> RunResult:
    """Every frame over one WebSocket, pipelined (``window`` unanswered); timed to the last ack."""
    import httpx

    supervised = catalogue.supervised(algorithm)
    bounds = _frame_bounds(data)
    encode = _frame_json if path == "json" else _frame_payload
    payloads = [encode(data, lo, hi, supervised) for lo, hi in bounds]
    sid = f"bench-{uuid.uuid4().hex[:10]}"
    deadline = Deadline(budget)
    with httpx.Client(base_url=url, timeout=600) as c:
        spec = {"algorithm": algorithm, "params": params, "feature_names": data.names}
        # Untimed: the first frame of its kind loads the server's compiled kernels
        # (once per process; a server warms them at start-up unless told not to).
        scratch = f"{sid}-warm"
        check(c.post("/v1/streams", json={"id": scratch, **spec}))
        try:
            stream_frames(url, scratch, payloads[:1], window)
        finally:
            c.delete(f"/v1/streams/{scratch}")
        check(c.post("/v1/streams", json={"id": sid, **spec}))
        try:
            note = start_rss(server)
            acked, dt, sent = stream_frames(url, sid, payloads, window, deadline)
            peak = peak_rss(server)
            selected = check(c.get(f"/v1/streams/{sid}/selected")).json()["features"]
            chosen = [f["name"] for f in selected]
        finally:
            c.delete(f"/v1/streams/{sid}")
    done = bounds[acked - 1][1] if acked else 0
    return service_result(
        data, algorithm, params, done, dt, chosen, sent=sent, peak=peak, note=note, path=path
    )


def stream_frames(
    url: str,
    sid: str,
    payloads: Sequence[bytes | str],
    window: int = FRAME_WINDOW,
    deadline: Deadline | None = None,
) -> tuple[int, float, int]:
    """Send binary frames over one WebSocket, pipelined; ``(acks, seconds, bytes sent)``.

    At most ``window`` frames wait for their ack (as the client library's
    ``window``); sending stops after the frame that passes ``deadline``. The
    time runs from the first frame sent to the last ack. A refused frame
    raises RuntimeError.
    """
    from websockets.sync.client import connect

    ws_url = url.replace("http://", "ws://", 1) + f"/v1/streams/{sid}/ws?producer=bench"
    sent_count = [0]
    sent_bytes = [0]
    errors: list[BaseException] = []
    finished = threading.Event()
    window_left = threading.Semaphore(window)
    # No client keepalive: a backpressured server legitimately leaves pings unread.
    with connect(ws_url, max_size=None, compression=None, ping_interval=None) as ws:
        json.loads(ws.recv(timeout=60))  # the selection on connect

        def send() -> None:
            try:
                for p in payloads:
                    window_left.acquire()
                    ws.send(p)
                    sent_bytes[0] += len(p)
                    sent_count[0] += 1
                    if deadline is not None and deadline.passed():
                        break
            except BaseException as exc:  # reported by the receiving thread
                errors.append(exc)
            finally:
                finished.set()

        t0 = time.perf_counter()
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        acked = 0
        while True:
            if acked >= sent_count[0]:
                if finished.is_set() and acked >= sent_count[0]:
                    break
                # Every frame sent so far is acknowledged: wait for the sender.
                finished.wait(0.002)
                continue
            msg = json.loads(ws.recv(timeout=600))
            if "ack" in msg:
                acked += 1
                window_left.release()
            elif "error" in msg:
                raise RuntimeError(f"frame {msg.get('seq')} refused: {msg['error']}")
        dt = time.perf_counter() - t0
        sender.join(10)
    if errors:
        raise RuntimeError(f"sending failed: {errors[0]!r}")
    return acked, dt, sent_bytes[0]


__all__ = ["instances_in_process", "instances_service", "stream_frames"]
