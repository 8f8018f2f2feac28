"""Selector state <-> bytes: versioned, self-describing, never pickle.

Layout of an encoded state::

    b"FSST" | u16 format version | u32 header length | header (UTF-8 JSON) | array bytes

The header names the selector and holds its resolved params and every State
field. Arrays are stored as raw little-endian bytes after the header and
referenced from the JSON tree as ``{"$a": index}``; tuples are JSON lists
(decoded back to tuples) and mappings are ``{"$m": {...}}``. Decoding never
executes anything: it only rebuilds dataclasses registered in the selector
registry, so stored state can outlive a code version safely.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from featurestream.errors import FeatureStreamError

MAGIC = b"FSST"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<4sHI")
_DTYPES = {"f8": np.float64, "i8": np.int64, "b1": np.bool_, "f4": np.float32}
# Immutable values that are never a float (bool is an int, but exact types are asked).
_SCALARS = frozenset({str, int, bool, type(None)})


class CodecError(FeatureStreamError, ValueError):
    """Bytes that are not a featurestream state of a known format."""


@dataclasses.dataclass(frozen=True)
class Decoded:
    selector: str
    params: dict[str, Any]
    state: Any


def encode(selector_name: str, params: Mapping[str, Any], state: Any) -> bytes:
    """Encode a selector's params and State dataclass."""
    arrays: list[np.ndarray[Any, Any]] = []

    def enc(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            arrays.append(value)
            return {"$a": len(arrays) - 1}
        if isinstance(value, (tuple, list)):
            if all(type(v) is str for v in value):
                return list(value)  # names: the common long sequence, taken as it is
            return [enc(v) for v in value]
        if isinstance(value, Mapping):
            return {"$m": {str(k): enc(v) for k, v in value.items()}}
        if isinstance(value, np.generic):
            return value.item()
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise TypeError(f"Cannot encode a {type(value).__name__} in a selector state.")

    fields = {f.name: enc(getattr(state, f.name)) for f in dataclasses.fields(state)}
    descriptors = []
    offset = 0
    chunks: list[bytes] = []
    for arr in arrays:
        kind = _dtype_code(arr.dtype)
        data = np.ascontiguousarray(arr, dtype=np.dtype(_DTYPES[kind]).newbyteorder("<"))
        raw = data.tobytes()
        descriptors.append({"dtype": kind, "shape": list(arr.shape), "offset": offset})
        chunks.append(raw)
        offset += len(raw)
    header = json.dumps(
        {
            "selector": selector_name,
            "params": dict(params),
            "fields": fields,
            "arrays": descriptors,
        },
        separators=(",", ":"),
        allow_nan=True,
    ).encode()
    return b"".join([_PREFIX.pack(MAGIC, FORMAT_VERSION, len(header)), header, *chunks])


def _dtype_code(dtype: np.dtype[Any]) -> str:
    if dtype.kind == "f":
        return "f8"
    if dtype.kind in "iu":
        return "i8"
    if dtype.kind == "b":
        return "b1"
    raise TypeError(f"Cannot encode arrays of dtype {dtype}.")


def nonfinite(state: Any) -> str | None:
    """The first field of a State that holds a NaN or an infinity; None when all are finite.

    Looks at what :func:`encode` stores: float arrays and floats, inside tuples
    and mappings too. One ``np.isfinite`` pass per array.

    >>> from featurestream.selectors import FSDS, FSDSParams
    >>> sel = FSDS.start(FSDSParams(num_features=1), ["a", "b"])
    >>> nonfinite(sel.state) is None
    True
    >>> nonfinite(dataclasses.replace(sel.state, scores=np.array([0.0, np.inf])))
    'scores'
    """
    for f in dataclasses.fields(state):
        if not _finite(getattr(state, f.name)):
            return f.name
    return None


# Tuples of names and other immutable scalars, known to hold no float: the
# feature names of every state of a stream are one such tuple, shared from
# snapshot to snapshot, and walking its thousands of entries at each check held
# the interpreter lock longer than the arrays' checks. Kept by identity, with a
# reference (so that an id is not reused while it is here), bounded in number
# and in items: the tuples held here outlive their streams until the table is
# cleared (a few MB at most; a longer tuple is walked each time, as before).
_NO_FLOATS: dict[int, tuple[Any, ...]] = {}
_NO_FLOATS_MAX = 256
_NO_FLOATS_MAX_ITEMS = 200_000
_NO_FLOATS_MIN_LEN = 64


def _finite(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.dtype.kind != "f" or bool(np.isfinite(value).all())
    if isinstance(value, (float, np.floating)):
        return math.isfinite(value)
    if type(value) is tuple and _NO_FLOATS_MIN_LEN <= len(value) <= _NO_FLOATS_MAX_ITEMS:
        if _NO_FLOATS.get(id(value)) is value:
            return True
        if all(type(v) in _SCALARS for v in value):
            held = sum(map(len, list(_NO_FLOATS.values())))  # a copy: no iteration races
            if len(_NO_FLOATS) >= _NO_FLOATS_MAX or held + len(value) > _NO_FLOATS_MAX_ITEMS:
                _NO_FLOATS.clear()  # one call: safe while another thread checks too
            _NO_FLOATS[id(value)] = value
            return True
    if isinstance(value, (tuple, list)):
        # Names (the common long sequence) are skipped without a call each.
        return all(_finite(v) for v in value if type(v) is not str)
    if isinstance(value, Mapping):
        return all(_finite(v) for v in value.values())
    return True


def decode_header(blob: bytes) -> tuple[dict[str, Any], int]:
    if len(blob) < _PREFIX.size:
        raise CodecError("State bytes are truncated.")
    magic, version, hlen = _PREFIX.unpack_from(blob)
    if magic != MAGIC:
        raise CodecError("Not a featurestream state (bad magic).")
    if version != FORMAT_VERSION:
        raise CodecError(f"Unsupported state format version {version}.")
    start = _PREFIX.size
    header = json.loads(blob[start : start + hlen])
    return header, start + hlen


def decode(blob: bytes) -> Decoded:
    """Decode bytes produced by :func:`encode` into params and a State instance."""
    from featurestream.selectors import REGISTRY

    header, body = decode_header(blob)
    name = header["selector"]
    cls = REGISTRY.get(name)
    if cls is None:
        raise CodecError(f"Unknown selector {name!r} in stored state.")
    arrays: list[np.ndarray[Any, Any]] = []
    for d in header["arrays"]:
        dtype = np.dtype(_DTYPES[d["dtype"]]).newbyteorder("<")
        count = int(np.prod(d["shape"])) if d["shape"] else 1
        start = body + d["offset"]
        arr = np.frombuffer(blob, dtype=dtype, count=count, offset=start).reshape(d["shape"])
        # Own, native-endian, writeable copies: states must not alias the blob.
        arrays.append(arr.astype(_DTYPES[d["dtype"]], copy=True))

    def dec(value: Any) -> Any:
        if isinstance(value, list):
            return tuple(dec(v) for v in value)
        if isinstance(value, dict):
            if "$a" in value:
                return arrays[value["$a"]]
            if "$m" in value:
                return {k: dec(v) for k, v in value["$m"].items()}
            raise CodecError("Malformed state field.")
        return value

    fields = {k: dec(v) for k, v in header["fields"].items()}
    state = cls.state_type(**fields)
    return Decoded(selector=name, params=header["params"], state=state)


__all__ = [
    "FORMAT_VERSION",
    "CodecError",
    "Decoded",
    "decode",
    "decode_header",
    "encode",
    "nonfinite",
]
