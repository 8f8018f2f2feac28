"""What a producer's ``seq`` stands for: a digest of the content it was applied with.

A write that carries a seq has its response stored for replays. The engine
stores a digest of the write's content with it: a fixed-size prefix of the
stored bytes (the store keeps them as they are). A seq sent again with the
same content is a retry and is answered with the stored response; the same
seq with other content is another write that collides with the first one
(two writers under one producer name) and is refused, so that no write is
ever acknowledged with another write's answer.

The digest is taken over the decoded content (arrays as float64, names,
groups, labels) and the kind of write, so a retry matches however it was
encoded. It is a 16-byte XXH3-128 digest: every frame of an instance stream is
hashed (800 KB for a frame of 100 instances of 1,000 features), and XXH3 reads
it at memory speed (several times faster than BLAKE3 or hashlib's BLAKE2b).
The digest guards against accidents (two writers under
one producer name, a client that reuses its seqs), which a 128-bit hash of this
quality never confuses; it is not meant to resist a writer who crafts
collisions on purpose, and need not: a writer that can send to the stream under
that producer name can already send anything. Responses stored before digests
existed (release 0.1.0) have no prefix: they are replayed as before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from xxhash import xxh3_128

from featurestream.engine.packing import pack, unpack
from featurestream.errors import SeqReused

# Stored responses are JSON documents, which never start with a NUL byte.
MAGIC = b"\x00fsd1"
DIGEST_SIZE = 16
PREFIX_SIZE = len(MAGIC) + DIGEST_SIZE


def content_digest(kind: str, *parts: Any) -> bytes:
    """The digest of a write of ``kind`` whose decoded content is ``parts``.

    A part is None, a str, a sequence of str (or None), a numpy array or a
    scipy.sparse matrix.

    >>> a = content_digest("instances", np.ones((2, 3)), None)
    >>> a == content_digest("instances", np.ones((2, 3), dtype=np.float32), None)
    True
    >>> a == content_digest("instances", np.ones((3, 2)), None)
    False
    """
    h = xxh3_128(kind.encode())
    for part in parts:
        _update(h, part)
    return h.digest()


def content_bytes(*parts: Any) -> int:
    """About how many bytes hashing ``parts`` reads (to decide where to hash them)."""
    total = 0
    for part in parts:
        if isinstance(part, np.ndarray):
            total += part.size * 8
        elif hasattr(part, "nnz"):
            total += int(part.nnz) * 16
    return total


def _update(h: Any, part: Any) -> None:
    if part is None:
        h.update(b"N")
    elif isinstance(part, str):
        h.update(b"S" + json.dumps(part).encode())
    elif isinstance(part, np.ndarray):
        a = np.ascontiguousarray(part, dtype=np.float64)
        h.update(b"A" + json.dumps(a.shape).encode())
        h.update(_octets(a))
    elif hasattr(part, "tocsr"):  # scipy.sparse
        m = part.tocsr()
        if not m.has_sorted_indices:
            m = m.sorted_indices()
        h.update(b"C" + json.dumps(m.shape).encode())
        for arr, dtype in ((m.indptr, np.int64), (m.indices, np.int64), (m.data, np.float64)):
            h.update(_octets(np.ascontiguousarray(arr, dtype=dtype)))
    elif isinstance(part, Sequence):
        h.update(b"L" + json.dumps(list(part)).encode())
    else:  # pragma: no cover - every caller passes one of the above
        raise TypeError(f"cannot digest {type(part).__name__}")


def _octets(a: np.ndarray) -> np.ndarray:
    """A C-contiguous array's bytes, as a flat uint8 view (what the hash reads)."""
    return a.reshape(-1).view(np.uint8)


def seal(digest: bytes, response: bytes) -> bytes:
    """The bytes stored for a seq: the content's digest, then the response (packed when
    large: see ``packing``; run it beside the event loop for a large response)."""
    assert len(digest) == DIGEST_SIZE
    return MAGIC + digest + pack(response)


def unseal(stored: bytes) -> tuple[bytes | None, bytes]:
    """The digest (None for a response stored without one) and the response."""
    if stored.startswith(MAGIC):
        return stored[len(MAGIC) : PREFIX_SIZE], unpack(stored[PREFIX_SIZE:])
    return None, stored


def replayed(stored: bytes, digest: bytes, producer: str, seq: int, expected: int) -> bytes:
    """The stored response of a seq sent again with content of ``digest``.

    Raises :class:`SeqReused` when the seq was applied with other content.
    """
    kept, response = unseal(stored)
    if kept is not None and kept != digest:
        raise SeqReused(
            f"seq reused with different content: seq {seq} of producer {producer!r} was "
            "already used by a write with other content, so this one was not applied. Two "
            "writers may share the producer name: give each its own. The next expected seq "
            f"is {expected}.",
            producer=producer,
            expected_seq=expected,
        )
    return response


__all__ = [
    "DIGEST_SIZE",
    "content_bytes",
    "content_digest",
    "replayed",
    "seal",
    "unseal",
]
