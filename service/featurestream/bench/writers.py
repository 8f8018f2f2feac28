"""The writers of ``featurestream bench latency``: what loads the stream while reads are timed.

Each runs in a process of its own until ``stop`` is set, and keeps ``counter``
at the number of items (instances, or feature columns) the server has
acknowledged so far. ``--writer``:

* ``raw``: float32 .npy frames over one WebSocket (no compression, encoded
  beforehand); feature columns as .npz bodies encoded beforehand;
* ``websockets``: a plain ``websockets`` client with its default connect
  options (permessage-deflate offered), float64 .npy frames;
* ``json``: JSON requests encoded beforehand (``POST .../instances`` of one
  frame's rows, or ``POST .../features`` of ``--chunk`` sparse columns);
* ``sdk``: the Python SDK (``stream_instances``, or ``add_features`` of the
  data set's own scipy.sparse matrix), encoding included.

A feature-stream writer ingests a dorothea-like set into SAOLA, again and again
under new names (``r00001.f12``, ...) into the same stream, until stopped.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

FRAME = 100
DIM = 1_000
WINDOW = 64


def frames(count: int, dtype: str = "float32", seed: int = 0) -> list[tuple[Any, Any]]:
    """``count`` labelled frames ``(X, y)`` of FRAME rows, d = DIM."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        X = rng.normal(size=(FRAME, DIM)).astype(np.float32)
        y = np.where(X[:, 0] + X[:, 1] > 0, 1.0, -1.0).astype(np.float32)
        out.append((X.astype(dtype), y.astype(dtype)))
    return out


def npy_frames(count: int, dtype: str = "float32") -> list[bytes]:
    out = []
    for X, y in frames(count, dtype):
        buf = io.BytesIO()
        np.save(buf, np.column_stack([X, y]))
        out.append(buf.getvalue())
    return out


def run(
    writer: str,
    ingest: str,
    url: str,
    sid: str,
    stop: Any,
    counter: Any,
    write_rate: float,
    chunk: int,
    quick: bool,
) -> None:
    """The writer process's entry point."""
    if ingest == "features":
        if writer == "sdk":
            features_writer(url, sid, stop, counter, chunk, quick)
        else:
            _features_http(writer, url, sid, stop, counter, chunk, quick)
    elif writer == "sdk":
        instances_writer(url, sid, stop, counter, write_rate)
    elif writer == "json":
        _instances_json(url, sid, stop, counter, write_rate)
    else:
        _instances_ws(url, sid, stop, counter, write_rate, plain=writer == "websockets")


def paced(stop: Any, write_rate: float) -> Iterator[int]:
    """Frame numbers 0, 1, 2, ..., frame k due at k * FRAME / write_rate s; ends on stop."""
    i = 0
    t0 = time.perf_counter()
    while not stop.is_set():
        if write_rate > 0:
            wait = t0 + i * FRAME / write_rate - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
        yield i
        i += 1


def _instances_ws(
    url: str, sid: str, stop: Any, counter: Any, write_rate: float, plain: bool
) -> None:
    from websockets.sync.client import connect

    payloads = npy_frames(50, "float64" if plain else "float32")
    ws_url = url.replace("http://", "ws://", 1) + f"/v1/streams/{sid}/ws?producer=writer"
    # A plain client keeps every default (compression offered, keepalive pings); the
    # raw writer turns compression and pings off, as the bench's own runs do.
    options: dict[str, Any] = {} if plain else {"compression": None, "ping_interval": None}
    with connect(ws_url, max_size=None, **options) as ws:
        json.loads(ws.recv(timeout=60))
        room = threading.Semaphore(WINDOW)
        sent = [0]

        def send() -> None:
            for i in paced(stop, write_rate):
                room.acquire()
                ws.send(payloads[i % len(payloads)])
                sent[0] += 1

        threading.Thread(target=send, daemon=True).start()
        acked = 0
        while not stop.is_set() or acked < sent[0]:
            try:
                msg = json.loads(ws.recv(timeout=1.0))
            except TimeoutError:
                continue
            if "ack" in msg:
                acked += 1
                counter.value = acked * FRAME
                room.release()
            elif "error" in msg:
                raise RuntimeError(f"frame refused: {msg['error']}")


