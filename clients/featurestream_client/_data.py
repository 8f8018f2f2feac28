"""Turning arrays, DataFrames and sparse matrices into request bodies.

Everything is checked here before the first request is sent (numeric, finite,
consistent lengths, unique names), so bad input fails on the client and
changes nothing on the server. Feature columns travel binary: dense ones as
``application/x-npy`` (float64, names in ``X-Feature-Names``) when every name
can sit in that comma-separated ASCII header; sparse ones, and dense ones
with other names, as ``application/x-npz`` (``scipy.sparse.save_npz`` of the
``(n, b)`` CSC chunk, the names inside the archive as ``names.npy``, so any
Unicode survives). Whole groups travel as JSON (see ``_groups``).
"""

from __future__ import annotations

import functools
import io
import json
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream_client.errors import InvalidInput

NPY = "application/x-npy"
NPZ = "application/x-npz"
Matrix = npt.NDArray[np.float64]

# Rough JSON sizes, used only to keep requests under the byte budget.
JSON_NUMBER_BYTES = 24
_JSON_SPARSE_ENTRY_BYTES = 34


def _is_pandas(obj: Any) -> bool:
    return type(obj).__module__.split(".", 1)[0] == "pandas"


def _is_sparse(obj: Any) -> bool:
    return (
        type(obj).__module__.split(".", 1)[0] == "scipy"
        and hasattr(obj, "tocsc")
        and hasattr(obj, "nnz")
    )


# Below this many values the plain check is as fast as any.
_SMALL = 4096


def _all_finite(values: Matrix) -> bool:
    """Whether every value is finite, for a large float64 array in one pass.

    A NaN or an infinity makes every sum it enters NaN or infinite, so finite
    row sums (one BLAS pass) prove the whole array finite without the mask as
    large as the array that ``np.isfinite`` writes; only when a sum overflows
    (finite values near the float64 limit) is every value checked. The server
    checks what it receives the same way; the SDK keeps its own copy because
    it installs without the server.

    >>> _all_finite(np.full((100, 100), 1e308)), _all_finite(np.array([1.0, np.nan] * 4096))
    (True, False)
    """
    a = np.asarray(values)
    if a.dtype != np.float64 or a.size < _SMALL or a.ndim not in (1, 2):
        return bool(np.isfinite(a).all())
    with np.errstate(over="ignore", invalid="ignore"):
        sums = a @ np.ones(a.shape[1]) if a.ndim == 2 else np.add.reduce(a)
    return bool(np.isfinite(sums).all()) or bool(np.isfinite(a).all())


def _finite_or_raise(values: Matrix, names: Sequence[str] | None, what: str) -> None:
    if values.size and not _all_finite(values):
        axis_bad = ~np.isfinite(values)
        if values.ndim == 2:
            col = int(np.argmax(axis_bad.any(axis=0)))
            label = names[col] if names is not None and col < len(names) else f"#{col}"
            raise InvalidInput(f"{what} {label!r} contains NaN or infinite values.")
        raise InvalidInput(f"{what} contains NaN or infinite values.")


def _float_matrix(obj: Any, what: str) -> Matrix:
    try:
        arr = np.asarray(obj)
    except Exception as exc:  # ragged nested lists and the like
        raise InvalidInput(f"{what} is not a rectangular array of numbers: {exc}") from None
    if arr.dtype.kind == "b":
        arr = arr.astype(np.float64)
    if arr.dtype.kind not in "fiu":
        raise InvalidInput(f"{what} must hold numbers; got dtype {arr.dtype}.")
    return np.asarray(arr, dtype=np.float64)


def _is_frame(obj: Any) -> bool:
    return _is_pandas(obj) and hasattr(obj, "columns")


def align_frame(frame: Any, expected: Sequence[str], stream_id: str) -> Any:
    """The columns of DataFrame ``frame`` in the order of ``expected`` (a stream's names).

    Columns are matched by name, never by position. Unknown or missing names
    are refused with the list of each, the way scikit-learn refuses them.
    """
    have = [str(c) for c in frame.columns]
    if have == list(expected):
        return frame
    known = set(expected)
    given = set(have)
    unseen = [c for c in have if c not in known]
    missing = [c for c in expected if c not in given]
    if len(given) != len(have):
        twice = sorted({c for c in have if have.count(c) > 1})
        raise InvalidInput(f"The DataFrame's columns {twice} appear more than once.")
    if unseen or missing:
        lines = [f"The DataFrame's column names do not match the features of stream {stream_id!r}."]
        if unseen:
            lines.append(f"Feature names unseen at creation: {_listing(unseen)}")
        if missing:
            lines.append(f"Feature names seen at creation, yet now missing: {_listing(missing)}")
        lines.append(
            "Rename or select the columns (df[names]); an array (df.to_numpy()) is matched "
            "by position instead."
        )
        raise InvalidInput("\n".join(lines))
    by_name = dict(zip(have, frame.columns, strict=True))
    return frame[[by_name[name] for name in expected]]


