"""The state codec: self-describing, versioned, never pickle."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from featurestream import codec
from featurestream.selectors.saola import SAOLA, SAOLAParams


def _saola() -> SAOLA:
    sel = SAOLA.start(SAOLAParams(alpha=0.05), np.arange(1.0, 9.0))
    sel.learn_features(["a", "b"], [[1, 2, 3, 4, 5, 6, 8, 7], [8, 1, 2, 7, 3, 6, 4, 5]])
    return sel


def test_roundtrip_restores_arrays_tuples_and_numbers() -> None:
    sel = _saola()
    dec = codec.decode(codec.encode("saola", sel.params.to_dict(), sel.snapshot()))
    assert dec.selector == "saola" and dec.params == sel.params.to_dict()
    assert dec.state.selected == sel.state.selected and isinstance(dec.state.selected, tuple)
    assert np.array_equal(dec.state.s_data, sel.state.s_data)
    assert dec.state.s_data.dtype == np.float64 and dec.state.s_data.flags.writeable
    assert dec.state.s_indices.dtype == np.int64
    assert dec.state.features_seen == 2


def test_header_is_plain_json_after_a_versioned_prefix() -> None:
    blob = codec.encode("saola", {}, _saola().snapshot())
    magic, version, hlen = struct.unpack_from("<4sHI", blob)
    assert (magic, version) == (b"FSST", codec.FORMAT_VERSION)
    header = json.loads(blob[10 : 10 + hlen])
    assert header["selector"] == "saola" and "fields" in header


@pytest.mark.parametrize(
    "blob",
    [b"", b"XXXX\x01\x00\x00\x00\x00\x00", b"FSST\x63\x00\x02\x00\x00\x00{}"],
    ids=["empty", "bad-magic", "future-version"],
)
def test_foreign_bytes_are_refused(blob: bytes) -> None:
    with pytest.raises(codec.CodecError):
        codec.decode(blob)


def test_unknown_selector_is_refused() -> None:
    blob = codec.encode("no-such-selector", {}, _saola().snapshot())
    with pytest.raises(codec.CodecError, match="no-such-selector"):
        codec.decode(blob)


def test_unencodable_values_are_refused() -> None:
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Bad:
        x: object

    with pytest.raises(TypeError):
        codec.encode("saola", {}, Bad(object()))


def test_nonfinite_finds_a_float_in_a_long_tuple_whatever_was_checked_before() -> None:
    """A long tuple of names is remembered as float-free by identity only: an equal
    tuple with one float in it, or a NaN among names, is still looked at."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class State:
        names: tuple[object, ...]

    names = tuple(f"f{i}" for i in range(200))
    assert codec.nonfinite(State(names)) is None
    assert codec._NO_FLOATS.get(id(names)) is names  # remembered, by identity
    assert codec.nonfinite(State(names)) is None  # and the same answer from memory
    assert codec.nonfinite(State((*names[:-1], float("nan")))) == "names"
    assert codec.nonfinite(State((*names[:-1], float("inf")))) == "names"
    assert codec.nonfinite(State((*names[:-1], 1.5))) is None  # a finite float is fine
    mixed = (*names, (1.0, float("-inf")))
    assert codec.nonfinite(State(mixed)) == "names"
    # Many distinct tuples: the memory of them stays bounded, in number and in items.
    for k in range(3 * codec._NO_FLOATS_MAX):
        assert codec.nonfinite(State((*names, k))) is None
        assert 0 < len(codec._NO_FLOATS) <= codec._NO_FLOATS_MAX
    for k in range(8):
        assert codec.nonfinite(State(tuple(range(k, k + codec._NO_FLOATS_MAX_ITEMS // 3)))) is None
        assert sum(map(len, codec._NO_FLOATS.values())) <= codec._NO_FLOATS_MAX_ITEMS
    # A tuple remembered and then dropped by its owner: short-lived tuples built after
    # it (which could take its id if the table did not hold it) are still looked at.
    short_lived = tuple(f"g{i}" for i in range(100))
    assert codec.nonfinite(State(short_lived)) is None
    del short_lived
    for _ in range(50):
        assert codec.nonfinite(State((*(f"g{i}" for i in range(99)), float("nan")))) == "names"
