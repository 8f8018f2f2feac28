"""Sparse matrices from bytes: the reader of ``scipy.sparse.save_npz`` archives.

An archive is refused unless it holds only the members ``save_npz`` writes
(and ``names.npy``, the names of feature columns), stored or deflated, whose
declared sizes stay within the bounds; members are inflated one at a time and
never beyond those sizes, and read with the .npy reader of ``arrays.py``
(never unpickled). The declared shape is checked against the limits before any
index array is inflated, and the index arrays in full (types, lengths, order
and range) before scipy sees them: scipy trusts its index arrays, and
out-of-range indices crash the process inside its conversions.
"""

from __future__ import annotations

import io
import zipfile
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream.api.arrays import Bounds, read_npy
from featurestream.errors import InvalidInput, LimitExceeded

#: The optional member of a feature-columns .npz body that names its columns.
NAMES_MEMBER = "names.npy"
# What scipy.sparse.save_npz writes for csr, csc and coo matrices, and names.npy.
_MEMBERS = frozenset(
    f"{name}.npy"
    for name in (
        "format",
        "shape",
        "data",
        "indices",
        "indptr",
        "row",
        "col",
        "coords",
        "_is_array",
    )
) | {NAMES_MEMBER}
# Members that describe the matrix: a few bytes each (read before the others).
_SMALL_MEMBERS = ("format.npy", "shape.npy", "_is_array.npy")
_SMALL_MEMBER_BYTES = 4096
_FORMATS = ("csr", "csc", "coo")
_NOT_NPZ = "The body is not a sparse matrix saved with scipy.sparse.save_npz"


class _Archive:
    """The members of an .npz body, inflated one at a time and never beyond their
    declared sizes, which together stay within ``max_bytes``."""

    def __init__(self, data: bytes, max_bytes: int) -> None:
        try:
            self.zf = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zf.infolist()
        except Exception:  # BadZipFile, NotImplementedError (zip version), OSError...
            raise InvalidInput(f"{_NOT_NPZ} (not a readable zip archive).", field="body") from None
        self.infos: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            if info.filename not in _MEMBERS:
                raise InvalidInput(
                    f"{_NOT_NPZ}: unexpected member {info.filename[:100]!r}.", field="body"
                )
            if info.filename in self.infos:
                raise InvalidInput(
                    f"{_NOT_NPZ}: member {info.filename!r} appears twice.", field="body"
                )
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise InvalidInput(f"{_NOT_NPZ}: members must be stored or deflated.", field="body")
            if info.flag_bits & 0x1:
                raise InvalidInput(f"{_NOT_NPZ}: encrypted members are refused.", field="body")
            if info.filename in _SMALL_MEMBERS and info.file_size > _SMALL_MEMBER_BYTES:
                raise InvalidInput(
                    f"{_NOT_NPZ}: member {info.filename!r} is too large.", field="body"
                )
            self.infos[info.filename] = info
        expanded = sum(info.file_size for info in infos)
        if expanded > max_bytes:
            raise LimitExceeded(
                f"The .npz arrays hold {expanded} bytes uncompressed; at most {max_bytes} "
                "(max_request_bytes) are accepted.",
                limit="max_request_bytes",
                maximum=max_bytes,
            )

    def __contains__(self, name: str) -> bool:
        return name in self.infos

    def raw(self, name: str) -> bytes:
        """The bytes of member ``name``: exactly its declared size, or a refusal."""
        info = self.infos.get(name)
        if info is None:
            raise InvalidInput(f"{_NOT_NPZ}: the member {name!r} is missing.", field="body")
        try:
            with self.zf.open(info) as member:
                raw = member.read(info.file_size + 1)
        except Exception:  # bad CRC, truncated or corrupt data, unsupported features
            raise InvalidInput(
                f"{_NOT_NPZ}: the member {name!r} cannot be read.", field="body"
            ) from None
        if len(raw) != info.file_size:
            raise InvalidInput(
                f"{_NOT_NPZ}: the member {name!r} does not hold its declared size.", field="body"
            )
        return raw

    def array(self, name: str, kinds: str, ndim: int) -> npt.NDArray[Any]:
        arr = read_npy(self.raw(name), kinds, f"The .npz member {name}", f"body:{name}")
        if arr.ndim != ndim:
            raise InvalidInput(
                f"The .npz member {name} must have {ndim} dimension(s); got shape {arr.shape}.",
                field=f"body:{name}",
            )
        return arr

    def close(self) -> None:
        self.zf.close()


