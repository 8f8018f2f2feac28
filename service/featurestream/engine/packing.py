"""Large payloads kept compressed in the store: log entries and stored responses.

A write of 20,000 feature columns logs about 2 MB of JSON (a decision per
column) and keeps its 2 MB response for replays. Redis copies every byte of a
commit script's arguments into the script (every other client waiting),
appends them to its AOF (whose rewrites then fork the server every few seconds
of a large ingest) and sends them to its replicas. Deflate
at level 1 shrinks such JSON about eight times. The compressor is ISA-L's (the
``isal`` package): the same zlib format as the standard library's ``zlib``,
which reads it and whose output it reads, in a fraction of the time, in the
worker thread that renders it (it lets
go of the interpreter lock meanwhile).

Payloads under :data:`PACK_ABOVE` bytes are kept as they are; readers take
either form, and payloads stored before packing existed read unchanged (JSON
never starts with a NUL byte).

>>> unpack(pack(b'{"a": 1}')) == b'{"a": 1}' and pack(b'{"a": 1}') == b'{"a": 1}'
True
>>> big = b'{"decisions": [' + b'{"name": "f", "accepted": false},' * 5000 + b'0]}'
>>> packed = pack(big)
>>> len(packed) < len(big) // 10 and unpack(packed) == big
True
"""

from __future__ import annotations

from isal import isal_zlib

#: Payloads at least this large are stored compressed.
PACK_ABOVE = 1 << 16
_MARK = b"\x00zlib1\n"


def pack(raw: bytes) -> bytes:
    """``raw`` as stored: compressed when it is large (run it beside the event loop)."""
    if len(raw) < PACK_ABOVE:
        return raw
    return _MARK + isal_zlib.compress(raw, 1)


def unpack(stored: bytes) -> bytes:
    """The payload ``pack`` was given."""
    if stored.startswith(_MARK):
        return isal_zlib.decompress(stored[len(_MARK) :])
    return stored


def is_packed(stored: bytes) -> bool:
    """Whether ``stored`` is compressed (its JSON is larger than it looks)."""
    return stored.startswith(_MARK)


__all__ = ["PACK_ABOVE", "is_packed", "pack", "unpack"]
