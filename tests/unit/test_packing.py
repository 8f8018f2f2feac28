"""Stored payloads: deflated by ISA-L in the zlib format, read by either implementation."""

from __future__ import annotations

import zlib

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from featurestream.engine.packing import PACK_ABOVE, is_packed, pack, unpack

_MARK = b"\x00zlib1\n"


def _response(n: int) -> bytes:
    decisions = [
        {
            "name": f"f{i}",
            "accepted": i % 7 == 0,
            "evicted": [],
            "reason": "irrelevant",
            "score": i / 3,
        }
        for i in range(n)
    ]
    return orjson.dumps({"version": 3, "decisions": decisions})


def test_a_large_payload_is_deflated_in_the_zlib_format() -> None:
    raw = _response(20_000)
    packed = pack(raw)
    assert is_packed(packed) and packed.startswith(_MARK)
    assert len(packed) < len(raw) // 5
    # The standard library reads it: any reader of the zlib format does.
    assert zlib.decompress(packed[len(_MARK) :]) == raw
    assert unpack(packed) == raw


def test_payloads_deflated_by_the_standard_library_read_unchanged() -> None:
    """Entries and responses stored by releases that deflated with zlib."""
    raw = _response(5_000)
    for level in (1, 6, 9):
        assert unpack(_MARK + zlib.compress(raw, level)) == raw


def test_a_small_payload_is_kept_as_it_is() -> None:
    raw = _response(3)
    assert len(raw) < PACK_ABOVE
    assert pack(raw) == raw and not is_packed(raw) and unpack(raw) == raw


@settings(max_examples=50, deadline=None)
@given(st.binary(min_size=1, max_size=512), st.binary(max_size=512))
def test_any_bytes_round_trip(unit: bytes, tail: bytes) -> None:
    raw = b"{" + unit * (PACK_ABOVE // len(unit) + 1) + tail  # stored payloads are JSON
    assert unpack(pack(raw)) == raw
    assert zlib.decompress(pack(raw)[len(_MARK) :]) == raw