def _listing(names: Sequence[str], most: int = 20) -> str:
    shown = ", ".join(repr(n) for n in names[:most])
    return shown + (f", ... ({len(names) - most} more)" if len(names) > most else "")


def refuse_row_shapes(X: Any) -> None:
    """Refuse, with what to send instead, the rows people often pass by habit."""
    if isinstance(X, Mapping):
        raise InvalidInput(
            "X is a dict (one row as {name: value}, River-style). Send rows as a pandas "
            "DataFrame (pd.DataFrame([row]); its columns are matched to the stream's "
            "features by name) or as a list of rows in the stream's feature order "
            "([[row[name] for name in names]])."
        )
    if _is_pandas(X) and not hasattr(X, "columns") and hasattr(X, "index"):
        raise InvalidInput(
            "X is a pandas Series. If it is one row (e.g. df.iloc[i]), send "
            "series.to_frame().T (a one-row DataFrame, matched by name) or df.iloc[[i]]; "
            "a Series is never read as a row, nor as a column of instances."
        )
    if isinstance(X, list | tuple) and X and isinstance(X[0], Mapping):
        raise InvalidInput(
            "X is a list of dicts (rows as {name: value}). Send pd.DataFrame(rows): its "
            "columns are matched to the stream's features by name."
        )


def _frame_matrix(frame: Any, what: str) -> tuple[Matrix, list[str]]:
    """A pandas DataFrame (or Series) as a float64 matrix and its column names."""
    if not hasattr(frame, "columns"):  # a Series: one column
        frame = frame.to_frame()
    names = [str(c) for c in frame.columns]
    for col, dtype in zip(names, frame.dtypes, strict=True):
        kind = getattr(dtype, "kind", "O")
        if kind not in "fiub":
            raise InvalidInput(f"{what} column {col!r} is not numeric (dtype {dtype}).")
    try:
        values = frame.to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{what} cannot be read as numbers: {exc}") from None
    return np.asarray(values, dtype=np.float64), names


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
    if _is_sparse(data):
        csc = data.tocsc(copy=True).astype(np.float64)
        csc.sum_duplicates()  # canonical: sorted, unique row indices per column
        csc.sort_indices()
        if csc.ndim != 2:
            raise InvalidInput(f"{what} must be 2-D (n rows x b columns).")
        if csc.data.size and not np.isfinite(csc.data).all():
            raise InvalidInput(f"{what} contains NaN or infinite values.")
        cols = Columns(int(csc.shape[0]), given, csc=csc)
    elif _is_pandas(data):
        dense, frame_names = _frame_matrix(data, what)
        cols = Columns(int(dense.shape[0]), given if given is not None else frame_names, dense)
    else:
        dense = _float_matrix(data, what)
        if dense.ndim == 1:
            dense = dense[:, None]
        if dense.ndim != 2:
            raise InvalidInput(f"{what} must be 2-D (n rows x b columns); got {dense.shape}.")
        cols = Columns(int(dense.shape[0]), given, dense)
    if cols.dense is not None:
        _finite_or_raise(cols.dense, cols.names, "Column")
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


def npy_frame(X: npt.NDArray[Any], labels: npt.NDArray[Any] | None = None) -> bytearray:
    """The ``.npy`` of the float64 rows of X, with ``labels`` as a last column if given.

    The values are written once, straight into the bytes that are sent (a
    WebSocket frame takes them as they are), instead of being stacked, made
    contiguous and serialised, a copy each. The bytes are those ``np.save``
    writes for the stacked array:

    >>> X, y = np.arange(6.0).reshape(3, 2), np.array([1.0, 0.0, 1.0])
    >>> buf = io.BytesIO(); np.save(buf, np.column_stack([X, y]))
    >>> bytes(npy_frame(X, y)) == buf.getvalue()
    True
    """
    m, d = X.shape
    cols = d if labels is None else d + 1
    header = _npy_header(m, cols)
    out = bytearray(len(header) + 8 * m * cols)
    out[: len(header)] = header
    values = np.frombuffer(out, dtype="<f8", offset=len(header)).reshape(m, cols)
    values[:, :d] = X
    if labels is not None:
        values[:, d] = labels
    return out


