"""The .npy and .npz reader refuses every malformed or hostile body with a 4xx error.

Nothing a body declares is trusted: index arrays are checked in full before
scipy sees them (out-of-range indices crash scipy's conversions), declared
shapes are checked before anything is allocated, and archive members inflate
no further than their declared sizes.
"""

from __future__ import annotations

import contextlib
import io
import random
import struct
import time
import tracemalloc
import zipfile
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from featurestream.api import arrays
from featurestream.api.arrays import Bounds
from featurestream.api.npz import load_npz
from featurestream.errors import InvalidInput, LimitExceeded
from tests.support import zip_version_needed

BOUNDS = Bounds(1 << 24, max_rows=1000, max_columns=1000)
M = sp.random(6, 5, density=0.4, format="csr", random_state=1)


def npy(a: Any) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.asarray(a), allow_pickle=True)
    return buf.getvalue()


def npz_of(matrix: Any, compressed: bool = False) -> bytes:
    buf = io.BytesIO()
    sp.save_npz(buf, matrix, compressed=compressed)
    return buf.getvalue()


def archive(members: dict[str, bytes], method: int = zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, raw in members.items():
            zf.writestr(name, raw)
    return buf.getvalue()


def csr_members(
    indices: Any, indptr: Any, data: Any, shape: Any, fmt: Any = b"csr"
) -> dict[str, bytes]:
    return {
        "format.npy": npy(np.array(fmt)),
        "shape.npy": npy(np.asarray(shape)),
        "data.npy": npy(np.asarray(data)),
        "indices.npy": npy(np.asarray(indices)),
        "indptr.npy": npy(np.asarray(indptr)),
    }


def refused(body: bytes, bounds: Bounds = BOUNDS) -> InvalidInput | LimitExceeded:
    with pytest.raises((InvalidInput, LimitExceeded)) as err:
        load_npz(body, bounds)
    assert isinstance(err.value, (InvalidInput, LimitExceeded))
    return err.value


# --------------------------------------------------------------------------- valid bodies


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("compressed", [False, True])
def test_csr_csc_and_coo_matrices_are_read_exactly(fmt: str, compressed: bool) -> None:
    got, names = load_npz(npz_of(M.asformat(fmt), compressed), BOUNDS)
    assert names is None
    assert got.dtype == np.float64 and got.shape == M.shape
    np.testing.assert_array_equal(got.toarray(), M.toarray())
    assert got.has_canonical_format


def test_integer_and_bool_values_and_sparse_arrays_are_read_too() -> None:
    ints = sp.csr_array(np.array([[0, 2], [3, 0]], dtype=np.int8))
    got, _ = load_npz(npz_of(ints), BOUNDS)
    np.testing.assert_array_equal(got.toarray(), [[0.0, 2.0], [3.0, 0.0]])
    bools = sp.csc_matrix(np.array([[True, False], [False, True]]))
    np.testing.assert_array_equal(load_npz(npz_of(bools), BOUNDS)[0].toarray(), np.eye(2))


def test_duplicates_and_unsorted_indices_are_summed_in_canonical_order() -> None:
    body = archive(csr_members([2, 0, 2], [0, 3], [1.0, 2.0, 3.0], (1, 3)))
    got, _ = load_npz(body, BOUNDS)
    assert got.has_canonical_format
    np.testing.assert_array_equal(got.toarray(), [[2.0, 0.0, 4.0]])


def test_empty_matrices_are_fine() -> None:
    for shape in [(0, 0), (0, 3), (3, 0)]:
        got, _ = load_npz(npz_of(sp.csr_matrix(shape)), BOUNDS)
        assert got.shape == shape and got.nnz == 0


# --------------------------------------------------------------------------- index arrays


@pytest.mark.parametrize(
    ("indices", "indptr", "data", "shape", "field"),
    [
        # The report: indices far out of range crash scipy's conversions.
        ([10**9, -(10**9), 0], [0, 3], [1.0, 2.0, 3.0], (1, 4), "indices.npy"),
        ([4], [0, 1], [1.0], (1, 4), "indices.npy"),  # one past the end
        ([-1], [0, 1], [1.0], (1, 4), "indices.npy"),
        (np.array([2**63], dtype=np.uint64), [0, 1], [1.0], (1, 4), "indices.npy"),
        (np.array([2**64 - 1], dtype=np.uint64), [0, 1], [1.0], (1, 4), "indices.npy"),
        ([0, 1], [0, 2], [1.0, 2.0], (1, 1), "indices.npy"),
        ([0], [0, 1], [1.0], (1, 0), "indices.npy"),  # no column to point to
        ([0, 1], [0, 1], [1.0, 2.0], (1, 4), "indptr.npy"),  # ends short of nnz
        ([0, 1], [0, 3], [1.0, 2.0], (1, 4), "indptr.npy"),  # ends beyond nnz
        ([0, 1], [1, 2], [1.0, 2.0], (1, 4), "indptr.npy"),  # does not start at 0
        ([0, 1], [0, 2, 1, 2], [1.0, 2.0], (3, 4), "indptr.npy"),  # decreases
        ([0, 1], [0, -1, 2], [1.0, 2.0], (2, 4), "indptr.npy"),
        ([0, 1], [0, 2], [1.0, 2.0], (2, 4), "indptr.npy"),  # length is not rows + 1
        ([0, 1], [0, 2, 2, 2], [1.0, 2.0], (2, 4), "indptr.npy"),
        ([0, 1], np.array([0, 2**63], dtype=np.uint64), [1.0, 2.0], (1, 4), "indptr.npy"),
        ([0, 1, 2], [0, 3], [1.0, 2.0], (1, 4), "indices.npy"),  # indices vs data
        ([0.0, 1.0], [0, 2], [1.0, 2.0], (1, 4), "indices.npy"),  # float indices
        ([0, 1], [0.0, 2.0], [1.0, 2.0], (1, 4), "indptr.npy"),
        ([[0, 1]], [0, 2], [1.0, 2.0], (1, 4), "indices.npy"),  # 2-D indices
    ],
)
def test_index_arrays_are_checked_in_full(
    indices: Any, indptr: Any, data: Any, shape: Any, field: str
) -> None:
    err = refused(archive(csr_members(indices, indptr, data, shape)))
    assert isinstance(err, InvalidInput) and err.field == f"body:{field}", err.message


def test_csc_indices_are_checked_against_the_rows() -> None:
    # A csc matrix of shape (2, 5): its indices are rows, in [0, 2).
    body = archive(csr_members([0, 2], [0, 1, 2, 2, 2, 2], [1.0, 2.0], (2, 5), fmt=b"csc"))
    assert refused(body).field == "body:indices.npy"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("row", "col"),
    [([0, 6], [0, 1]), ([0, 1], [0, 5]), ([-1, 0], [0, 0]), ([0], [0, 1])],
)
def test_coo_coordinates_are_checked_in_full(row: list[int], col: list[int]) -> None:
    members = {
        "format.npy": npy(np.array(b"coo")),
        "shape.npy": npy(np.array([6, 5])),
        "data.npy": npy(np.array([1.0, 2.0])),
        "row.npy": npy(np.array(row)),
        "col.npy": npy(np.array(col)),
    }
    assert isinstance(refused(archive(members)), InvalidInput)


