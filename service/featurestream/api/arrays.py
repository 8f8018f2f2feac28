"""Arrays from bytes: the .npy reader, and the limits of every array read, for HTTP
bodies and frames.

Every reader validates before anything is applied, and none ever unpickles.
Nothing a body merely declares is trusted: an .npy header's shape must match
the bytes that follow it exactly (so reading allocates no more than the body
holds), and a declared shape is checked against the limits (:class:`Bounds`)
before anything is allocated. Sparse ``.npz`` archives are read by ``npz.py``;
:func:`decoded_size` tells what a body may inflate to, :func:`split_labels`
splits instances from their labels.

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


# --------------------------------------------------------------------------- archives


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
    "Bounds",
    "NpyHeader",
    "decoded_size",
    "load_npy",
    "load_npy_frame",
    "npy_header",
    "npy_view",
    "read_npy",
    "split_labels",
]
