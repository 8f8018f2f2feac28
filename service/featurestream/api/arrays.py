"""Arrays from bytes: the one reader of .npy and sparse .npz data, for HTTP bodies and frames.

Every reader validates before anything is applied, and none ever unpickles.
Nothing a body merely declares is trusted: an .npy header's shape must match
the bytes that follow it exactly (so reading allocates no more than the body
holds), an .npz archive's members are inflated at most to the sizes its zip
directory declares, and only after those are checked against the limits, and
a sparse matrix's index arrays are checked in full (types, lengths, order and
range) before scipy sees them: scipy trusts its index arrays, and out-of-range
indices crash the process inside its conversions.

Frames have a fast path: the common frame (a little-endian float64 or float32
C-order .npy of 1 or 2 dimensions) is read straight from the bytes, without a
copy; everything else goes through the general reader, which converts to
float64 or refuses with a precise message.
"""

from __future__ import annotations

import ast
import io
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream import offload
from featurestream.config import Settings
from featurestream.errors import InvalidInput, LimitExceeded

# --------------------------------------------------------------------------- limits

#: No dimension of any array may exceed this, whatever the limits (int64 arithmetic
#: on shapes and offsets then cannot overflow).
MAX_DIMENSION = 2**40


@dataclass(frozen=True)
class Bounds:
    """What an array read from a body may declare, checked before anything is allocated.

    ``max_bytes`` bounds the uncompressed members of an archive (the request
    size limit); ``max_rows`` and ``max_columns`` the matrix read (None: only
    :data:`MAX_DIMENSION`), named in refusals by the settings they come from.
    """

    max_bytes: int
    max_rows: int | None = None
    max_columns: int | None = None
    rows_setting: str = "max_instances_per_request"
    columns_setting: str = "max_columns_per_request"

    @classmethod
    def instances(cls, settings: Settings) -> Bounds:
        """Instances (rows) with their features and, perhaps, a label (columns)."""
        return cls(
            settings.max_request_bytes,
            max_rows=settings.max_instances_per_request,
            max_columns=settings.max_columns_per_request + 1,
        )

    @classmethod
    def features(cls, settings: Settings) -> Bounds:
        """Feature columns (rows are the stream's instances, checked by the selector)."""
        return cls(settings.max_request_bytes, max_columns=settings.max_columns_per_request)

    def check(self, shape: tuple[int, ...], what: str) -> None:
        """Refuse a (rows, columns) ``shape`` beyond the bounds: 413 (a limit) or 422."""
        for dim in shape:
            if dim < 0 or dim > MAX_DIMENSION:
                raise InvalidInput(
                    f"{what} declares the shape {shape}: dimensions must be between 0 and "
                    f"{MAX_DIMENSION}.",
                    field="body",
                )
        rows, cols = shape
        for count, limit, setting, noun in (
            (rows, self.max_rows, self.rows_setting, "rows"),
            (cols, self.max_columns, self.columns_setting, "columns"),
        ):
            if limit is not None and count > limit:
                raise LimitExceeded(
                    f"{what} declares {count} {noun}; at most {limit} are accepted ({setting}).",
                    limit=setting,
                    maximum=limit,
                )


# --------------------------------------------------------------------------- .npy

_MAGIC = b"\x93NUMPY"
# numpy's own default bound on a header (it is parsed with ast.literal_eval).
_MAX_HEADER = 10_000
_HEADER_KEYS = {"descr", "fortran_order", "shape"}