def _instances_json(url: str, sid: str, stop: Any, counter: Any, write_rate: float) -> None:
    import httpx

    bodies = [
        json.dumps({"X": X.tolist(), "y": y.tolist()}, separators=(",", ":")).encode()
        for X, y in frames(50, "float64")
    ]
    headers = {"content-type": "application/json"}
    with httpx.Client(base_url=url, timeout=60) as c:
        for i in paced(stop, write_rate):
            r = c.post(f"/v1/streams/{sid}/instances", content=bodies[i % 50], headers=headers)
            if r.status_code != 200:
                raise RuntimeError(f"instances refused: {r.status_code} {r.text[:200]}")
            counter.value += FRAME


def feature_set(quick: bool) -> Any:
    from featurestream.bench.datasets import feature_spec, make_features

    return make_features(feature_spec("dorothea", quick))


def round_name(k: int, name: str) -> str:
    return f"r{k:05d}.{name}"


def _features_http(
    writer: str, url: str, sid: str, stop: Any, counter: Any, chunk: int, quick: bool
) -> None:
    """Raw (.npz, names in the header) or JSON (indices/data) bodies encoded beforehand."""
    import httpx

    from featurestream.bench.runs import _feature_requests

    data = feature_set(quick)
    path = "json" if writer == "json" else "raw"
    template = [
        (r.body, r.headers, r.items)
        for r in _feature_requests(_renamed(data, 0), "saola", sid, chunk, path)
    ]
    with httpx.Client(base_url=url, timeout=600) as c:
        c.post("/v1/streams", json={"id": sid, "algorithm": "saola", "target": data.y.tolist()})
        k = 0
        while not stop.is_set():
            old, new = round_name(0, ""), round_name(k, "")
            for body, headers, items in template:
                if k:  # the same bodies under this round's names (same length)
                    body = body.replace(f'"{old}'.encode(), f'"{new}'.encode())
                    headers = {
                        n: v.replace(old, new) if n == "X-Feature-Names" else v
                        for n, v in headers.items()
                    }
                r = c.post(f"/v1/streams/{sid}/features", content=body, headers=headers)
                if r.status_code != 200:
                    raise RuntimeError(f"features refused: {r.status_code} {r.text[:200]}")
                counter.value += items
                if stop.is_set():
                    return
            k += 1


def _renamed(data: Any, k: int) -> Any:
    from dataclasses import replace

    return replace(data, names=[round_name(k, n) for n in data.names])


# --------------------------------------------------------------------------- the SDK


def instances_writer(url: str, sid: str, stop: Any, counter: Any, write_rate: float) -> None:
    """``bench latency --writer sdk``: ``stream_instances`` of labelled frames until stopped.

    The SDK asks for frame k only once fewer than ``window`` frames wait for
    their ack, so at least k - window frames are acknowledged then: the count
    lags by a window at most, which cancels out of a rate over an interval.
    """
    from featurestream_client import Client

    batches = [(X.astype("float64"), y.astype("float64")) for X, y in frames(50)]

    # The SDK's own window, as a user's call gets it.
    with Client(url, timeout=600) as c:

        def source() -> Any:
            for i in paced(stop, write_rate):
                counter.value = max(0, i - c.window) * FRAME
                yield batches[i % len(batches)]

        c.stream(sid).stream_instances(source(), batch_size=FRAME)


def features_writer(url: str, sid: str, stop: Any, counter: Any, chunk: int, quick: bool) -> None:
    """``bench latency --ingest features --writer sdk``: ``add_features`` of --chunk columns
    of the set's own CSC matrix at a time, round after round under new names."""
    from featurestream_client import Client

    data = feature_set(quick)
    with Client(url, timeout=600, chunk_columns=chunk) as c:
        s = c.create_stream("saola", target=data.y, id=sid)
        k = 0
        while not stop.is_set():
            for lo in range(0, data.b, chunk):
                hi = min(data.b, lo + chunk)
                names = [round_name(k, n) for n in data.names[lo:hi]]
                s.add_features(data.X[:, lo:hi], names=names)
                counter.value += hi - lo
                if stop.is_set():
                    return
            k += 1


__all__ = [
    "DIM",
    "FRAME",
    "features_writer",
    "frames",
    "instances_writer",
    "npy_frames",
    "paced",
    "run",
]