def _as_int64(arr: npt.NDArray[Any], name: str, upper: int) -> npt.NDArray[np.int64]:
    """An integer array with every value in [0, upper], as int64 (checked, never wrapped)."""
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) > upper):
        raise InvalidInput(
            f"The .npz member {name} holds values outside [0, {upper}].", field=f"body:{name}"
        )
    return arr.astype(np.int64)


def _compressed(
    archive: _Archive, fmt: str, shape: tuple[int, int], nnz_data: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(indptr, indices) of a csr or csc matrix, checked in full."""
    major, minor = shape if fmt == "csr" else (shape[1], shape[0])
    indptr = archive.array("indptr.npy", "iu", 1)
    if len(indptr) != major + 1:
        raise InvalidInput(
            f"The .npz member indptr.npy must hold {major + 1} entries for a {fmt} matrix of "
            f"shape {shape}; got {len(indptr)}.",
            field="body:indptr.npy",
        )
    indices = archive.array("indices.npy", "iu", 1)
    if len(indices) != nnz_data:
        raise InvalidInput(
            f"The .npz members indices.npy and data.npy differ in length "
            f"({len(indices)} and {nnz_data}).",
            field="body:indices.npy",
        )
    ptr = _as_int64(indptr, "indptr.npy", nnz_data)
    if ptr[0] != 0 or ptr[-1] != nnz_data or (major and bool(np.any(ptr[1:] < ptr[:-1]))):
        raise InvalidInput(
            f"The .npz member indptr.npy must start at 0, never decrease and end at the "
            f"number of stored values ({nnz_data}).",
            field="body:indptr.npy",
        )
    if minor == 0 and len(indices):
        raise InvalidInput(
            "The .npz member indices.npy holds indices of a dimension of size 0.",
            field="body:indices.npy",
        )
    return ptr, _as_int64(indices, "indices.npy", max(minor - 1, 0))


def load_npz(data: bytes, bounds: Bounds) -> tuple[Any, list[str] | None]:
    """A csr, csc or coo matrix saved with ``scipy.sparse.save_npz``, validated in
    full and returned as a canonical float64 csr or csc matrix, with the names of
    its columns when the archive holds ``names.npy`` (None without one).

    The declared shape is checked against ``bounds`` before any index array is
    inflated, and the index arrays in full before scipy sees them.
    """
    import scipy.sparse

    archive = _Archive(data, bounds.max_bytes)
    try:
        fmt_arr = archive.array("format.npy", "SU", 0)
        fmt = fmt_arr.item()
        fmt = fmt.decode("ascii", "replace") if isinstance(fmt, bytes) else str(fmt)
        if fmt not in _FORMATS:
            raise InvalidInput(
                f"The sparse matrix must be saved as {', '.join(_FORMATS)}; got {fmt[:20]!r}.",
                field="body:format.npy",
            )
        dims = archive.array("shape.npy", "iu", 1)
        if len(dims) != 2:
            raise InvalidInput(
                f"The sparse matrix must be 2-D; got shape {tuple(dims.tolist())}.", field="body"
            )
        shape = (int(dims[0]), int(dims[1]))
        bounds.check(shape, "The sparse matrix")
        values = archive.array("data.npy", "fiub", 1)
        if fmt == "coo":
            M: Any = _coo(archive, shape, len(values), values)
        else:
            indptr, indices = _compressed(archive, fmt, shape, len(values))
            cls = scipy.sparse.csr_matrix if fmt == "csr" else scipy.sparse.csc_matrix
            M = cls((values.astype(np.float64), indices, indptr), shape=shape)
        M.sum_duplicates()  # canonical: sorted indices, one value per position
        names = _names(archive, shape[1]) if NAMES_MEMBER in archive else None
    finally:
        archive.close()
    return M, names


def _coo(archive: _Archive, shape: tuple[int, int], nnz: int, values: npt.NDArray[Any]) -> Any:
    import scipy.sparse

    if "coords.npy" in archive:
        coords = archive.array("coords.npy", "iu", 2)
        if coords.shape != (2, nnz):
            raise InvalidInput(
                f"The .npz member coords.npy must have shape (2, {nnz}); got {coords.shape}.",
                field="body:coords.npy",
            )
        row_raw, col_raw = coords[0], coords[1]
    else:
        row_raw, col_raw = archive.array("row.npy", "iu", 1), archive.array("col.npy", "iu", 1)
    if len(row_raw) != nnz or len(col_raw) != nnz:
        raise InvalidInput(
            "The .npz members of a coo matrix must hold as many rows and columns as values.",
            field="body",
        )
    if nnz and (shape[0] == 0 or shape[1] == 0):
        raise InvalidInput(
            "A sparse matrix with a dimension of size 0 holds no values.", field="body"
        )
    row = _as_int64(row_raw, "row.npy", max(shape[0] - 1, 0))
    col = _as_int64(col_raw, "col.npy", max(shape[1] - 1, 0))
    coo = scipy.sparse.coo_matrix((values.astype(np.float64), (row, col)), shape=shape)
    # Compressed along the smaller dimension: the conversion allocates one pointer per
    # row (csr) or column (csc), and one of the two may be bounded only by MAX_DIMENSION.
    return coo.tocsr() if shape[0] <= shape[1] else coo.tocsc()


def _names(archive: _Archive, count: int) -> list[str]:
    field = f"body:{NAMES_MEMBER}"
    arr = read_npy(archive.raw(NAMES_MEMBER), "U", NAMES_MEMBER, field)
    if arr.ndim != 1 or arr.shape[0] != count:
        raise InvalidInput(
            f"{NAMES_MEMBER} must be 1-D with one name per column ({count}); "
            f"got shape {arr.shape}.",
            field=field,
        )
    return [str(name) for name in arr.tolist()]


def load_npz_columns(
    data: bytes, bounds: Bounds, header_names: list[str] | None = None
) -> tuple[Any, list[str] | None]:
    """Feature columns of an .npz body: ``(b x n CSR matrix, names or None)``.

    The body is ``scipy.sparse.save_npz`` of an ``(n, b)`` matrix (rows are
    instances, like .npy), optionally with the member ``names.npy``: a 1-D
    array of b str naming the columns, so any name survives (a header holds
    only ASCII without commas). A body giving names both in the archive and in
    ``X-Feature-Names`` must give the same ones. The names then go through the
    same checks as header names (the engine's), whichever way they came.
    """
    M, names = load_npz(data, bounds)
    if names is not None and header_names is not None and names != header_names:
        raise InvalidInput(
            f"X-Feature-Names and the body's {NAMES_MEMBER} name the columns differently.",
            field="X-Feature-Names",
        )
    # Rows are instances, columns features (like .npy): CSC in, CSR rows out.
    return M.T.tocsr(), names if names is not None else header_names


def npz_names(data: bytes, count: int, max_bytes: int = 1 << 30) -> list[str] | None:
    """The column names of an .npz body's ``names.npy`` member (None without one).

    Read without unpickling: an object array is refused, as are bytes, numbers
    and any shape other than one name per column.
    """
    archive = _Archive(data, max_bytes)
    try:
        return _names(archive, count) if NAMES_MEMBER in archive else None
    finally:
        archive.close()


def load_sparse_instances(data: bytes, bounds: Bounds) -> Any:
    """A sparse batch of instances (``scipy.sparse.save_npz``, m x d) as a CSR matrix."""
    M, _ = load_npz(data, bounds)
    return M.tocsr()


__all__ = [
    "NAMES_MEMBER",
    "load_npz",
    "load_npz_columns",
    "load_sparse_instances",
    "npz_names",
]