@dataclass(frozen=True)
class NpyHeader:
    """A validated .npy header: the data are ``count`` items from ``offset`` to the end."""

    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    fortran: bool
    offset: int

    @property
    def count(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count


def npy_header(data: bytes, what: str = "The .npy array", field: str = "body") -> NpyHeader:
    """The header of an .npy array, checked against the bytes that follow it.

    Refuses (InvalidInput) a wrong magic, a version other than 1.0 or 2.0, a
    truncated or malformed header, object, structured, subarray and zero-size
    dtypes, negative or huge dimensions, and data that are not exactly the
    declared shape's bytes: nothing a header says can make a reader allocate
    more than the body holds.
    """

    def bad(reason: str) -> InvalidInput:
        return InvalidInput(f"{what} is not a readable .npy array: {reason}.", field=field)

    if data[:6] != _MAGIC:
        raise bad("wrong magic (not an .npy array)")
    version = tuple(data[6:8])
    if version == (1, 0):
        start, length = 10, int.from_bytes(data[8:10], "little")
    elif version == (2, 0):
        start, length = 12, int.from_bytes(data[8:12], "little")
    else:
        raise bad(f"unsupported format version {'.'.join(map(str, version)) or 'none'}")
    if len(data) < start or length > _MAX_HEADER:
        raise bad("truncated or oversized header")
    if len(data) < start + length:
        raise bad("truncated header")
    try:
        text = data[start : start + length].decode("latin1")
        header = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise bad("malformed header") from None
    if not isinstance(header, dict) or set(header) != _HEADER_KEYS:
        raise bad("the header must hold exactly descr, fortran_order and shape")
    shape, fortran, descr = header["shape"], header["fortran_order"], header["descr"]
    if not isinstance(shape, tuple) or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in shape
    ):
        raise bad("the shape must be a tuple of integers")
    if any(d < 0 or d > MAX_DIMENSION for d in shape):
        raise bad(f"dimensions must be between 0 and {MAX_DIMENSION}; got {shape}")
    if not isinstance(fortran, bool):
        raise bad("fortran_order must be True or False")
    if not isinstance(descr, str):
        raise bad("only plain dtypes are accepted (structured arrays are refused)")
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError, SyntaxError):
        raise bad(f"unknown dtype {descr!r}") from None
    if dtype.hasobject:
        raise bad("object arrays are refused")
    if dtype.fields is not None or dtype.subdtype is not None or dtype.itemsize == 0:
        raise bad(f"dtype {descr!r} is not a plain numeric or string dtype")
    parsed = NpyHeader(dtype, shape, fortran, start + length)
    expected = parsed.count * dtype.itemsize
    if len(data) - parsed.offset != expected:
        raise bad(
            f"the shape {shape} of {dtype} takes {expected} bytes; "
            f"{len(data) - parsed.offset} follow the header"
        )
    return parsed


def read_npy(
    data: bytes, kinds: str, what: str = "The .npy array", field: str = "body"
) -> npt.NDArray[Any]:
    """The array of an .npy ``data`` whose dtype kind is one of ``kinds``, read in place."""
    head = npy_header(data, what, field)
    if head.dtype.kind not in kinds:
        raise InvalidInput(
            f"{what} must hold {_KIND_NAMES.get(kinds, kinds)}; got dtype {head.dtype}.",
            field=field,
        )
    flat = np.frombuffer(data, dtype=head.dtype, count=head.count, offset=head.offset)
    return flat.reshape(head.shape, order="F" if head.fortran else "C")


_KIND_NAMES = {"fiu": "integers or floats", "fiub": "numbers", "iu": "integers", "U": "str"}


def load_npy(
    data: bytes, bounds: Bounds | None = None, *, vector: str = "row"
) -> npt.NDArray[np.float64]:
    """A 1-D or 2-D numeric .npy array as a 2-D float64 array (the general reader).

    A 1-D array is one row (``vector="row"``) or one column (``"column"``);
    the 2-D shape is checked against ``bounds`` before the conversion.
    """
    arr = read_npy(data, "fiu")
    if arr.ndim not in (1, 2):
        raise InvalidInput(
            f"The .npy array must be 1-D or 2-D; got shape {arr.shape}.", field="body"
        )
    if arr.ndim == 1:
        arr = arr[None, :] if vector == "row" else arr[:, None]
    if bounds is not None:
        bounds.check(arr.shape, "The .npy array")
    return np.asarray(arr, dtype=np.float64)


def load_npy_frame(data: bytes, bounds: Bounds | None = None) -> npt.NDArray[np.floating[Any]]:
    """A frame's .npy array, 2-D (a 1-D array is one row): the zero-copy view when it
    is a common one, else the general reader (with its error messages)."""
    view = npy_view(data)
    if view is None:
        return load_npy(data, bounds)
    if view.ndim == 1:
        view = view[None, :]
    if bounds is not None:
        bounds.check(view.shape, "The .npy array")
    return view


