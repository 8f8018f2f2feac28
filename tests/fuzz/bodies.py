"""A body fuzzer: mutated .npy, .npz and JSON bodies and WebSocket frames against a live server.

Valid seeds (a column batch, an instance batch, a create request; as JSON,
``.npy`` and ``scipy.sparse.save_npz``) are mutated by hypothesis strategies:

* bytes: bit flips, truncations, insertions, deletions, duplicated runs,
  overwrites with boundary values;
* ``.npy`` headers: the header dict rebuilt with other ``descr``,
  ``shape`` (shape bombs included) and ``fortran_order``, other format
  versions, a header length that lies;
* zip structure: a field of a local header, of the central directory or of
  its end record (version needed, compression method, sizes, offsets, counts);
* sparse matrices: ``indices``, ``indptr``, ``shape``, ``format`` and
  ``data`` of a ``save_npz`` archive replaced by hostile ones (out of range,
  2^63, non-monotone, huge, wrong dtype, missing or extra members);
* JSON: values replaced by other types, huge numbers, long strings, deep
  nesting; keys removed or added; rows duplicated.

Each case goes to a live ``featurestream serve`` process on Redis (its keys
under a prefix of the run): over HTTP to ``POST /v1/streams``,
``.../features`` and ``.../instances``, or as a WebSocket frame, binary or
text. The oracle, for every case: the process is alive, no answer is a 5xx
(nor a WebSocket error with a 5xx problem, nor close code 1011/1013), every
answer arrives within ``--request-timeout`` seconds, and ``/healthz``, probed
every 0.2 s from a thread throughout, never takes more than
``--stall-seconds`` to answer. A failing input is saved (body, and a JSON
file saying where it went and what happened); after a crash or a hang the
server is restarted and the streams created afresh.

The short run is ``tests/fuzz/test_bodies.py``; the long run is::

    python -m tests.fuzz.bodies --minutes 10 --out fuzz-failures

which prints the case count, crashes, 5xx answers, hangs and stalls, and the
failures, each tagged with the issue point it is already known as, if any.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import scipy.sparse
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import ClientConnection, connect

from tests.conftest import RedisServer
from tests.faults.harness import ServerProcess
from tests.support import free_port

N_INSTANCES = 16  # rows of the feature stream
D = 4  # features of the instance streams
TARGETS = ("create", "features", "instances", "unsup", "ws-instances", "ws-unsup")
FORMATS = ("json", "npy", "npz")
MEDIA = {"json": "application/json", "npy": "application/x-npy", "npz": "application/x-npz"}

# Failures already known as one of issue #14's points (fixed in other lanes), told by a
# label of the case's mutations or by the error the server logged for it.
KNOWN_LABELS = {
    "sparse-range": "#1 out-of-range sparse indices",
    "sparse-indptr": "#1 sparse index arrays not validated",
    "sparse-2^63": "#16 sparse index of 2^63",
    "zip-version": "#16 zip 'version needed'",
    "shape-bomb": "#3 declared shape beyond the limits",
}
KNOWN_ERRORS = {
    "selectors/fsds.py": "#2 FSDS on huge or non-finite values",
    "SVD did not converge": "#2 FSDS on huge or non-finite values",
    "zip file version": "#16 zip 'version needed'",
}
# What glibc prints when the heap is corrupt: the out-of-range sparse indices of #1
# write out of bounds, and the process may abort cases later.
HEAP_ERRORS = ("corrupted size", "double free", "free(): invalid", "malloc(): ", "corrupted double")
# Mutations that reach scipy's sparse kernels with index arrays they trust: any of them
# may corrupt the heap (#1) without crashing at once.
TAINTING = ("sparse", "shape-bomb")


# --------------------------------------------------------------------------- seeds


def npy_of(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def npz_of(m: Any) -> bytes:
    buf = io.BytesIO()
    scipy.sparse.save_npz(buf, m)
    return buf.getvalue()


def _rng() -> np.random.Generator:
    return np.random.default_rng(14)


def shape_of(target: str) -> tuple[int, int]:
    """Rows x columns of the array a seed of ``target`` carries."""
    return {
        "features": (N_INSTANCES, 2),
        "instances": (3, D + 1),
        "unsup": (3, D),
    }[target]


def seed_array(target: str) -> np.ndarray:
    rows, cols = shape_of(target)
    a = np.round(_rng().normal(size=(rows, cols)), 3)
    if target == "instances":
        a[:, -1] = np.arange(rows) % 2
    return a


def seed_json(target: str) -> Any:
    """The JSON seed of a target; ``@NAME@``, ``@NAME2@`` and ``@ID@`` are made unique per case."""
    if target == "create":
        return {
            "id": "@ID@",
            "algorithm": "ofs",
            "params": {"num_features": 2},
            "feature_names": ["a", "b", "c"],
        }
    a = seed_array(target)
    if target == "features":
        return {
            "features": [
                {"name": "@NAME@", "values": a[:, 0].tolist()},
                {"name": "@NAME2@", "indices": [0, 3], "data": [1.5, -2.0]},
            ]
        }
    if target == "instances":
        return {"X": a[:, :-1].tolist(), "y": a[:, -1].tolist()}
    return {"X": a.tolist()}


def seed_body(target: str, fmt: str) -> bytes:
    if fmt == "json":
        return json.dumps(seed_json(target)).encode()
    a = seed_array(target)
    if fmt == "npy":
        return npy_of(a)
    a[np.abs(a) < 0.8] = 0.0
    return npz_of(scipy.sparse.csr_matrix(a))


# --------------------------------------------------------------------------- mutations

Mutation = tuple[str, bytes]  # (label, mutated body)

BOUNDARY_INTS = [0, 1, -1, 127, 128, 255, 2**15, 2**16 - 1, 2**31 - 1, 2**31, 2**32 - 1]


@st.composite
def byte_mutation(draw: st.DrawFn, data: bytes) -> Mutation:
    kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "duplicate", "overwrite"]))
    if not data:
        return "bytes:insert", draw(st.binary(min_size=1, max_size=32))
    pos = draw(st.integers(0, len(data) - 1))
    b = bytearray(data)
    if kind == "flip":
        b[pos] ^= 1 << draw(st.integers(0, 7))
    elif kind == "truncate":
        del b[pos:]
    elif kind == "insert":
        b[pos:pos] = draw(st.binary(min_size=1, max_size=64))
    elif kind == "delete":
        del b[pos : pos + draw(st.integers(1, 64))]
    elif kind == "duplicate":
        run = bytes(b[pos : pos + draw(st.integers(1, 256))])
        b[pos:pos] = run * draw(st.integers(1, 64))
    else:
        value = draw(st.sampled_from(BOUNDARY_INTS))
        width = draw(st.sampled_from([1, 2, 4, 8]))
        raw = (value % 2 ** (8 * width)).to_bytes(width, "little")
        b[pos : pos + width] = raw
    return f"bytes:{kind}", bytes(b)


# .npy headers

DESCRS = [
    "<f8", "<f4", "<f2", ">f8", "<i8", "<u8", "|i1", "|b1", "<c16", "|O", "<U8", "|S4",
    "|V8", "<M8[D]", "<m8[s]", "[('a', '<f8')]", "zz", "",
]  # fmt: skip
SHAPE_BOMBS = [(8, 300_000_000), (2**31, 2**31), (2**62,), (1, 2**40), (300_000_000, 8)]


def npy_bytes(
    header: str, payload: bytes, version: int = 1, header_len: int | None = None
) -> bytes:
    """An .npy file with this header text (padded as numpy pads it) and payload."""
    magic = b"\x93NUMPY" + bytes([version, 0])
    h = header.encode("latin-1", "replace")
    width = 2 if version == 1 else 4
    pad = (-(len(magic) + width + len(h) + 1)) % 64
    h = h + b" " * pad + b"\n"
    length = len(h) if header_len is None else header_len
    packed = struct.pack("<H" if width == 2 else "<I", length % 2 ** (8 * width))
    return magic + packed + h + payload


@st.composite
def npy_header_mutation(draw: st.DrawFn, target: str) -> Mutation:
    a = seed_array(target)
    payload = a.tobytes()
    labels = []
    descr = repr(draw(st.sampled_from(DESCRS))) if draw(st.booleans()) else "'<f8'"
    if descr != "'<f8'":
        labels.append("descr")
    fortran = "False"
    if draw(st.booleans()):
        fortran = draw(st.sampled_from(["True", "1", "'yes'", "None"]))
        labels.append("fortran")
    shape: tuple[int, ...] = a.shape
    if draw(st.booleans()):
        shape = draw(
            st.one_of(
                st.sampled_from(SHAPE_BOMBS),
                st.lists(st.integers(-2, 2**20), max_size=4).map(tuple),
                st.sampled_from([(), (0,), (0, 4), (3, 5, 2), (a.size,), a.shape[::-1]]),
            )
        )
        labels.append("shape-bomb" if np.prod([float(s) for s in shape]) > 1e8 else "shape")
    header = f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape!r}, }}"
    if draw(st.integers(0, 9)) == 0:
        header = draw(
            st.sampled_from(
                [
                    "{'descr': '<f8', 'fortran_order': False}",
                    "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'x': 1}",
                    "{'shape': (1e9,), 'descr': '<f8', 'fortran_order': False}",
                    "[1, 2, 3]",
                    "__import__('os').system('true')",
                    "{" * 500 + "}" * 500,
                ]
            )
        )
        labels.append("header-text")
    version = draw(st.sampled_from([1, 1, 1, 2, 3, 9]))
    header_len = draw(st.one_of(st.none(), st.sampled_from([0, 1, 10, 2**15, 2**16 - 1])))
    if version != 1:
        labels.append("version")
    if header_len is not None:
        labels.append("header-len")
    if draw(st.booleans()):
        payload = payload[: draw(st.integers(0, len(payload)))]
        labels.append("payload")
    return "npy:" + ",".join(labels or ["rebuilt"]), npy_bytes(header, payload, version, header_len)


# zip structure

LOCAL = b"PK\x03\x04"
CENTRAL = b"PK\x01\x02"
END = b"PK\x05\x06"
# (signature, field, offset from the signature, width)
ZIP_FIELDS = [
    (LOCAL, "version", 4, 2),
    (LOCAL, "flags", 6, 2),
    (LOCAL, "method", 8, 2),
    (LOCAL, "crc", 14, 4),
    (LOCAL, "csize", 18, 4),
    (LOCAL, "usize", 22, 4),
    (LOCAL, "name-len", 26, 2),
    (LOCAL, "extra-len", 28, 2),
    (CENTRAL, "version-made", 4, 2),
    (CENTRAL, "version", 6, 2),
    (CENTRAL, "flags", 8, 2),
    (CENTRAL, "method", 10, 2),
    (CENTRAL, "csize", 20, 4),
    (CENTRAL, "usize", 24, 4),
    (CENTRAL, "name-len", 28, 2),
    (CENTRAL, "extra-len", 30, 2),
    (CENTRAL, "offset", 42, 4),
    (END, "entries-disk", 8, 2),
    (END, "entries", 10, 2),
    (END, "cd-size", 12, 4),
    (END, "cd-offset", 16, 4),
    (END, "comment-len", 20, 2),
]
ZIP_VALUES = [0, 1, 8, 12, 14, 20, 45, 63, 93, 99, 108, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF]


def occurrences(data: bytes, sig: bytes) -> list[int]:
    found: list[int] = []
    at = data.find(sig)
    while at >= 0 and len(found) < 64:
        found.append(at)
        at = data.find(sig, at + 1)
    return found


@st.composite
def zip_mutation(draw: st.DrawFn, data: bytes) -> Mutation:
    sig, name, offset, width = draw(st.sampled_from(ZIP_FIELDS))
    places = [p for p in occurrences(data, sig) if p + offset + width <= len(data)]
    if not places:
        return "zip:none", data
    at = draw(st.sampled_from(places)) + offset
    old = int.from_bytes(data[at : at + width], "little")
    value = draw(
        st.one_of(
            st.sampled_from(ZIP_VALUES),
            st.sampled_from([old + 1, old - 1, old * 2, old + 4096]),
            st.integers(0, 2 ** (8 * width) - 1),
        )
    ) % 2 ** (8 * width)
    b = bytearray(data)
    b[at : at + width] = value.to_bytes(width, "little")
    label = "zip-version" if name == "version" else f"zip:{name}"
    return label, bytes(b)


# sparse matrices

INDEX_VALUES = [-1, -(10**9), 10**9, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64 - 1]


def savez(members: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **members)  # type: ignore[arg-type]
    return buf.getvalue()


@st.composite
def sparse_mutation(draw: st.DrawFn, target: str) -> Mutation:
    a = seed_array(target)
    a[np.abs(a) < 0.8] = 0.0
    m = scipy.sparse.csr_matrix(a)
    members: dict[str, Any] = {
        "indices": m.indices.copy(),
        "indptr": m.indptr.copy(),
        "format": np.array(b"csr"),
        "shape": np.array(m.shape),
        "data": m.data.copy(),
    }
    labels = []
    for part in draw(
        st.lists(
            st.sampled_from(["indices", "indptr", "shape", "format", "data", "members"]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    ):
        if part == "indices" and members.get("indices", np.empty(0)).size:
            value = draw(st.sampled_from([*INDEX_VALUES, a.shape[1], a.shape[1] + 1]))
            idx = members["indices"].astype(object)
            idx[draw(st.integers(0, idx.size - 1))] = value
            dtype = np.uint64 if value >= 2**63 else np.int64
            members["indices"] = np.array(idx.tolist(), dtype=dtype)
            labels.append("sparse-2^63" if value >= 2**63 - 1 else "sparse-range")
        elif part == "indptr" and "indptr" in members:
            kind = draw(st.sampled_from(["reverse", "huge", "negative", "short", "long", "float"]))
            p = members["indptr"].astype(np.int64)
            if kind == "reverse":
                p = p[::-1].copy()
            elif kind == "huge":
                p[-1] = draw(st.sampled_from(INDEX_VALUES[2:6]))
            elif kind == "negative":
                p[draw(st.integers(0, p.size - 1))] = -(10**6)
            elif kind == "short":
                p = p[:-1]
            elif kind == "long":
                p = np.concatenate([p, p[-1:] + 1])
            members["indptr"] = p.astype(np.float64) if kind == "float" else p
            labels.append(f"sparse-indptr-{kind}")
        elif part == "shape":
            shape = draw(
                st.sampled_from(
                    [
                        *SHAPE_BOMBS,
                        (-1, 4),
                        (0, 0),
                        (3,),
                        (3, 5, 2),
                        (a.shape[0], 1),
                        (a.shape[0] + 5, a.shape[1]),
                        (2**63 - 1, 2),
                    ]
                )
            )
            members["shape"] = np.array(shape, dtype=np.int64)
            big = np.prod([float(s) for s in shape]) > 1e8
            labels.append("shape-bomb" if big else "sparse-shape")
        elif part == "format":
            members["format"] = np.array(
                draw(st.sampled_from([b"csc", b"coo", b"bsr", b"dia", b"lil", b"xyz", b""]))
            )
            labels.append("sparse-format")
        elif part == "data" and "data" in members:
            kind = draw(st.sampled_from(["nan", "huge", "complex", "str", "bool", "short"]))
            d = members["data"]
            if kind == "nan":
                d = np.full_like(d, np.nan)
            elif kind == "huge":
                d = np.full_like(d, 1e300)
            elif kind == "complex":
                d = d.astype(np.complex128) + 1j
            elif kind == "str":
                d = d.astype("U8")
            elif kind == "bool":
                d = d != 0
            else:
                d = d[:-1]
            members["data"] = d
            labels.append(f"sparse-data-{kind}")
        elif part == "members" and members:
            victim = draw(st.sampled_from(sorted(members)))
            if draw(st.booleans()):
                del members[victim]
                labels.append(f"sparse-drop-{victim}")
            else:
                members["row"] = np.arange(3)
                labels.append("sparse-extra")
    return ",".join(labels), savez(members)


# JSON


class Raw:
    """A JSON value written as this text (huge numbers, deep nesting, non-standard literals)."""

    def __init__(self, text: str) -> None:
        self.text = text


def json_text(value: Any) -> str:
    raws: list[str] = []

    def swap(v: Any) -> Any:
        if isinstance(v, Raw):
            raws.append(v.text)
            return f"@RAW{len(raws) - 1}@"
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    text = json.dumps(swap(value), allow_nan=True)
    for i, raw in enumerate(raws):
        text = text.replace(f'"@RAW{i}@"', raw)
    return text


json_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e300, -1e300, 1e308, 5e-324, 2**63, -(2**63) - 1, 2**64]),
    st.sampled_from(["1" + "0" * 400, "-1e999", "NaN", "Infinity", "1e-99999", "0x10", "01"]).map(
        Raw
    ),
    st.text(max_size=40),
    st.integers(1_000, 300_000).map(lambda n: "n" * n),
    st.integers(10, 100_000).map(lambda d: Raw("[" * d + "]" * d)),
    st.integers(10, 100_000).map(lambda d: Raw('{"a":' * d + "1" + "}" * d)),
    st.lists(st.floats(allow_nan=False), max_size=5),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:4]):
            yield from _paths(v, (*prefix, i))


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return doc


@st.composite
def json_mutation(draw: st.DrawFn, target: str) -> Mutation:
    doc = seed_json(target)
    path = draw(st.sampled_from(list(_paths(doc))))
    op = draw(st.sampled_from(["replace", "replace", "delete", "add", "wrap", "repeat"]))
    if op == "delete" and path:
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        del parent[path[-1]]
    elif op == "add":
        sub = doc
        for step in path:
            sub = sub[step]
        if isinstance(sub, dict):
            sub[draw(st.sampled_from(["X", "y", "x", "seq", "producer", "zz", "params"]))] = draw(
                json_values
            )
        elif isinstance(sub, list):
            sub.append(draw(json_values))
    elif op == "wrap":
        sub = doc
        for step in path:
            sub = sub[step]
        doc = _set(doc, path, [sub])
    elif op == "repeat":
        sub = doc
        for step in path:
            sub = sub[step]
        if isinstance(sub, list) and sub:
            doc = _set(doc, path, sub * draw(st.sampled_from([2, 100, 5000])))
    else:
        doc = _set(doc, path, draw(json_values))
    label = f"json:{op}"
    if target == "unsup":
        label += ",fsds"
    return label, json_text(doc).encode()


# --------------------------------------------------------------------------- cases


@dataclass
class Case:
    target: str  # one of TARGETS
    fmt: str  # json, npy or npz
    body: bytes
    labels: tuple[str, ...] = ()
    text_frame: bool = False  # a WebSocket frame sent as text
    label_column: str | None = None  # X-Label-Column of an npy/npz instances body


@st.composite
def cases(draw: st.DrawFn) -> Case:
    target = draw(st.sampled_from(TARGETS))
    base = target.removeprefix("ws-")
    fmt = "json" if base == "create" else draw(st.sampled_from(FORMATS))
    structured: list[Callable[[], Any]] = []
    if fmt == "json":
        structured.append(lambda: json_mutation(base))
    elif fmt == "npy":
        structured.append(lambda: npy_header_mutation(base))
    else:
        structured += [lambda: sparse_mutation(base), lambda: zip_mutation(seed_body(base, fmt))]
    labels: list[str] = []
    body = seed_body(base, fmt)
    plan = draw(st.sampled_from(["seed", "structure", "bytes", "both", "both"]))
    if plan in ("structure", "both"):
        label, body = draw(draw(st.sampled_from(structured))())
        labels.append(label)
    if fmt == "npz" and plan in ("structure", "both") and draw(st.booleans()):
        label, body = draw(zip_mutation(body))  # zip tampering on top of a tampered archive
        labels.append(label)
    if plan in ("bytes", "both"):
        for _ in range(draw(st.integers(1, 3))):
            label, body = draw(byte_mutation(body))
            labels.append(label)
    if base == "unsup":
        labels.append("fsds")
    # A WebSocket frame goes as text when it is JSON, but one time in ten the other way.
    swapped = draw(st.integers(0, 9)) == 0
    text_frame = target.startswith("ws-") and (fmt == "json") != swapped
    label_column = None
    if base == "instances" and fmt != "json":
        label_column = draw(st.sampled_from(["last", "last", "last", None, "none", "first"]))
    return Case(target, fmt, body, tuple(labels), text_frame, label_column)


# --------------------------------------------------------------------------- the live target


@dataclass
class Outcome:
    kind: str  # ok, 5xx, crash, hang, stall, bad-answer
    status: int | str | None = None  # HTTP status, WebSocket message type or close code
    detail: str = ""
    server_error: str = ""  # the last error line the server logged meanwhile
    tainted_by: int | None = None  # an earlier case that may have corrupted the heap


@dataclass
class Report:
    cases: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[int, Case, Outcome]] = field(default_factory=list)
    restarts: int = 0
    started: float = field(default_factory=time.monotonic)

    def count(self, kind: str) -> int:
        return sum(1 for _, _, o in self.failures if o.kind == kind)

    def summary(self) -> str:
        lines = [
            f"cases: {self.cases} in {time.monotonic() - self.started:.0f} s",
            f"crashes: {self.count('crash')}",
            f"5xx: {self.count('5xx')}",
            f"hangs: {self.count('hang')}",
            f"stalls (healthz slower than the bound): {self.count('stall')}",
            f"unreadable answers: {self.count('bad-answer')}",
            f"server restarts: {self.restarts}",
            "answers: " + ", ".join(f"{k}={v}" for k, v in sorted(self.statuses.items())),
        ]
        for n, case, outcome in self.failures:
            lines.append(f"  FAIL #{n}: {describe(case, outcome)}")
        return "\n".join(lines)


def known_points(case: Case, outcome: Outcome) -> list[str]:
    """The issue points a failing case is already known as (none: a new finding).

    From the labels of the case's mutations, the error the server logged, and,
    for a crash on a corrupt heap, an out-of-range sparse case sent earlier to
    the same process.
    """
    found: list[str] = []
    for label in ",".join(case.labels).split(","):
        for prefix, point in KNOWN_LABELS.items():
            if label.startswith(prefix) and point not in found:
                found.append(point)
    for text, point in KNOWN_ERRORS.items():
        if text in outcome.server_error and point not in found:
            found.append(point)
    heap = any(text in outcome.server_error for text in HEAP_ERRORS)
    if outcome.kind == "crash" and outcome.tainted_by is not None and (heap or not found):
        found.append(f"#1 heap corrupted earlier by case #{outcome.tainted_by}")
    return found


def describe(case: Case, outcome: Outcome) -> str:
    known = known_points(case, outcome)
    tag = f"known: {'; '.join(known)}" if known else "NEW"
    return (
        f"{outcome.kind} ({outcome.status}) on {case.target} {case.fmt}"
        f"{' text' if case.text_frame else ''} [{' '.join(case.labels) or 'seed'}]"
        f" {len(case.body)} bytes; {tag}; {outcome.detail[:200]}"
        + (f"; server: {outcome.server_error[:200]}" if outcome.server_error else "")
    )


class HealthProbe:
    """Probes /healthz every 0.2 s from a thread; remembers every slow or failed probe."""

    def __init__(self, url: str, bound: float) -> None:
        self.url = url
        self.bound = bound
        self.slow: list[tuple[float, float]] = []  # (when it started, seconds or inf)
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> HealthProbe:
        self._thread.start()
        return self

    def _run(self) -> None:
        with httpx.Client(timeout=self.bound * 3) as client:
            while not self._stop.wait(0.2):
                if self._paused.is_set():
                    continue
                t0 = time.monotonic()
                try:
                    ok = client.get(self.url + "/healthz").status_code == 200
                except httpx.HTTPError:
                    ok = False
                took = time.monotonic() - t0
                if (not ok or took > self.bound) and not self._paused.is_set():
                    self.slow.append((t0, took if ok else float("inf")))

    def since(self, t: float) -> list[float]:
        return [took for t0, took in self.slow if t0 >= t]

    @contextmanager
    def paused(self) -> Iterator[None]:
        self._paused.set()
        try:
            yield
        finally:
            self.slow.clear()
            self._paused.clear()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


class LiveTarget:
    """A ``featurestream serve`` process with its streams, and how each case reaches it."""

    def __init__(
        self,
        store_url: str,
        prefix: str,
        workdir: Path,
        *,
        request_timeout: float = 10.0,
        stall_seconds: float = 1.0,
    ) -> None:
        self.server = ServerProcess(store_url, prefix, workdir / "server.log")
        self.request_timeout = request_timeout
        self.stall_seconds = stall_seconds
        self.generation = 0
        self.counter = 0
        self.client = httpx.Client(timeout=request_timeout)
        self.sockets: dict[str, ClientConnection] = {}
        self.probe: HealthProbe | None = None
        self.streams: dict[str, str] = {}
        self.case_no = 0  # the number the fuzzer gave the current case
        self.tainted_by: int | None = None  # a case since the last start that may corrupt

    # life

    def start(self) -> LiveTarget:
        self.server.start()
        self.tainted_by = None
        self.renew()
        if self.probe is None:
            self.probe = HealthProbe(self.server.url, self.stall_seconds).start()
        return self

    def renew(self) -> None:
        """Fresh streams (a failed case may have left its stream poisoned) and sockets."""
        self._close_sockets()
        self.generation += 1
        g = self.generation
        self.streams = {"features": f"fz-f{g}", "instances": f"fz-i{g}", "unsup": f"fz-u{g}"}
        names = [f"f{i}" for i in range(D)]
        bodies: dict[str, dict[str, Any]] = {
            "features": {"algorithm": "saola", "target": [i % 2 for i in range(N_INSTANCES)]},
            "instances": {
                "algorithm": "ofs",
                "params": {"num_features": 2},
                "feature_names": names,
            },
            "unsup": {"algorithm": "fsds", "params": {"num_features": 2}, "feature_names": names},
        }
        for kind, body in bodies.items():
            r = self.client.post(
                self.server.url + "/v1/streams", json={"id": self.streams[kind], **body}
            )
            r.raise_for_status()

    def restart(self) -> None:
        assert self.probe is not None
        with self.probe.paused():
            self._close_sockets()
            self.server.kill()
            self.start()

    def close(self) -> None:
        if self.probe is not None:
            self.probe.stop()
        self._close_sockets()
        self.server.kill()
        self.client.close()

    def _close_sockets(self) -> None:
        for ws in self.sockets.values():
            with suppress(Exception):
                ws.close()
        self.sockets.clear()

    # cases

    def run(self, case: Case) -> Outcome:
        """Send one case; the outcome under the oracle."""
        assert self.probe is not None
        self.counter += 1
        body = (
            case.body.replace(b"@NAME@", f"n{self.generation}-{self.counter}a".encode())
            .replace(b"@NAME2@", f"n{self.generation}-{self.counter}b".encode())
            .replace(b"@ID@", f"c{self.generation}-{self.counter}".encode())
        )
        t0 = time.monotonic()
        log_at = self._log_size()
        tainted_by = self.tainted_by
        if any(label.startswith(TAINTING) for label in ",".join(case.labels).split(",")):
            self.tainted_by = self.tainted_by or self.case_no
        try:
            outcome = self._send(case, body, t0)
        except Exception as exc:  # an answer the fuzzer cannot read is a finding too
            outcome = Outcome("bad-answer", None, repr(exc)[:300])
        if outcome.kind != "ok":
            if outcome.kind == "crash":
                with suppress(Exception):  # let a dying process finish its last words
                    assert self.server.proc is not None
                    self.server.proc.wait(2)
            outcome.server_error = self._last_error(log_at)
            outcome.tainted_by = tainted_by
        return outcome

    def _send(self, case: Case, body: bytes, t0: float) -> Outcome:
        assert self.probe is not None
        if case.target.startswith("ws-"):
            outcome = self._frame(case, body)
        else:
            outcome = self._http(case, body)
        proc = self.server.proc
        if proc is None or proc.poll() is not None:
            code = None if proc is None else proc.returncode
            return Outcome("crash", code, f"the server exited with {code}")
        if outcome.kind == "ok":
            slow = self.probe.since(t0)
            # One more probe after the case: a stall that outlasts it shows here.
            try:
                self.client.get(self.server.url + "/healthz", timeout=self.stall_seconds)
            except httpx.HTTPError:
                slow.append(float("inf"))
            if slow:
                return Outcome("stall", outcome.status, f"/healthz took {max(slow):.2f} s")
        return outcome

    def _log_size(self) -> int:
        try:
            return self.server.log_path.stat().st_size
        except OSError:
            return 0

    def _last_error(self, since: int) -> str:
        """The last error the server logged after byte ``since`` of its log, with the
        innermost frame of the project's code that raised it."""
        try:
            with self.server.log_path.open("rb") as f:
                f.seek(since)
                text = f.read(4_000_000).decode("utf-8", "replace")
        except OSError:
            return ""
        found, where = "", ""
        lines: list[str] = []
        for line in text.splitlines():
            if line.strip().startswith("{"):
                with suppress(ValueError):
                    lines += (json.loads(line).get("exc") or "").splitlines()
                continue
            lines.append(line)
        for line in lines:
            line = line.strip()
            ours = re.search(r'featurestream/([\w/]+\.py)", line (\d+)', line)
            if ours:
                where = f"{ours[1]}:{ours[2]}"
            elif any(h in line for h in HEAP_ERRORS) or re.match(
                r"^[\w.]+(Error|Exception|Exit)\b", line
            ):
                found = line + (f" (at {where})" if where else "")
                where = ""
        return found

    def _http(self, case: Case, body: bytes) -> Outcome:
        base = case.target
        path = "/v1/streams" if base == "create" else f"/v1/streams/{self.streams[base]}/{base}"
        if base == "unsup":
            path = f"/v1/streams/{self.streams['unsup']}/instances"
        headers = {"content-type": MEDIA[case.fmt]}
        if base == "features" and case.fmt != "json":
            g, n = self.generation, self.counter
            headers["X-Feature-Names"] = f"n{g}-{n}a,n{g}-{n}b"
        if case.label_column is not None:
            headers["X-Label-Column"] = case.label_column
        try:
            r = self.client.post(self.server.url + path, content=body, headers=headers)
        except httpx.TimeoutException as exc:
            return Outcome("hang", None, f"no answer within {self.request_timeout} s: {exc!r}")
        except httpx.HTTPError as exc:
            return Outcome("crash", None, f"connection failed: {exc!r}")
        if r.status_code >= 500:
            return Outcome("5xx", r.status_code, r.text[:300])
        return Outcome("ok", r.status_code)

    def _socket(self, target: str) -> ClientConnection:
        ws = self.sockets.get(target)
        if ws is not None:
            return ws
        stream = self.streams[target.removeprefix("ws-")]
        producer = f"fz{self.generation}-{self.counter}"
        url = f"ws://127.0.0.1:{self.server.port}/v1/streams/{stream}/ws?producer={producer}"
        # Held open across cases: entered here, closed by _close_sockets or when it ends.
        ws = connect(url, open_timeout=self.request_timeout, max_size=None).__enter__()
        first = json.loads(ws.recv(timeout=self.request_timeout))
        if first.get("type") != "selection":
            raise RuntimeError(f"unexpected first message {first}")
        self.sockets[target] = ws
        return ws

    def _frame(self, case: Case, body: bytes) -> Outcome:
        try:
            ws = self._socket(case.target)
        except (TimeoutError, OSError, InvalidHandshake, ConnectionClosed, RuntimeError) as exc:
            return Outcome("hang" if isinstance(exc, TimeoutError) else "crash", None, repr(exc))
        try:
            if case.text_frame:
                ws.send(body.decode("utf-8", "replace"))
            else:
                ws.send(body)
            deadline = time.monotonic() + self.request_timeout
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                message = json.loads(ws.recv(timeout=left))
                if message.get("type") == "selection":
                    continue
                if message.get("type") == "error":
                    status = int(message.get("error", {}).get("status", 0))
                    if status >= 500:
                        return Outcome("5xx", status, json.dumps(message)[:300])
                    return Outcome("ok", f"ws-error-{status}")
                return Outcome("ok", f"ws-{message.get('type')}")
        except TimeoutError:
            self.sockets.pop(case.target, None)
            with suppress(Exception):
                ws.close()
            return Outcome("hang", None, f"no answer to the frame within {self.request_timeout} s")
        except ConnectionClosed as exc:
            self.sockets.pop(case.target, None)
            code = exc.rcvd.code if exc.rcvd is not None else None
            if code in (1011, 1013) or code is None:
                return Outcome("5xx" if code else "crash", f"close-{code}", str(exc))
            return Outcome("ok", f"close-{code}")


