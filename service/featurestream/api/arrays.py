"""Arrays from bytes: the one reader of .npy and sparse .npz data, for HTTP bodies and frames.

Every reader validates before anything is applied, and none ever unpickles.
Frames have a fast path: the common frame (a little-endian float64 or float32
C-order .npy of 1 or 2 dimensions) is read straight from the bytes, without a
copy; everything else goes through the general reader, which converts to
float64 or refuses with a precise message.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib import format as npy_format

from featurestream.errors import InvalidInput, LimitExceeded

# --------------------------------------------------------------------------- .npy


def load_npy(data: bytes) -> npt.NDArray[np.float64]:
    """A 1-D or 2-D numeric .npy array as float64 (the general reader)."""
    try:
        arr = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception:  # numpy raises ValueError, OSError, EOFError... on bad bytes
        raise InvalidInput(
            "The body is not a readable .npy array of numbers (object arrays are refused).",
            field="body",
        ) from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "fiu":
        raise InvalidInput(
            f"The .npy array must hold integers or floats; got dtype {arr.dtype}.", field="body"
        )
    if arr.ndim not in (1, 2):
        raise InvalidInput(
            f"The .npy array must be 1-D or 2-D; got shape {arr.shape}.", field="body"
        )
    return np.asarray(arr, dtype=np.float64)


def load_npy_frame(data: bytes) -> npt.NDArray[np.floating[Any]]:
    """A frame's .npy array: the zero-copy view when it is a common one, else the
    general reader (with its error messages)."""
    view = npy_view(data)
    return view if view is not None else load_npy(data)


def npy_view(data: bytes) -> npt.NDArray[np.floating[Any]] | None:
    """A little-endian float64 or float32 C-order .npy of 1 or 2 dimensions.

    The common frames, read straight from ``data`` without a copy; None for
    anything else (the general reader then converts or refuses it). A float32
    view stays float32 here: the selector converts it to float64 in the worker
    thread that applies the frame, not on the event loop that serves reads.
    """
    # A producer sends frames of one shape: their headers repeat byte for byte, so
    # the parsed header is kept (numpy parses it with ast.literal_eval each time).
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
    count = int(np.prod(shape))
    if len(data) < offset + dtype.itemsize * count:
        return None
    return np.frombuffer(data, dtype=dtype, count=count, offset=offset).reshape(shape)


_HEADERS: dict[bytes, tuple[tuple[int, ...], int, np.dtype[Any]]] = {}
# Little-endian floats are read straight from the frame.
_FAST_DTYPES = (np.dtype("<f8"), np.dtype("<f4"))


def _npy_view_parsed(data: bytes) -> npt.NDArray[np.floating[Any]] | None:
    try:
        buf = io.BytesIO(data)
        version = npy_format.read_magic(buf)
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(buf)
        elif version == (2, 0):
            shape, fortran, dtype = npy_format.read_array_header_2_0(buf)
        else:
            return None
        if fortran or dtype not in _FAST_DTYPES or len(shape) not in (1, 2):
            return None
        count = int(np.prod(shape))
        if len(data) < buf.tell() + dtype.itemsize * count:
            return None
        return np.frombuffer(data, dtype=dtype, count=count, offset=buf.tell()).reshape(shape)
    except Exception:  # not only ValueError: numpy's header parser lets tokenize errors out
        # Never an error here: the general reader refuses the frame with its message.
        return None


# --------------------------------------------------------------------------- .npz


def load_npz(data: bytes, max_bytes: int) -> Any:
    """A scipy.sparse matrix saved with ``scipy.sparse.save_npz``.

    The arrays inside may hold at most ``max_bytes`` uncompressed (the request
    size limit): a small compressed body cannot expand into gigabytes.
    """
    import zipfile

    import scipy.sparse

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            expanded = sum(info.file_size for info in zf.infolist())
    except (zipfile.BadZipFile, ValueError, OSError):
        expanded = 0  # not a zip at all: the reader below says so
    if expanded > max_bytes:
        raise LimitExceeded(
            f"The .npz arrays hold {expanded} bytes uncompressed; at most {max_bytes} "
            "(max_request_bytes) are accepted.",
            limit="max_request_bytes",
            maximum=max_bytes,
        )
    try:
        M = scipy.sparse.load_npz(io.BytesIO(data))
    except Exception:  # zip, format and shape errors all mean "not a sparse matrix"
        raise InvalidInput(
            "The body is not a sparse matrix saved with scipy.sparse.save_npz.", field="body"
        ) from None
    if M.dtype.kind not in "fiub":
        raise InvalidInput(f"The sparse matrix must hold numbers; got {M.dtype}.", field="body")
    return M.astype(np.float64)


#: The optional member of a feature-columns .npz body that names its columns.
NAMES_MEMBER = "names.npy"


def load_npz_columns(
    data: bytes, max_bytes: int, header_names: list[str] | None = None
) -> tuple[Any, list[str] | None]:
    """Feature columns of an .npz body: ``(b x n CSR matrix, names or None)``.

    The body is ``scipy.sparse.save_npz`` of an ``(n, b)`` matrix (rows are
    instances, like .npy), optionally with the member ``names.npy``: a 1-D
    array of b str naming the columns, so any name survives (a header holds
    only ASCII without commas). A body giving names both in the archive and in
    ``X-Feature-Names`` must give the same ones. The names then go through the
    same checks as header names (the engine's), whichever way they came.
    """
    M = load_npz(data, max_bytes)
    if M.ndim != 2:
        raise InvalidInput(f"The sparse matrix must be 2-D; got shape {M.shape}.", field="body")
    names = npz_names(data, int(M.shape[1]))
    if names is not None and header_names is not None and names != header_names:
        raise InvalidInput(
            f"X-Feature-Names and the body's {NAMES_MEMBER} name the columns differently.",
            field="X-Feature-Names",
        )
    # Rows are instances, columns features (like .npy): CSC in, CSR rows out.
    return M.T.tocsr(), names if names is not None else header_names


def npz_names(data: bytes, count: int) -> list[str] | None:
    """The column names of an .npz body's ``names.npy`` member (None without one).

    Read without unpickling: an object array is refused, as are bytes, numbers
    and any shape other than one name per column.
    """
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            if NAMES_MEMBER not in zf.namelist():
                return None
            raw = zf.read(NAMES_MEMBER)
    except (zipfile.BadZipFile, ValueError, OSError):
        return None  # load_npz has already refused a body that is not a zip
    field = f"body:{NAMES_MEMBER}"
    try:
        arr = np.load(io.BytesIO(raw), allow_pickle=False)
    except Exception:  # object arrays (pickles) and unreadable bytes alike
        raise InvalidInput(
            f"{NAMES_MEMBER} must be a readable .npy array of str (object arrays are refused).",
            field=field,
        ) from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind != "U":
        raise InvalidInput(
            f"{NAMES_MEMBER} must hold str; got dtype {getattr(arr, 'dtype', type(arr))}.",
            field=field,
        )
    if arr.ndim != 1 or arr.shape[0] != count:
        raise InvalidInput(
            f"{NAMES_MEMBER} must be 1-D with one name per column ({count}); "
            f"got shape {arr.shape}.",
            field=field,
        )
    return [str(name) for name in arr.tolist()]


def load_sparse_instances(data: bytes, max_bytes: int) -> Any:
    """A sparse batch of instances (``scipy.sparse.save_npz``, m x d) as a CSR matrix."""
    M = load_npz(data, max_bytes)
    if M.ndim != 2:
        raise InvalidInput(f"The sparse matrix must be 2-D; got shape {M.shape}.", field="body")
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
    "NAMES_MEMBER",
    "load_npy",
    "load_npy_frame",
    "load_npz",
    "load_npz_columns",
    "load_sparse_instances",
    "npy_view",
    "npz_names",
    "split_labels",
]