def npy_view(data: bytes) -> npt.NDArray[np.floating[Any]] | None:
    """A little-endian float64 or float32 C-order .npy of 1 or 2 dimensions.

    The common frames, read straight from ``data`` without a copy; None for
    anything else (the general reader then converts or refuses it). A float32
    view stays float32 here: the selector converts it to float64 in the worker
    thread that applies the frame, not on the event loop that serves reads.
    """
    # A producer sends frames of one shape: their headers repeat byte for byte, so
    # the parsed header is kept (parsing it takes an ast.literal_eval each time).
    # Version 1.0: 6 magic bytes, 2 version bytes, a 2-byte header length.
    if len(data) < 10 or data[6:8] != b"\x01\x00":
        return _npy_view_parsed(data)
    end = 10 + int.from_bytes(data[8:10], "little")
    key = data[:end]
    parsed = _HEADERS.get(key)
    if parsed is None:
        view = _npy_view_parsed(data)
        if view is not None and len(_HEADERS) < 256:
            _HEADERS[key] = (view.shape, end, view.dtype)
        return view
    shape, offset, dtype = parsed
    count = 1
    for dim in shape:
        count *= dim
    if len(data) != offset + dtype.itemsize * count:
        return None
    return np.frombuffer(data, dtype=dtype, count=count, offset=offset).reshape(shape)


_HEADERS: dict[bytes, tuple[tuple[int, ...], int, np.dtype[Any]]] = {}
# Little-endian floats are read straight from the frame.
_FAST_DTYPES = (np.dtype("<f8"), np.dtype("<f4"))


def _npy_view_parsed(data: bytes) -> npt.NDArray[np.floating[Any]] | None:
    try:
        head = npy_header(data)
    except InvalidInput:
        return None
    if head.fortran or head.dtype not in _FAST_DTYPES or len(head.shape) not in (1, 2):
        return None
    view = np.frombuffer(data, dtype=head.dtype, count=head.count, offset=head.offset)
    return view.reshape(head.shape)


# --------------------------------------------------------------------------- .npz

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


def decoded_size(data: bytes) -> int:
    """The bytes reading ``data`` may take: a zip's members inflate up to the sizes
    its directory declares (and never beyond), anything else is read as it is.

    Cheap (a zip's directory only), so that the caller can decide where to
    decode: a small archive that inflates to megabytes is no small body.
    """
    if data[:2] != b"PK" or len(data) >= offload.INLINE_BYTES:
        return len(data)  # large enough already: the directory is read beside the loop
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return max(len(data), sum(info.file_size for info in zf.infolist()))
    except Exception:  # not a readable zip: the reader refuses it, unread
        return len(data)


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


# --------------------------------------------------------------------------- labels


def split_labels(A: Any, supervised: bool, what: str) -> tuple[Any, Any]:
    """(X, y) from instances whose labels, if ``supervised``, are the last column.

    ``A`` is a 2-D array or a scipy.sparse matrix; X keeps its kind (sparse
    frames stay sparse), y is a dense vector or None.
    """
    if not supervised:
        return A, None
    if A.shape[1] < 2:
        raise InvalidInput(
            f"{what} holds the instances with their labels in the last column; "
            f"got {A.shape[1]} column(s).",
            field="body",
        )
    if isinstance(A, np.ndarray):
        # Views: the selector makes the one contiguous copy it needs.
        return A[:, :-1], A[:, -1]
    M = A.tocsc()
    y = M[:, [M.shape[1] - 1]].toarray().reshape(-1)
    return M[:, : M.shape[1] - 1].tocsr(), y


__all__ = [
    "MAX_DIMENSION",
    "NAMES_MEMBER",
    "Bounds",
    "NpyHeader",
    "decoded_size",
    "load_npy",
    "load_npy_frame",
    "load_npz",
    "load_npz_columns",
    "load_sparse_instances",
    "npy_header",
    "npy_view",
    "npz_names",
    "read_npy",
    "split_labels",
]
