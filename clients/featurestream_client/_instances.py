"""Instances (rows) into request bodies and WebSocket frames.

Rows travel as ``.npy`` (float64, the labels as a last column), sparse rows
as ``.npz``, and rows with class names for labels as JSON. :func:`iter_frames`
cuts an array or an iterable of rows into batches for streaming.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream_client._data import Body, Chunk, dumps
from featurestream_client._inputs import (
    Matrix,
    finite_or_raise,
    float_matrix,
    frame_matrix,
    is_pandas,
    is_sparse,
    refuse_row_shapes,
)
from featurestream_client._npy import NPY, NPZ, npy_frame
from featurestream_client.errors import InvalidInput


@dataclass
class Instances:
    X: Any  # a float64 array, or a scipy.sparse CSR matrix (kept sparse)
    y: Any  # float64 labels, a list of str (class names: sent as JSON), or None


def as_instances(X: Any, y: Any = None, keep_sparse: bool = False) -> Instances:
    """Rows of ``X`` (m x d: numpy, pandas, scipy.sparse) and optional labels ``y`` (m).

    With ``keep_sparse``, a scipy.sparse ``X`` stays sparse (CSR): it travels as
    ``application/x-npz`` bodies and frames, never as a dense m x d array.
    """
    refuse_row_shapes(X)
    if is_sparse(X) and keep_sparse:
        mat: Any = X.tocsr().astype(np.float64)
        if mat.shape[0] == 0:
            raise InvalidInput(
                f"X must be a non-empty 2-D array (m rows x d features); got {mat.shape}."
            )
        finite_or_raise(mat.data, None, "X")
        return Instances(mat, _labels(y, mat.shape[0]))
    if is_sparse(X):
        mat = np.asarray(X.toarray(), dtype=np.float64)
    elif is_pandas(X):
        mat, _ = frame_matrix(X, "X")
    else:
        mat = float_matrix(X, "X")
    if mat.ndim == 1:
        mat = mat[None, :]
    if mat.ndim != 2 or mat.shape[0] == 0:
        raise InvalidInput(
            f"X must be a non-empty 2-D array (m rows x d features); got {mat.shape}."
        )
    finite_or_raise(mat, None, "X")
    return Instances(mat, _labels(y, mat.shape[0]))


def _labels(y: Any, m: int) -> npt.NDArray[np.float64] | list[str] | None:
    if y is None:
        return None
    raw = np.asarray(y.to_numpy() if is_pandas(y) else y).reshape(-1)
    if raw.dtype.kind not in "fiub":
        # Class names travel as strings (docs/algorithms.md, "Targets").
        names = [str(v) for v in raw.tolist()]
        if len(names) != m:
            raise InvalidInput(f"y has {len(names)} labels for {m} rows of X.")
        if any(v in ("nan", "None", "") for v in names):
            raise InvalidInput("y contains missing labels (NaN, None or empty).")
        return names
    labels = float_matrix(y.to_numpy() if is_pandas(y) else y, "y").reshape(-1)
    if labels.shape[0] != m:
        raise InvalidInput(f"y has {labels.shape[0]} labels for {m} rows of X.")
    finite_or_raise(labels, None, "y")
    return labels


def instances_bytes(X: Any, y: npt.NDArray[np.float64] | None) -> tuple[bytes, str]:
    """(binary body, media type) of instances: .npz for sparse rows, else .npy; labels last."""
    if not is_sparse(X):
        return bytes(npy_frame(X, y)), NPY
    import scipy.sparse

    M = X if y is None else scipy.sparse.hstack([X, y[:, None]], format="csr")
    buf = io.BytesIO()
    scipy.sparse.save_npz(buf, M, compressed=False)
    return buf.getvalue(), NPZ


def plan_rows(
    m: int, d: int, batch_size: int | None, max_bytes: int, nnz: int | None = None
) -> list[Chunk]:
    """Row ranges of requests; ``nnz`` (sparse rows) sizes them by their non-zeros."""
    per_row = 8 * (d + 1) if nnz is None else 12 * (nnz // max(1, m) + 2)
    rows = max(1, max_bytes // per_row)
    if batch_size is not None:
        rows = min(rows, batch_size)
    return [Chunk(lo, min(m, lo + rows)) for lo in range(0, m, rows)]


def instances_body(data: Instances, chunk: Chunk, producer: str, seq: int) -> Body:
    X = data.X[chunk.start : chunk.stop]
    y = None if data.y is None else data.y[chunk.start : chunk.stop]
    if isinstance(y, list):
        # String labels do not fit an .npy array: a JSON body.
        rows = X.toarray() if hasattr(X, "toarray") else X
        headers = {"Content-Type": "application/json", "X-Seq": str(seq), "X-Producer": producer}
        return Body(dumps({"X": np.asarray(rows).tolist(), "y": y}), headers)
    payload, media = instances_bytes(X, y)
    headers = {"Content-Type": media, "X-Seq": str(seq), "X-Producer": producer}
    if y is not None:
        headers["X-Label-Column"] = "last"
    return Body(payload, headers)


def iter_frames(
    source: Any, y: Any, batch_size: int
) -> Iterator[tuple[Matrix, npt.NDArray[np.float64] | None]]:
    """Batches ``(X, y or None)`` of at most ``batch_size`` instances, as float64 arrays.

    ``source`` is a 2-D array (with ``y`` for labels) or an iterable of
    instances: ``x`` rows, ``(x, y)`` pairs, or ``(X_batch, y_batch)`` pairs.
    """
    if batch_size < 1:
        raise InvalidInput(f"batch_size must be >= 1; got {batch_size}.")
    refuse_row_shapes(source)
    if is_sparse(source) or is_pandas(source) or isinstance(source, np.ndarray):
        data = as_instances(source, y, keep_sparse=True)
        for lo in range(0, data.X.shape[0], batch_size):
            labels = None if data.y is None else data.y[lo : lo + batch_size]
            yield data.X[lo : lo + batch_size], labels
        return
    if y is not None:
        raise InvalidInput("With an iterable of instances, give the labels inside the items.")
    rows: list[Matrix] = []
    labels_buf: list[npt.NDArray[np.float64]] = []
    count = 0
    labelled: bool | None = None

    def cut(k: int) -> tuple[Matrix, npt.NDArray[np.float64] | None]:
        nonlocal rows, labels_buf, count
        X = np.concatenate(rows) if len(rows) > 1 else rows[0]
        yv = None
        if labelled:
            yv = np.concatenate(labels_buf) if len(labels_buf) > 1 else labels_buf[0]
        rows = [X[k:]] if k < X.shape[0] else []
        labels_buf = [yv[k:]] if yv is not None and k < yv.shape[0] else []
        count -= k
        return X[:k], (None if yv is None else yv[:k])

    for item in source:
        if isinstance(item, tuple) and len(item) == 2:
            x, label = item
        else:
            x, label = item, None
        if labelled is None:
            labelled = label is not None
        elif labelled != (label is not None):
            raise InvalidInput("Either every item carries a label or none does.")
        batch = as_instances(x, None if label is None else np.atleast_1d(np.asarray(label)))
        if rows and batch.X.shape[1] != rows[0].shape[1]:
            # Rows of another width travel in a frame of their own (the server refuses it).
            yield cut(count)
        rows.append(batch.X)
        if batch.y is not None:
            labels_buf.append(batch.y)
        count += batch.X.shape[0]
        while count >= batch_size:
            yield cut(batch_size)
    if count:
        yield cut(count)


__all__ = [
    "Instances",
    "as_instances",
    "instances_body",
    "instances_bytes",
    "iter_frames",
    "plan_rows",
]
