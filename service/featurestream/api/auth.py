"""API keys and tenants.

Keys are configured in a file (``FEATURESTREAM_API_KEYS_FILE``) of lines
``<tenant>:<sha256 hex of the key>``; blank lines and ``#`` comments are
ignored. The server never sees the keys themselves at rest. A presented key
is hashed and compared with every configured hash in constant time
(``hmac.compare_digest``), so timing reveals neither which tenant matched nor
how much of a hash did. The file is re-read when it changes (checked at most
once a second, by every request and by a watcher task of each process) or on
SIGHUP, so keys rotate without a restart; a file that fails to parse on reload
keeps the previous keys and logs why, and so does a file that was deleted (a
warning naming the path: deleting the file never turns authentication off).

Each change of the key set bumps :attr:`KeyRing.generation`; a WebSocket
remembers the :class:`Credential` it authenticated with, and the app closes
the ones whose credential is no longer valid (``api/ws/session.py``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("featurestream.auth")

TENANT_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class KeyFileError(ValueError):
    """The API keys file is malformed."""


@dataclass(frozen=True)
class Credential:
    """What a caller authenticated with: its tenant and the hash of its key."""

    tenant: str
    digest: bytes


def hash_key(key: str) -> str:
    """The hex SHA-256 of a key, as written in the keys file.

    >>> hash_key("secret")[:16]
    '2bb80d537b1da3e3'
    """
    return hashlib.sha256(key.encode()).hexdigest()


def parse_keys(text: str, source: str = "<keys>") -> tuple[tuple[str, bytes], ...]:
    """(tenant, hash bytes) pairs from the file's text; raises KeyFileError."""
    entries: list[tuple[str, bytes]] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        tenant, sep, digest = line.partition(":")
        tenant, digest = tenant.strip(), digest.strip().lower()
        if not sep or not TENANT_PATTERN.fullmatch(tenant) or not _HEX64.fullmatch(digest):
            raise KeyFileError(
                f"{source}:{lineno}: expected '<tenant>:<sha256 hex>' with a tenant of "
                "[A-Za-z0-9._-]{1,64} and 64 hex digits."
            )
        entries.append((tenant, bytes.fromhex(digest)))
    return tuple(entries)


@dataclass
class KeyRing:
    """The configured keys; ``tenant_for`` maps a presented key to its tenant."""

    path: Path | None = None
    entries: tuple[tuple[str, bytes], ...] = ()
    generation: int = 0  # bumped whenever the set of entries changes
    # What stat() says of the file (through symlinks): a Kubernetes Secret volume swaps
    # in new files, a copy may keep the old mtime; any difference means a re-read.
    _identity: tuple[int, ...] | None = field(default=None, repr=False)
    _checked: float = field(default=0.0, repr=False)
    _missing: bool = field(default=False, repr=False)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> KeyRing:
        ring = cls(Path(path))
        ring.reload(strict=True)
        return ring

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def reload(self, *, strict: bool = False) -> None:
        """Read the file again; on error keep the current keys unless ``strict``."""
        assert self.path is not None
        try:
            stat = self.path.stat()
            entries = parse_keys(self.path.read_text(), str(self.path))
        except (OSError, KeyFileError) as exc:
            if strict:
                raise KeyFileError(str(exc)) from exc
            log.error("keeping the previous API keys: %s", exc)
            return
        if entries != self.entries:
            self.generation += 1
        self.entries = entries
        self._identity = _identity(stat)
        self._missing = False
        log.info(
            "loaded %d API key(s) for %d tenant(s)", len(entries), len({t for t, _ in entries})
        )

    def maybe_reload(self, now: float | None = None) -> None:
        """Re-read the file if it changed; stat at most once a second."""
        if self.path is None:
            return
        now = time.monotonic() if now is None else now
        if now - self._checked < 1.0:
            return
        self._checked = now
        try:
            identity = _identity(self.path.stat())
        except OSError as exc:
            if not self._missing:
                # Once per disappearance: the keys stay (a deleted file must not open the
                # server to everyone, nor lock every caller out by accident).
                self._missing = True
                log.warning(
                    "API keys file %s cannot be read (%s); the previous %d key(s) stay in "
                    "force until it is back",
                    self.path,
                    exc.strerror or exc,
                    len(self.entries),
                )
            return
        if identity != self._identity or self._missing:
            self.reload()

    def credential(self, key: str | None) -> Credential | None:
        """The tenant owning ``key`` and the key's hash, or None. Compares every entry."""
        if not key:
            return None
        presented = hashlib.sha256(key.encode()).digest()
        tenant = self._owner(presented)
        return None if tenant is None else Credential(tenant, presented)

    def tenant_for(self, key: str | None) -> str | None:
        """The tenant owning ``key``, or None. Compares against every entry."""
        found = self.credential(key)
        return None if found is None else found.tenant

    def valid(self, credential: Credential) -> bool:
        """Whether ``credential``'s key still belongs to the same tenant."""
        return self._owner(credential.digest) == credential.tenant

    def _owner(self, presented: bytes) -> str | None:
        found: str | None = None
        for tenant, digest in self.entries:
            if hmac.compare_digest(presented, digest) and found is None:
                found = tenant
        return found


def _identity(stat: os.stat_result) -> tuple[int, ...]:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


__all__ = ["Credential", "KeyFileError", "KeyRing", "bearer_token", "hash_key", "parse_keys"]
