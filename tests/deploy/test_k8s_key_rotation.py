"""Updating the keys Secret rotates keys in running pods: the kubelet's file swap, replayed.

A Secret mounted as a volume (no ``subPath``) is a directory the kubelet
rewrites atomically when the Secret changes: the new files go into a fresh
timestamped directory, the ``..data`` symlink is renamed onto it, and each key
is a symlink through ``..data``. This test lays the keys out the same way,
points a real ``featurestream serve`` at ``<dir>/keys`` (as
``deploy/base/featurestream.env`` does), swaps the Secret's content as the
kubelet would, and checks that the same process (no restart) refuses the old
key and accepts the new one.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import httpx
import pytest

from tests.support import ServeProcess

pytestmark = pytest.mark.slow

OLD, NEW = "the-key-before-rotation", "the-key-after-rotation"


def line(tenant: str, key: str) -> str:
    return f"{tenant}:{hashlib.sha256(key.encode()).hexdigest()}\n"


class SecretVolume:
    """A directory laid out as the kubelet lays out a Secret volume."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.generation = 0

    def write(self, data: dict[str, str], *, mtime_ns: int | None = None) -> None:
        self.generation += 1
        payload = self.root / f"..2026_01_01_00_00_00.{self.generation:09d}"
        payload.mkdir()
        for key, text in data.items():
            (payload / key).write_text(text)
            if mtime_ns is not None:
                os.utime(payload / key, ns=(mtime_ns, mtime_ns))
        old = os.readlink(self.root / "..data") if (self.root / "..data").is_symlink() else None
        (self.root / "..data_tmp").symlink_to(payload.name)
        os.replace(self.root / "..data_tmp", self.root / "..data")
        for key in data:
            if not (self.root / key).is_symlink():
                (self.root / key).symlink_to(f"..data/{key}")
        if old is not None:
            for path in (self.root / old).iterdir():
                path.unlink()
            (self.root / old).rmdir()


def status(url: str, key: str) -> int:
    return httpx.get(url + "/v1/streams", headers={"Authorization": f"Bearer {key}"}).status_code


def test_a_swapped_secret_volume_rotates_keys_without_a_restart(tmp_path: Path) -> None:
    volume = SecretVolume(tmp_path)
    volume.write({"keys": line("acme", OLD)})
    server = ServeProcess(
        "memory://", env={"FEATURESTREAM_API_KEYS_FILE": str(tmp_path / "keys")}
    ).start()
    try:
        assert server.proc is not None
        pid = server.proc.pid
        assert status(server.url, OLD) == 200
        assert status(server.url, NEW) == 401

        def rotated(accepted: str, refused: str) -> bool:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if status(server.url, accepted) == 200 and status(server.url, refused) == 401:
                    return True
                time.sleep(0.1)
            return False

        # The kubelet's swap: new files, a new inode, a new mtime.
        volume.write({"keys": line("acme", NEW)})
        assert rotated(NEW, OLD), "the new Secret content was not picked up"
        # A content change that keeps the file's mtime (a copy that preserves
        # times) is picked up too: the file is a different one.
        before = (tmp_path / "keys").stat().st_mtime_ns
        volume.write({"keys": line("acme", OLD)}, mtime_ns=before)
        assert (tmp_path / "keys").stat().st_mtime_ns == before
        assert rotated(OLD, NEW), "a swap that kept the mtime was missed"
        assert server.proc is not None and server.proc.pid == pid
        assert server.proc.poll() is None, "the server restarted"
    finally:
        server.stop()
