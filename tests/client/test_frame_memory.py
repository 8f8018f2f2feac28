"""The SDK lets the C allocator keep the memory of sent frames (``_data.keep_frame_memory``).

Without it, glibc handed the blocks of each 800 KB frame back to the system
and took them again as page faults: most of the sender's CPU.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from featurestream_client import _data, ws

# A fresh interpreter: the thresholds are per process and only ever rise.
CHURN = textwrap.dedent(
    """
    import ctypes
    import resource
    import numpy as np
    from featurestream_client import _data

    # Base pages: where transparent huge pages are always on, one fault maps 2 MiB.
    ctypes.CDLL(None).prctl(41, 1, 0, 0, 0)  # PR_SET_THP_DISABLE

    def faults(rounds=30):
        # A frame as the SDK sends it, and copies as the WebSocket library makes them.
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(rounds):
            frame = _data.npy_frame(np.ones((100, 999)), np.ones(100))
            masked = bytes(frame)
            framed = masked + b"x"
            sent = bytearray(framed)
            del frame, masked, framed, sent
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    faults(3)
    cold = faults()
    _data.keep_frame_memory(len(_data.npy_frame(np.ones((100, 999)), np.ones(100))))
    print(cold, faults())
    """
)


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the thresholds are glibc's",
)
def test_frames_stop_costing_page_faults_once_the_memory_is_kept() -> None:
    # Thresholds set in the environment turn glibc's adjustment off: the child runs
    # without them.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}
    out = subprocess.run(
        [sys.executable, "-c", CHURN],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=env,
    ).stdout
    cold, kept = map(int, out.split())
    # 30 rounds of four 800 KB blocks: about 200 pages a block when handed back.
    assert cold > 10_000, (cold, kept)
    assert kept < cold / 10, (cold, kept)


def test_the_kept_size_is_four_frames_grows_only_and_is_capped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sizes: list[int] = []
    real_empty = np.empty

    def empty(size: int, dtype: object = None) -> np.ndarray:
        sizes.append(size)
        return real_empty(1, dtype=np.uint8)  # the test process's thresholds stay as they are

    monkeypatch.setattr(_data, "_kept", 0)
    monkeypatch.setattr(_data.np, "empty", empty)
    _data.keep_frame_memory(1_000)  # small frames: the starting thresholds do
    _data.keep_frame_memory(800_000)
    _data.keep_frame_memory(800_000)  # once
    _data.keep_frame_memory(400_000)  # never lowered
    _data.keep_frame_memory(100_000_000)  # under glibc's 32 MiB ceiling
    assert sizes == [3_200_000, 31 * 1024 * 1024]
    assert _data._kept == 31 * 1024 * 1024


def test_each_frame_the_feed_encodes_is_sized_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    monkeypatch.setattr(ws, "keep_frame_memory", seen.append)
    X = np.ones((4, 3))
    feed = ws.InstanceFeed(iter([(X, np.ones(4)), (X[:2], np.ones(2))]), first_seq=1)
    frames = feed.take()
    assert seen == [len(f.data) for f in frames]
    assert len(seen) == 2


def test_a_block_the_process_cannot_have_fails_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    tries: list[int] = []

    def empty(size: int, dtype: object = None) -> np.ndarray:
        tries.append(size)
        raise MemoryError

    monkeypatch.setattr(_data, "_kept", 0)
    monkeypatch.setattr(_data.np, "empty", empty)
    _data.keep_frame_memory(800_000)  # no exception: the frames go out as before
    _data.keep_frame_memory(800_000)  # and the next frames do not try again
    assert tries == [3_200_000]
    # The whole feed too: a frame is encoded and taken whatever the allocator says.
    X = np.ones((100, 999))
    monkeypatch.setattr(_data, "_kept", 0)
    frames = ws.InstanceFeed(iter([(X, np.ones(100))]), first_seq=1).take()
    assert [f.seq for f in frames] == [1]
    assert len(tries) == 2