@functools.lru_cache(maxsize=64)
def _npy_header(m: int, cols: int) -> bytes:
    """The version 1.0 ``.npy`` header of a C-order (m, cols) float64 array."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f8", "fortran_order": False, "shape": (m, cols)}
    )
    return buf.getvalue()


def npy_bytes(arr: npt.NDArray[Any]) -> bytes:
    """The ``.npy`` of a 2-D array as float64, for a request body (httpx wants bytes)."""
    return bytes(npy_frame(arr))


def npz_bytes(csc: Any, names: Sequence[str] | None = None) -> bytes:
    """``scipy.sparse.save_npz`` of ``csc`` (uncompressed), with ``names.npy`` when named."""
    import scipy.sparse

    buf = io.BytesIO()
    # Uncompressed: zlib costs more time than the bytes it saves are worth.
    scipy.sparse.save_npz(buf, csc, compressed=False)
    if names is not None:
        member = io.BytesIO()
        np.lib.format.write_array(member, np.array(names, dtype=str), allow_pickle=False)
        with zipfile.ZipFile(buf, "a") as zf:
            zf.writestr(NAMES_MEMBER, member.getvalue())
    return buf.getvalue()


#: The member of an .npz body of feature columns that holds their names.
NAMES_MEMBER = "names.npy"


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


# ---------------------------------------------------------------- instances


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
    if _is_sparse(X) and keep_sparse:
        mat: Any = X.tocsr().astype(np.float64)
        if mat.shape[0] == 0:
            raise InvalidInput(
                f"X must be a non-empty 2-D array (m rows x d features); got {mat.shape}."
            )
        _finite_or_raise(mat.data, None, "X")
        return Instances(mat, _labels(y, mat.shape[0]))
    if _is_sparse(X):
        mat = np.asarray(X.toarray(), dtype=np.float64)
    elif _is_pandas(X):
        mat, _ = _frame_matrix(X, "X")
    else:
        mat = _float_matrix(X, "X")
    if mat.ndim == 1:
        mat = mat[None, :]
    if mat.ndim != 2 or mat.shape[0] == 0:
        raise InvalidInput(
            f"X must be a non-empty 2-D array (m rows x d features); got {mat.shape}."
        )
    _finite_or_raise(mat, None, "X")
    return Instances(mat, _labels(y, mat.shape[0]))


def _labels(y: Any, m: int) -> npt.NDArray[np.float64] | list[str] | None:
    if y is None:
        return None
    raw = np.asarray(y.to_numpy() if _is_pandas(y) else y).reshape(-1)
    if raw.dtype.kind not in "fiub":
        # Class names travel as strings (docs/algorithms.md, "Targets").
        names = [str(v) for v in raw.tolist()]
        if len(names) != m:
            raise InvalidInput(f"y has {len(names)} labels for {m} rows of X.")
        if any(v in ("nan", "None", "") for v in names):
            raise InvalidInput("y contains missing labels (NaN, None or empty).")
        return names
    labels = _float_matrix(y.to_numpy() if _is_pandas(y) else y, "y").reshape(-1)
    if labels.shape[0] != m:
        raise InvalidInput(f"y has {labels.shape[0]} labels for {m} rows of X.")
    _finite_or_raise(labels, None, "y")
    return labels


def instances_bytes(X: Any, y: npt.NDArray[np.float64] | None) -> tuple[bytes, str]:
    """(binary body, media type) of instances: .npz for sparse rows, else .npy; labels last."""
    if not _is_sparse(X):
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
    if _is_sparse(source) or _is_pandas(source) or isinstance(source, np.ndarray):
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
    "JSON_NUMBER_BYTES",
    "NAMES_MEMBER",
    "NPY",
    "NPZ",
    "Body",
    "Chunk",
    "Columns",
    "Instances",
    "align_frame",
    "as_columns",
    "as_instances",
    "features_body",
    "features_json_body",
    "instances_body",
    "instances_bytes",
    "iter_frames",
    "npz_bytes",
    "plan_chunks",
    "plan_rows",
    "refuse_row_shapes",
    "split_chunk",
]
