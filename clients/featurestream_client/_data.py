"""Feature columns into request bodies: read, checked, planned in chunks, encoded.

Columns are checked before the first request is sent (numeric, finite,
consistent lengths, unique names; see ``_inputs``), so bad input fails on the
client and changes nothing on the server. Feature columns travel binary: dense ones as
``application/x-npy`` (float64, names in ``X-Feature-Names``) when every name
can sit in that comma-separated ASCII header; sparse ones, and dense ones
with other names, as ``application/x-npz`` (``scipy.sparse.save_npz`` of the
``(n, b)`` CSC chunk, the names inside the archive as ``names.npy``, so any
Unicode survives). Whole groups travel as JSON (see ``_groups``), instances as ``_instances``
says.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream_client._inputs import (
    Matrix,
    finite_or_raise,
    float_matrix,
    frame_matrix,
    is_pandas,
    is_sparse,
)
from featurestream_client._npy import NPY, NPZ, npy_bytes, npz_bytes
from featurestream_client.errors import InvalidInput

# Rough JSON sizes, used only to keep requests under the byte budget.
JSON_NUMBER_BYTES = 24
_JSON_SPARSE_ENTRY_BYTES = 34


@dataclass
class Columns:
    """Feature columns ready to send: dense ``(n, b)`` float64 or a canonical CSC matrix."""

    n_rows: int
    names: list[str] | None
    dense: Matrix | None = None
    csc: Any = None

    @property
    def n_cols(self) -> int:
        if self.dense is not None:
            return int(self.dense.shape[1])
        return int(self.csc.shape[1])

    @property
    def names_in_header(self) -> bool:
        """Whether the columns travel as .npy, named in ``X-Feature-Names`` (else .npz)."""
        return self.dense is not None and (
            self.names is None or all(header_safe(n) for n in self.names)
        )

    def column_bytes(self, j: int) -> int:
        """Approximate binary body bytes of column ``j`` (.npy, or .npz with its name)."""
        if self.names_in_header:
            return 8 * self.n_rows
        nnz = self.n_rows if self.dense is not None else self.nnz(j)
        name = 0 if self.names is None else 4 * len(self.names[j])
        return 8 + 12 * nnz + name

    def all_column_bytes(self) -> npt.NDArray[np.int64]:
        """:meth:`column_bytes` of every column at once."""
        b = self.n_cols
        if self.names_in_header:
            return np.full(b, 8 * self.n_rows, dtype=np.int64)
        if self.dense is not None:
            nnz = np.full(b, self.n_rows, dtype=np.int64)
        else:
            nnz = np.diff(np.asarray(self.csc.indptr, dtype=np.int64)).astype(np.int64)
        out = 8 + 12 * nnz
        if self.names is not None:
            out += 4 * np.fromiter((len(n) for n in self.names), np.int64, b)
        return out

    def json_bytes(self, j: int) -> int:
        """Approximate JSON bytes of column ``j``."""
        if self.dense is not None:
            return 48 + JSON_NUMBER_BYTES * self.n_rows
        return 48 + _JSON_SPARSE_ENTRY_BYTES * self.nnz(j)

    def nnz(self, j: int) -> int:
        return int(self.csc.indptr[j + 1] - self.csc.indptr[j])


def as_columns(data: Any, names: Sequence[str] | None = None) -> Columns:
    """Read ``data`` (n x b: numpy, pandas, scipy.sparse, nested lists) as b feature columns."""
    what = "Feature data"
    given = None if names is None else [str(n) for n in names]
    if is_sparse(data):
        csc = data.tocsc(copy=True).astype(np.float64)
        csc.sum_duplicates()  # canonical: sorted, unique row indices per column
        csc.sort_indices()
        if csc.ndim != 2:
            raise InvalidInput(f"{what} must be 2-D (n rows x b columns).")
        if csc.data.size and not np.isfinite(csc.data).all():
            raise InvalidInput(f"{what} contains NaN or infinite values.")
        cols = Columns(int(csc.shape[0]), given, csc=csc)
    elif is_pandas(data):
        dense, frame_names = frame_matrix(data, what)
        cols = Columns(int(dense.shape[0]), given if given is not None else frame_names, dense)
    else:
        dense = float_matrix(data, what)
        if dense.ndim == 1:
            dense = dense[:, None]
        if dense.ndim != 2:
            raise InvalidInput(f"{what} must be 2-D (n rows x b columns); got {dense.shape}.")
        cols = Columns(int(dense.shape[0]), given, dense)
    if cols.dense is not None:
        finite_or_raise(cols.dense, cols.names, "Column")
    if cols.names is not None:
        check_names(cols.names, cols.n_cols)
    return cols


def check_names(names: Sequence[str], count: int) -> None:
    if len(names) != count:
        raise InvalidInput(f"Got {len(names)} names for {count} columns.")
    unique = set(names)
    if len(unique) == len(names) and "" not in unique:
        return  # the common case, without a Python step per name
    seen: set[str] = set()
    for name in names:
        if not name:
            raise InvalidInput("Feature names must be non-empty strings.")
        if name in seen:
            raise InvalidInput(f"Feature name {name!r} appears twice.")
        seen.add(name)


def header_safe(name: str) -> bool:
    """Whether a name survives the comma-separated ASCII ``X-Feature-Names`` header."""
    return "," not in name and name == name.strip() and all(" " <= ch <= "~" for ch in name)


@dataclass(frozen=True)
class Chunk:
    start: int
    stop: int


def split_chunk(chunk: Chunk, completed: int) -> list[Chunk]:
    """A range the server found over its time budget, cut into smaller consecutive ranges.

    Each piece holds ``completed`` items (what the server got through within the
    budget), at most half the range and at least one; a single item cannot be cut.

    >>> [(c.start, c.stop) for c in split_chunk(Chunk(0, 10), 3)]
    [(0, 3), (3, 6), (6, 9), (9, 10)]
    >>> split_chunk(Chunk(4, 7), 0)
    [Chunk(start=4, stop=5), Chunk(start=5, stop=6), Chunk(start=6, stop=7)]
    >>> split_chunk(Chunk(4, 5), 0)
    []
    """
    size = chunk.stop - chunk.start
    if size <= 1:
        return []
    piece = max(1, min(completed, (size + 1) // 2))
    return [Chunk(lo, min(chunk.stop, lo + piece)) for lo in range(chunk.start, chunk.stop, piece)]


def plan_chunks(
    cols: Columns, max_columns: int, max_bytes: int, max_header_bytes: int
) -> list[Chunk]:
    """Consecutive column ranges, each within the column, body and header budgets.

    Greedy, in order: a range takes columns while the next one still fits every
    budget, and always holds at least one. Computed on running sums (one search
    per range), not column by column: a matrix of a million columns is planned
    in milliseconds.

    >>> cols = Columns(3, ["a", "bb", "c"], np.zeros((3, 3)))
    >>> [(c.start, c.stop) for c in plan_chunks(cols, 2, 10**6, 10**6)]
    [(0, 2), (2, 3)]
    >>> [(c.start, c.stop) for c in plan_chunks(cols, 10, 48, 10**6)]  # 24 bytes a column
    [(0, 2), (2, 3)]
    >>> [(c.start, c.stop) for c in plan_chunks(cols, 10, 10**6, 4)]  # "a," then "bb,"...
    [(0, 1), (1, 2), (2, 3)]
    """
    b = cols.n_cols
    in_header = cols.names is not None and cols.names_in_header
    body = np.zeros(b + 1, dtype=np.int64)
    np.cumsum(cols.all_column_bytes(), out=body[1:])
    head = np.zeros(b + 1, dtype=np.int64)
    if in_header and cols.names is not None:
        np.cumsum(np.fromiter((len(n) + 1 for n in cols.names), np.int64, b), out=head[1:])
    out: list[Chunk] = []
    start = 0
    while start < b:
        # The first column that would not fit: body[j + 1] - body[start] > max_bytes.
        # Targets in Python ints, capped at the totals: a budget of sys.maxsize means none.
        reach = min(int(body[start]) + max_bytes, int(body[-1]))
        by_bytes = int(np.searchsorted(body, reach, side="right")) - 1
        reach = min(int(head[start]) + max_header_bytes, int(head[-1]))
        by_header = int(np.searchsorted(head, reach, side="right")) - 1
        stop = min(max(start + 1, min(by_bytes, by_header)), start + max(1, max_columns), b)
        out.append(Chunk(start, stop))
        start = stop
    return out


def feature_json(cols: Columns, j: int, name: str, group: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"name": name}
    if cols.dense is not None:
        item["values"] = cols.dense[:, j].tolist()
    else:
        lo, hi = int(cols.csc.indptr[j]), int(cols.csc.indptr[j + 1])
        item["indices"] = cols.csc.indices[lo:hi].tolist()
        item["data"] = cols.csc.data[lo:hi].tolist()
    if group is not None:
        item["group"] = group
    return item


@dataclass(frozen=True)
class Body:
    """A request body: raw bytes with a content type and extra headers."""

    content: bytes
    headers: dict[str, str]


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()


def features_body(cols: Columns, chunk: Chunk, producer: str, seq: int) -> Body:
    """One binary request of columns ``chunk``: .npy named in the header, else .npz."""
    names = None if cols.names is None else cols.names[chunk.start : chunk.stop]
    headers = {"X-Seq": str(seq), "X-Producer": producer}
    if cols.names_in_header:
        assert cols.dense is not None
        if names is not None:
            headers["X-Feature-Names"] = ",".join(names)
        return Body(
            npy_bytes(cols.dense[:, chunk.start : chunk.stop]), {"Content-Type": NPY, **headers}
        )
    import scipy.sparse

    if cols.dense is not None:
        part = scipy.sparse.csc_matrix(cols.dense[:, chunk.start : chunk.stop])
    else:
        part = cols.csc[:, chunk.start : chunk.stop]
    return Body(npz_bytes(part, names), {"Content-Type": NPZ, **headers})


def features_json_body(cols: Columns, chunk: Chunk, producer: str, seq: int) -> Body:
    """One request of columns ``chunk`` as JSON columns (``values``, or ``indices``/``data``)."""
    names = None if cols.names is None else cols.names[chunk.start : chunk.stop]
    # The server names unnamed binary columns "<producer>:<seq>:<i>"; JSON columns get the
    # same names.
    chosen = names or [f"{producer}:{seq}:{i}" for i in range(chunk.stop - chunk.start)]
    features = [
        feature_json(cols, j, name)
        for j, name in zip(range(chunk.start, chunk.stop), chosen, strict=True)
    ]
    body = {"producer": producer, "seq": seq, "features": features}
    return Body(dumps(body), {"Content-Type": "application/json"})


__all__ = [
    "JSON_NUMBER_BYTES",
    "Body",
    "Chunk",
    "Columns",
    "as_columns",
    "check_names",
    "dumps",
    "feature_json",
    "features_body",
    "features_json_body",
    "header_safe",
    "plan_chunks",
    "split_chunk",
]