# --------------------------------------------------------------------------- running


class Fuzzer:
    """Runs cases against a LiveTarget, records failures, restarts the server after one."""

    def __init__(self, target: LiveTarget, out: Path | None) -> None:
        self.target = target
        self.out = out
        self.report = Report()

    def __call__(self, case: Case) -> None:
        self.report.cases += 1
        n = self.report.cases
        self.target.case_no = n
        outcome = self.target.run(case)
        self.report.statuses[str(outcome.status)] += 1
        if outcome.kind == "ok":
            return
        self.report.failures.append((n, case, outcome))
        print(f"FAIL #{n}: {describe(case, outcome)}", file=sys.stderr, flush=True)
        if self.out is not None:
            self.save(n, case, outcome)
        try:
            if outcome.kind in ("crash", "hang", "stall"):
                raise RuntimeError(outcome.kind)
            # A 5xx may have left its stream in a state that fails every later case there.
            self.target.renew()
        except Exception:
            # A dead or wedged process (a poisoned stream wedges it again): start afresh.
            self.report.restarts += 1
            self.target.restart()

    def save(self, n: int, case: Case, outcome: Outcome) -> None:
        assert self.out is not None
        self.out.mkdir(parents=True, exist_ok=True)
        stem = f"{n:06d}-{outcome.kind}-{case.target}-{case.fmt}"
        (self.out / f"{stem}.bin").write_bytes(case.body)
        meta = {
            "target": case.target,
            "format": case.fmt,
            "media_type": MEDIA[case.fmt],
            "text_frame": case.text_frame,
            "x_label_column": case.label_column,
            "labels": list(case.labels),
            "known": known_points(case, outcome),
            "outcome": outcome.kind,
            "status": outcome.status,
            "detail": outcome.detail,
            "server_error": outcome.server_error,
            "tainted_by": outcome.tainted_by,
        }
        (self.out / f"{stem}.json").write_text(json.dumps(meta, indent=2))


