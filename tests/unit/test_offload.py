"""Large bodies and frames are decoded in a bounded set of threads, small ones inline."""

from __future__ import annotations

import io
import threading
import time
from typing import Any

import anyio
import numpy as np
import pytest
import scipy.sparse

from featurestream import offload
from featurestream.api.arrays import Bounds
from featurestream.api.ws.messages import FrameDecoder

pytestmark = pytest.mark.anyio


async def test_small_input_is_decoded_inline_and_large_input_in_a_thread() -> None:
    here = threading.get_ident()
    assert await offload.run(offload.INLINE_BYTES - 1, threading.get_ident) == here
    assert await offload.run(offload.INLINE_BYTES, threading.get_ident) != here


async def test_at_most_decode_threads_decode_at_once() -> None:
    running, most = 0, 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with lock:
            running -= 1

    async with anyio.create_task_group() as tg:
        for _ in range(4 * offload.DECODE_THREADS):
            tg.start_soon(offload.run, offload.INLINE_BYTES, work)
    assert most == offload.DECODE_THREADS


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _npz(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    scipy.sparse.save_npz(buf, scipy.sparse.csr_matrix(a))
    return buf.getvalue()


@pytest.mark.parametrize(
    ("message", "in_thread"),
    [
        ({"bytes": _npy(np.zeros((100, 1001)))}, False),  # read in place, whatever its size
        ({"bytes": _npy(np.zeros((100, 1001), dtype=np.int64))}, True),  # converted
        ({"bytes": _npz(np.eye(100, 1001) + np.eye(100, 1001, 7))}, False),  # small zip
        ({"bytes": _npz(np.random.default_rng(0).random((100, 1001)))}, True),
        ({"text": '{"X": [[' + ", ".join(["0.5"] * 1000) + "]], " + '"y": [1]}'}, False),
        ({"text": '{"X": [' + ", ".join(["[0.5, 1.5]"] * 8000) + "]}"}, True),
    ],
)
async def test_frames_costly_to_read_are_read_in_a_thread(
    message: dict[str, Any], in_thread: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    bounds = Bounds(1 << 30)
    decoder = FrameDecoder("s", "instances", supervised=False, producer="p", bounds=bounds)
    threads: list[int] = []
    real = decoder.decode

    def decode(message: Any, seq: int) -> Any:
        threads.append(threading.get_ident())
        return real(message, seq)

    monkeypatch.setattr(decoder, "decode", decode)
    frame = await decoder.read(message, 1)
    assert frame.error is None and frame.X is not None
    assert (threads[0] != threading.get_ident()) is in_thread