@pytest.mark.parametrize(
    ("shape", "error"),
    [
        ((-1, 4), InvalidInput),
        ((1, -4), InvalidInput),
        ((1, 2, 3), InvalidInput),
        ((4,), InvalidInput),
        ((2**62, 1), InvalidInput),
        (np.array([2**64 - 1, 1], dtype=np.uint64), InvalidInput),
        ((1001, 1), LimitExceeded),
        ((1, 1001), LimitExceeded),
    ],
)
def test_declared_shapes_are_checked_before_the_indices_are_read(shape: Any, error: type) -> None:
    body = archive(csr_members([0], [0, 1], [1.0], shape))
    assert isinstance(refused(body), error)


def test_a_shape_bomb_is_refused_without_allocating() -> None:
    # The report: under a kilobyte declaring (8, 3e8), a valid empty csr matrix that
    # scipy converts to csc with 3e8 + 1 column pointers.
    members = csr_members(np.zeros(0, np.int32), [0] * 9, np.zeros(0), (8, 300_000_000))
    body = archive(members, zipfile.ZIP_DEFLATED)
    assert len(body) < 2000
    tracemalloc.start()
    try:
        err = refused(body, Bounds(1 << 28, max_columns=200_001, max_rows=100_000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(err, LimitExceeded) and err.limit == "max_columns_per_request"
    assert peak < 1 << 20
    # A feature stream bounds no rows: that shape still costs nothing as csc.
    got, _ = load_npz(
        archive(csr_members([0], [0, 1, 1], [1.0], (300_000_000, 2), fmt=b"csc")),
        Bounds(1 << 28, max_columns=10),
    )
    assert got.shape == (300_000_000, 2) and got.nnz == 1


# --------------------------------------------------------------------------- the archive


def test_a_deflate_bomb_is_refused_from_its_declared_sizes() -> None:
    zeros = npy(np.zeros(1 << 21))  # 16 MiB of zeros deflate to a few KiB
    members = csr_members([0], [0, 1], [1.0], (1, 4))
    members["data.npy"] = zeros
    body = archive(members, zipfile.ZIP_DEFLATED)
    assert len(body) < 100_000
    err = refused(body, Bounds(1 << 20))
    assert isinstance(err, LimitExceeded) and err.limit == "max_request_bytes"
    assert arrays.decoded_size(body) > 1 << 24


def test_a_member_lying_about_its_size_inflates_no_further() -> None:
    body = bytearray(archive(csr_members([0], [0, 1], [1.0], (1, 4)), zipfile.ZIP_DEFLATED))
    # Shrink data.npy's declared size in the central directory: reading stops there.
    at = bytes(body).index(b"PK\x01\x02")
    while at >= 0:
        name_len = struct.unpack_from("<H", body, at + 28)[0]
        name = bytes(body[at + 46 : at + 46 + name_len])
        if name == b"data.npy":
            struct.pack_into("<I", body, at + 24, 10)
        at = bytes(body).find(b"PK\x01\x02", at + 4)
    assert isinstance(refused(bytes(body)), InvalidInput)


def test_malformed_archives_are_refused() -> None:
    good = npz_of(M)
    bodies = {
        "not a zip": b"PK\x03\x04 not really",
        "empty": b"",
        "truncated": good[: len(good) // 2],
        "version needed 10.8": zip_version_needed(good, 108),
        "no format": archive(
            {k: v for k, v in csr_members([0], [0, 1], [1.0], (1, 4)).items() if k != "format.npy"}
        ),
        "no indptr": archive(
            {k: v for k, v in csr_members([0], [0, 1], [1.0], (1, 4)).items() if k != "indptr.npy"}
        ),
        "unknown member": archive({**csr_members([0], [0, 1], [1.0], (1, 4)), "x.npy": b""}),
        "bsr": npz_of(sp.bsr_matrix(np.eye(2))),
        "dia": npz_of(sp.dia_matrix(np.eye(2))),
        "format of numbers": archive(csr_members([0], [0, 1], [1.0], (1, 4), fmt=7)),
        "unknown format": archive(csr_members([0], [0, 1], [1.0], (1, 4), fmt=b"xyz")),
        "bzip2": archive(csr_members([0], [0, 1], [1.0], (1, 4)), zipfile.ZIP_BZIP2),
        "complex values": archive(csr_members([0], [0, 1], [1j], (1, 4))),
        "object values": archive(csr_members([0], [0, 1], np.array([1.0], dtype=object), (1, 4))),
        "str values": archive(csr_members([0], [0, 1], ["a"], (1, 4))),
        "structured values": archive(
            csr_members([0], [0, 1], np.zeros(1, dtype=[("a", "<f8")]), (1, 4))
        ),
    }
    # A bad CRC: flip a byte of a stored member's data.
    bad_crc = bytearray(good)
    at = bytes(bad_crc).index(b"\x93NUMPY", 40) + 60
    bad_crc[at] ^= 0xFF
    bodies["bad crc"] = bytes(bad_crc)
    # The same member twice.
    dup = io.BytesIO()
    with zipfile.ZipFile(dup, "w") as zf:
        for name, raw in csr_members([0], [0, 1], [1.0], (1, 4)).items():
            zf.writestr(name, raw)
        with pytest.warns(UserWarning):
            zf.writestr("data.npy", npy(np.array([5.0])))
    bodies["duplicate member"] = dup.getvalue()
    # Encrypted members (the flag alone).
    enc = bytearray(good)
    for sig, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = enc.find(sig)
        while at >= 0:
            enc[at + offset] |= 1
            at = enc.find(sig, at + 4)
    bodies["encrypted"] = bytes(enc)
    for what, body in bodies.items():
        try:
            load_npz(body, BOUNDS)
        except (InvalidInput, LimitExceeded):
            continue
        pytest.fail(f"accepted: {what}")


# --------------------------------------------------------------------------- .npy


def _header(header: str, version: bytes = b"\x01\x00") -> bytes:
    raw = header.encode("latin1")
    size = struct.pack("<H", len(raw)) if version == b"\x01\x00" else struct.pack("<I", len(raw))
    return b"\x93NUMPY" + version + size + raw


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\x93NUMP",
        b"NOTNUMPY" + b"\x00" * 40,
        _header("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", b"\x03\x00"),
        _header("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", b"\x0a\x08"),
        _header("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }")[:20],
        _header("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }"),  # no data
        _header("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }") + b"\x00" * 9,
        _header("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }") + b"\x00" * 8,
        _header("{'descr': '<f8', 'fortran_order': False, 'shape': (2**64, 2**64), }"),
        _header("{'descr': '<f8', 'fortran_order': False, 'shape': (1.5,), }") + b"\x00" * 8,
        _header("{'descr': '<f8', 'fortran_order': 0, 'shape': (1,), }") + b"\x00" * 8,
        _header("{'descr': '<f8', 'shape': (1,), }") + b"\x00" * 8,
        _header("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x': 1}") + b"\x00" * 8,
        _header("['<f8', False, (1,)]") + b"\x00" * 8,
        _header("{'descr': __import__('os'), 'fortran_order': False, 'shape': (1,)}"),
        _header("{'descr': '<q8x', 'fortran_order': False, 'shape': (1,), }") + b"\x00" * 8,
        _header("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (1,), }") + b"\0" * 8,
        _header("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }") + b"\x00" * 8,
        _header("{'descr': '|V0', 'fortran_order': False, 'shape': (1,), }"),
        _header("{'descr': '(' * 5000, 'fortran_order': False, 'shape': (1,), }"),
        _header("{" * 9000),
        b"\x93NUMPY\x01\x00\xff\xff" + b" " * 100,  # a header longer than the body
        npy(np.array([1.0], dtype=object)),
        npy(np.array(["a", "b"])),
        npy(np.array([1j])),
        npy(np.array([True])),
        npy(np.zeros((1, 2, 3))),
        npy(np.float64(1.0)),
        npy(np.zeros(3, dtype=[("a", "<f8")])),
    ],
)
def test_malformed_npy_is_refused(body: bytes) -> None:
    with pytest.raises(InvalidInput):
        arrays.load_npy(body)
    assert arrays.npy_view(body) is None


def test_an_npy_shape_bomb_allocates_nothing() -> None:
    body = _header("{'descr': '<f8', 'fortran_order': False, 'shape': (8, 300000000), }")
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(InvalidInput, match="follow the header"):
            arrays.load_npy(body)
        assert arrays.npy_view(body) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20 and time.perf_counter() - t0 < 1


def test_npy_of_every_numeric_kind_and_order_is_read() -> None:
    a = np.arange(12).reshape(3, 4)
    for arr in [a, a.astype(">i2"), a.astype("<u8"), a.astype(">f4"), np.asfortranarray(a)]:
        body = npy(arr)
        np.testing.assert_array_equal(arrays.load_npy(body), a.astype(np.float64))
        if arr.dtype == np.dtype("<i8"):
            assert arrays.npy_view(body) is None
    v2 = io.BytesIO()
    np.lib.format.write_array(v2, a.astype("<f8"), version=(2, 0))
    np.testing.assert_array_equal(arrays.load_npy(v2.getvalue()), a)
    np.testing.assert_array_equal(arrays.load_npy_frame(npy(np.arange(3.0))), [[0.0, 1.0, 2.0]])
    column = arrays.load_npy(npy(np.arange(3.0)), vector="column")
    assert column.shape == (3, 1)


def test_npy_shapes_are_checked_against_the_bounds() -> None:
    bounds = Bounds(1 << 20, max_rows=2, max_columns=3)
    with pytest.raises(LimitExceeded) as err:
        arrays.load_npy(npy(np.zeros((3, 1))), bounds)
    assert err.value.limit == "max_instances_per_request"
    with pytest.raises(LimitExceeded) as err:
        arrays.load_npy_frame(npy(np.zeros((1, 4))), bounds)
    assert err.value.limit == "max_columns_per_request"
    with pytest.raises(LimitExceeded):  # zero rows, but a million columns
        arrays.load_npy_frame(npy(np.zeros((0, 1_000_000))), bounds)


# --------------------------------------------------------------------------- mutations


def _mutate(rng: random.Random, body: bytes) -> bytes:
    out = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        at = rng.randrange(len(out)) if out else 0
        if op < 0.5 and out:
            out[at] = rng.randrange(256)
        elif op < 0.7 and out:
            struct.pack_into("<I", out, min(at, len(out) - 4), rng.getrandbits(32))
        elif op < 0.85:
            del out[at : at + rng.randint(1, 16)]
        else:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return bytes(out)


def test_mutated_bodies_are_read_or_refused_never_anything_else() -> None:
    rng = random.Random(14)
    seeds = [
        npz_of(M),
        npz_of(M.tocsc(), compressed=True),
        npz_of(M.tocoo()),
        archive(csr_members([0, 3], [0, 1, 2], [1.0, 2.0], (2, 4))),
    ]
    npys = [npy(np.arange(6.0).reshape(2, 3)), npy(np.arange(6, dtype=">i4"))]
    deadline = time.monotonic() + 20
    for i in range(3000):
        if time.monotonic() > deadline:
            break
        body = _mutate(rng, seeds[i % len(seeds)])
        try:
            got, _ = load_npz(body, BOUNDS)
            got.tocsc().tocsr().toarray()  # whatever was accepted converts safely
        except (InvalidInput, LimitExceeded):
            pass
        with contextlib.suppress(InvalidInput, LimitExceeded):
            arrays.load_npy(_mutate(rng, npys[i % len(npys)]), BOUNDS)
