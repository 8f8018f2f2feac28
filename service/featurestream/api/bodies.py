"""Reading request bodies: media types, headers and JSON columns (arrays: ``arrays.py``).

Everything here validates before anything is applied, so a bad request
changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from fastapi import Request

from featurestream.api.schemas import FeatureIn
from featurestream.errors import InvalidInput

NPY_MEDIA_TYPE = "application/x-npy"
NPZ_MEDIA_TYPE = "application/x-npz"


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "application/json").split(";")[0].strip().lower()


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
    "media_type",
]