def fuzz_settings(max_examples: int, *, derandomize: bool) -> settings:
    return settings(
        max_examples=max_examples,
        derandomize=derandomize,
        database=None,
        deadline=None,
        phases=[Phase.generate],  # a case never fails the property: nothing to shrink
        suppress_health_check=list(HealthCheck),
    )


def run_rounds(fuzzer: Fuzzer, seconds: float, per_round: int = 200) -> Report:
    """Rounds of ``per_round`` hypothesis cases, each round with its own seed, until time is up."""
    deadline = time.monotonic() + seconds
    round_no = 0
    while time.monotonic() < deadline:
        round_no += 1

        @seed(round_no)
        @fuzz_settings(per_round, derandomize=False)
        @given(cases())
        def one_round(case: Case) -> None:
            if time.monotonic() < deadline:
                fuzzer(case)

        one_round()
    return fuzzer.report


@contextmanager
def live_target(redis_url: str | None, workdir: Path, **kwargs: Any) -> Iterator[LiveTarget]:
    """A server on ``redis_url`` (else a private redis-server), its keys under a fresh prefix."""
    redis_server: RedisServer | None = None
    if redis_url is None:
        redis_server = RedisServer(free_port(), str(workdir / "redis"), appendonly=False)
        (workdir / "redis").mkdir(parents=True, exist_ok=True)
        redis_server.start()
        redis_url = redis_server.url
    prefix = f"fsfuzz-{uuid.uuid4().hex[:12]}"
    target = LiveTarget(redis_url, prefix, workdir, **kwargs)
    try:
        yield target.start()
    finally:
        target.close()
        if redis_server is not None:
            redis_server.kill()
        else:
            _drop_keys(redis_url, prefix)


