"""Decoding request bodies (JSON and .npy) into float64 arrays.

Everything here validates before anything is applied, so a bad request
changes nothing.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from fastapi import Request

from featurestream.api.schemas import FeatureIn
from featurestream.errors import InvalidInput

NPY_MEDIA_TYPE = "application/x-npy"


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


def columns_to_matrix(features: Sequence[FeatureIn], n: int) -> npt.NDArray[np.float64]:
    """Feature-major ``(b, n)`` matrix from dense or sparse JSON columns."""
    X = np.zeros((len(features), n))
    for i, f in enumerate(features):
        if f.values is not None:
            if len(f.values) != n:
                raise InvalidInput(
                    f"Column {f.name!r} has {len(f.values)} values; the stream has {n} instances.",
                    field=f"features[{i}].values",
                )
            X[i] = f.values
        else:
            idx = np.asarray(f.indices, dtype=np.int64)
            if idx.size and (idx.max() >= n):
                raise InvalidInput(
                    f"Column {f.name!r} has a row index >= {n} (the number of instances).",
                    field=f"features[{i}].indices",
                )
            if np.unique(idx).size != idx.size:
                raise InvalidInput(
                    f"Column {f.name!r} repeats a row index.", field=f"features[{i}].indices"
                )
            X[i, idx] = np.asarray(f.data, dtype=np.float64)
    if not np.isfinite(X).all():
        bad = int(np.argmax(~np.isfinite(X).all(axis=1)))
        raise InvalidInput(
            f"Column {features[bad].name!r} contains NaN or infinite values.",
            field=f"features[{bad}]",
        )
    return X


__all__ = [
    "NPY_MEDIA_TYPE",
    "columns_to_matrix",
    "header_int",
    "header_list",
    "load_npy",
    "media_type",
]
