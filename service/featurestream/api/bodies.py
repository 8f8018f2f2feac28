"""Decoding request bodies (JSON and .npy) into float64 arrays.

Everything here validates before anything is applied, so a bad request
changes nothing.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from fastapi import Request

from featurestream.api.schemas import FeatureIn
from featurestream.errors import InvalidInput, LimitExceeded

NPY_MEDIA_TYPE = "application/x-npy"
NPZ_MEDIA_TYPE = "application/x-npz"


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "application/json").split(";")[0].strip().lower()


def load_npy(body: bytes) -> npt.NDArray[np.float64]:
    """A 1-D or 2-D numeric .npy array as float64; never unpickles."""
    try:
        arr = np.load(io.BytesIO(body), allow_pickle=False)
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


def load_npz(body: bytes, max_bytes: int) -> Any:
    """A scipy.sparse matrix saved with ``scipy.sparse.save_npz``; never unpickles.

    The arrays inside may hold at most ``max_bytes`` uncompressed (the request
    size limit): a small compressed body cannot expand into gigabytes.
    """
    import zipfile

    import scipy.sparse

    try:
        with zipfile.ZipFile(io.BytesIO(body)) as zf:
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
        M = scipy.sparse.load_npz(io.BytesIO(body))
    except Exception:  # zip, format and shape errors all mean "not a sparse matrix"
        raise InvalidInput(
            "The body is not a sparse matrix saved with scipy.sparse.save_npz.", field="body"
        ) from None
    if M.dtype.kind not in "fiub":
        raise InvalidInput(f"The sparse matrix must hold numbers; got {M.dtype}.", field="body")
    return M.astype(np.float64)


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


def load_sparse_instances(body: bytes, max_bytes: int) -> Any:
    """A sparse batch of instances (``scipy.sparse.save_npz``, m x d) as a CSR matrix."""
    M = load_npz(body, max_bytes)
    if M.ndim != 2:
        raise InvalidInput(f"The sparse matrix must be 2-D; got shape {M.shape}.", field="body")
    return M.tocsr()


def header_list(request: Request, name: str) -> list[str] | None:
    raw = request.headers.get(name)
    if raw is None:
        return None
    return [part.strip() for part in raw.split(",")]


def header_int(request: Request, name: str) -> int | None:
    raw = request.headers.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"Header {name} must be an integer; got {raw!r}.", field=name) from None
    if value < 1:
        raise InvalidInput(f"Header {name} must be >= 1; got {value}.", field=name)
    return value


def columns_to_matrix(features: Sequence[FeatureIn], n: int) -> Any:
    """Feature-major ``(b, n)`` columns from dense or sparse JSON columns.

    All dense: a float64 array. Any sparse column: a scipy.sparse CSR matrix, so
    a request of many sparse columns never becomes a dense b x n array.
    """
    for i, f in enumerate(features):
        if f.values is not None and len(f.values) != n:
            raise InvalidInput(
                f"Column {f.name!r} has {len(f.values)} values; the stream has {n} instances.",
                field=f"features[{i}].values",
            )
        if f.indices is not None:
            idx = np.asarray(f.indices, dtype=np.int64)
            if idx.size and idx.max() >= n:
                raise InvalidInput(
                    f"Column {f.name!r} has a row index >= {n} (the number of instances).",
                    field=f"features[{i}].indices",
                )
            if np.unique(idx).size != idx.size:
                raise InvalidInput(
                    f"Column {f.name!r} repeats a row index.", field=f"features[{i}].indices"
                )
            if not np.isfinite(np.asarray(f.data, dtype=np.float64)).all():
                raise InvalidInput(
                    f"Column {f.name!r} contains NaN or infinite values.",
                    field=f"features[{i}].data",
                )
        elif f.values is not None and not np.isfinite(np.asarray(f.values)).all():
            raise InvalidInput(
                f"Column {f.name!r} contains NaN or infinite values.",
                field=f"features[{i}].values",
            )
    if all(f.values is not None for f in features):
        X = np.empty((len(features), n))
        for i, f in enumerate(features):
            X[i] = f.values
        return X
    import scipy.sparse

    indices: list[npt.NDArray[np.int64]] = []
    data: list[npt.NDArray[np.float64]] = []
    for f in features:
        if f.values is not None:
            v = np.asarray(f.values, dtype=np.float64)
            nz = np.flatnonzero(v)
            indices.append(nz)
            data.append(v[nz])
        else:
            indices.append(np.asarray(f.indices, dtype=np.int64))
            data.append(np.asarray(f.data, dtype=np.float64))
    indptr = np.zeros(len(features) + 1, dtype=np.int64)
    np.cumsum([len(i) for i in indices], out=indptr[1:])
    return scipy.sparse.csr_matrix(
        (
            np.concatenate(data) if data else np.zeros(0),
            np.concatenate(indices) if indices else np.zeros(0, np.int64),
            indptr,
        ),
        shape=(len(features), n),
    )


__all__ = [
    "NPY_MEDIA_TYPE",
    "NPZ_MEDIA_TYPE",
    "columns_to_matrix",
    "header_int",
    "header_list",
    "load_npy",
    "load_npz",
    "media_type",
]