def _drop_keys(redis_url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        batch: list[bytes] = []
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                client.delete(*batch)
                batch.clear()
        if batch:
            client.delete(*batch)
        for key in client.scan_iter(match=f"{{{prefix}:*", count=1000):
            client.delete(key)
    finally:
        client.close()


def build_parser() -> argparse.ArgumentParser:
    """The command line of the long run."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.fuzz.bodies",
        description="Fuzz a live featurestream server with mutated npy/npz/JSON bodies "
        "and WebSocket frames.",
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to run")
    parser.add_argument(
        "--redis-url",
        default=None,
        help="Redis to use (keys under a fresh prefix, removed at the end); "
        "default: $REDIS_URL, else a private redis-server",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("fuzz-failures"), help="where failing inputs go"
    )
    parser.add_argument("--request-timeout", type=float, default=10.0)
    parser.add_argument("--stall-seconds", type=float, default=1.0)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import os

    redis_url = args.redis_url or os.environ.get("REDIS_URL")
    workdir = Path(tempfile.mkdtemp(prefix="fs-fuzz-"))
    try:
        with live_target(
            redis_url,
            workdir,
            request_timeout=args.request_timeout,
            stall_seconds=args.stall_seconds,
        ) as target:
            report = run_rounds(Fuzzer(target, args.out), args.minutes * 60)
            print(report.summary())
            if report.failures:
                args.out.mkdir(parents=True, exist_ok=True)
                shutil.copy(target.server.log_path, args.out / "server.log")
                print(f"failing inputs and the server's log saved in {args.out}/")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
