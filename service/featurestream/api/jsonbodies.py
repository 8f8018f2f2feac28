"""JSON bodies and frames read in one pass into arrays.

The models of ``schemas.py`` define the JSON formats (and document them in the
OpenAPI schema). A body is read here with orjson and checked with a few bulk
checks (the types of all numbers at once, the keys and names of each column)
that accept only what the model accepts too, and build the arrays directly:
no model object per column or per row. Whatever the bulk checks do not vouch
for (a wrong type, a missing key, a NaN literal, a number too large...) is
handed to the model, which accepts it after all or refuses it with its usual
errors: the errors, their fields and their problem types stay the model's.

The checks against the stream (lengths, row indices, finite values) follow,
vectorised, with the messages of each column as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream.api.jsonparse import (
    _DICT,
    _FEATURE_BATCH_KEYS,
    _FEATURE_KEYS,
    _FRAME_KEYS,
    _GROUP_BATCH_KEYS,
    _GROUP_KEYS,
    _INSTANCE_BATCH_KEYS,
    _LIST_OR_NONE,
    _NUMBERS,
    _STR,
    _STR_OR_NONE,
    FloatArray,
    IntArray,
    _all_of,
    _floats,
    _ints,
    _keys,
    _list,
    _load,
    _name,
    _producer,
    _row_indices,
    _same_length,
    _seq,
    _Unsure,
)
from featurestream.api.schemas import (
    NAME_MAX_LENGTH,
    FeatureBatch,
    FeatureIn,
    GroupBatch,
    InstanceBatch,
    InstanceFrame,
)
from featurestream.errors import InvalidInput

# --------------------------------------------------------------------------- columns


@dataclass
class Columns:
    """Feature columns of a body, in order: valid JSON, not yet checked against the stream.

    Dense columns' values and sparse columns' row indices and data are each
    stored one column after the other.
    """

    names: list[str]
    groups: list[str | None]
    dense: npt.NDArray[np.bool_]  # per column: given by values (else by indices and data)
    lengths: IntArray  # per column: its values, or its non-zeros
    values: FloatArray
    indices: IntArray
    data: FloatArray

    def __len__(self) -> int:
        return len(self.names)

    @classmethod
    def of_json(cls, features: Any) -> Columns:
        """The columns of a body's ``features`` list, or _Unsure.

        Column by column in bulk (a few passes of comprehensions over all the
        columns), not one Python statement per key of each column.
        """
        feats = _list(features)
        _all_of(_DICT, feats)
        if not all(f.keys() <= _FEATURE_KEYS for f in feats):
            raise _Unsure
        names = [f.get("name") for f in feats]
        _all_of(_STR, names)
        if names and not 1 <= min(map(len, names)) <= max(map(len, names)) <= NAME_MAX_LENGTH:
            raise _Unsure
        groups = [f.get("group") for f in feats]
        _all_of(_STR_OR_NONE, groups)
        named = [len(g) for g in groups if g is not None]
        if named and not 1 <= min(named) <= max(named) <= NAME_MAX_LENGTH:
            raise _Unsure
        values = [f.get("values") for f in feats]
        indices = [f.get("indices") for f in feats]
        data = [f.get("data") for f in feats]
        for column in (values, indices, data):
            _all_of(_LIST_OR_NONE, column)
        dense_list = [v is not None for v in values]
        dense_values = [v for v in values if v is not None]
        sparse_indices = [i for i in indices if i is not None]
        sparse_data = [d for d in data if d is not None]
        # Dense columns have values only; sparse ones indices and data of one length.
        n_sparse = len(feats) - len(dense_values)
        if len(sparse_indices) != n_sparse or len(sparse_data) != n_sparse:
            raise _Unsure
        if any(
            i is not None or d is not None
            for i, d, is_dense in zip(indices, data, dense_list, strict=True)
            if is_dense
        ):
            raise _Unsure
        if not all(map(_same_length, sparse_indices, sparse_data)):
            raise _Unsure
        return cls._build(names, groups, dense_list, dense_values, sparse_indices, sparse_data)

    @classmethod
    def of_models(cls, features: Sequence[FeatureIn]) -> Columns:
        """The columns of validated models (the path of bodies the bulk checks left out)."""
        values = [f.values for f in features if f.values is not None]
        indices = [f.indices or [] for f in features if f.values is None]
        data = [f.data or [] for f in features if f.values is None]
        dense = np.fromiter((f.values is not None for f in features), bool, len(features))
        lengths = _lengths(dense, values, indices)
        return cls(
            [f.name for f in features],
            [f.group for f in features],
            dense,
            lengths,
            np.fromiter(chain.from_iterable(values), np.float64, int(lengths[dense].sum())),
            _row_indices(features, indices),
            np.fromiter(chain.from_iterable(data), np.float64, int(lengths[~dense].sum())),
        )

    @classmethod
    def _build(
        cls,
        names: list[str],
        groups: list[str | None],
        dense_list: list[bool],
        values: list[list[Any]],
        indices: list[list[Any]],
        data: list[list[Any]],
    ) -> Columns:
        dense = np.array(dense_list, dtype=bool)
        lengths = _lengths(dense, values, indices)
        n_values = int(lengths[dense].sum())
        n_nonzero = int(lengths[~dense].sum())
        return cls(
            names,
            groups,
            dense,
            lengths,
            _floats(values, n_values),
            _ints(indices, n_nonzero),
            _floats(data, n_nonzero),
        )

    def matrix(self, n: int) -> Any:
        """Feature-major ``(b, n)`` columns for a stream of ``n`` instances.

        All dense: a float64 array. Any sparse column: a scipy.sparse CSR
        matrix, so a request of many sparse columns never becomes a dense
        b x n array. The first column that does not fit the stream is refused.
        """
        self._check(n)
        b = len(self.names)
        if self.dense.all():
            return self.values.reshape(b, n)
        import scipy.sparse

        counts = self.lengths.copy()
        indices, data = self.indices, self.data
        if self.dense.any():
            # Dense columns keep their non-zeros, interleaved in column order.
            V = self.values.reshape(-1, n)
            rows, cols = np.nonzero(V)
            dense_at = np.flatnonzero(self.dense)
            counts[dense_at] = np.bincount(rows, minlength=V.shape[0])
            owner = np.concatenate([self._sparse_owner(), dense_at[rows]])
            order = np.argsort(owner, kind="stable")
            indices = np.concatenate([indices, cols.astype(np.int64)])[order]
            data = np.concatenate([data, V[rows, cols]])[order]
        indptr = np.zeros(b + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return scipy.sparse.csr_matrix((data, indices, indptr), shape=(b, n))

    def _sparse_owner(self) -> IntArray:
        """The column of each sparse non-zero."""
        at = np.flatnonzero(~self.dense)
        return np.repeat(at, self.lengths[at])

    def _check(self, n: int) -> None:
        b = len(self.names)
        dense_at = np.flatnonzero(self.dense)
        wrong_length = np.zeros(b, dtype=bool)
        wrong_length[dense_at] = self.lengths[dense_at] != n
        beyond = np.zeros(b, dtype=bool)
        repeats = np.zeros(b, dtype=bool)
        bad_data = np.zeros(b, dtype=bool)
        bad_values = np.zeros(b, dtype=bool)
        if self.indices.size:
            owner = self._sparse_owner()
            inside = self.indices < n
            beyond[owner[~inside]] = True
            key = owner[inside] * max(n, 1) + self.indices[inside]
            if key.size > 1 and not (key[1:] > key[:-1]).all():
                key = np.sort(key)
                repeats[key[1:][key[1:] == key[:-1]] // max(n, 1)] = True
            bad_data[owner[~np.isfinite(self.data)]] = True
        if self.values.size:
            finite = np.isfinite(self.values)
            if not finite.all():
                bad_values[np.repeat(dense_at, self.lengths[dense_at])[~finite]] = True
        bad = wrong_length | beyond | repeats | bad_data | bad_values
        if not bad.any():
            return
        i = int(np.argmax(bad))
        name = self.names[i]
        if wrong_length[i]:
            raise InvalidInput(
                f"Column {name!r} has {self.lengths[i]} values; the stream has {n} instances.",
                field=f"features[{i}].values",
            )
        if beyond[i]:
            raise InvalidInput(
                f"Column {name!r} has a row index >= {n} (the number of instances).",
                field=f"features[{i}].indices",
            )
        if repeats[i]:
            raise InvalidInput(
                f"Column {name!r} repeats a row index.", field=f"features[{i}].indices"
            )
        raise InvalidInput(
            f"Column {name!r} contains NaN or infinite values.",
            field=f"features[{i}].data" if bad_data[i] else f"features[{i}].values",
        )


def _lengths(
    dense: npt.NDArray[np.bool_], values: Sequence[Sequence[Any]], indices: Sequence[Sequence[Any]]
) -> IntArray:
    lengths = np.zeros(dense.size, dtype=np.int64)
    lengths[dense] = np.fromiter(map(len, values), np.int64, len(values))
    lengths[~dense] = np.fromiter(map(len, indices), np.int64, len(indices))
    return lengths


# --------------------------------------------------------------------------- bodies


def _given(batch: FeatureBatch | GroupBatch | InstanceBatch) -> str | None:
    """The producer a validated body names; None when it names none."""
    return batch.producer if "producer" in batch.model_fields_set else None


@dataclass
class ColumnsBody:
    """``POST /features`` or ``/groups``: the columns, their producer and seq (None: not given)."""

    producer: str | None
    seq: int | None
    columns: Columns
    # /groups: the group each column came in (its own "group", if any, must match)
    group_names: list[str] | None = None


def feature_batch(body: bytes) -> ColumnsBody:
    """A ``FeatureBatch`` body; a ValidationError as the model raises it."""
    try:
        doc = _load(body)
        _keys(doc, _FEATURE_BATCH_KEYS)
        if "features" not in doc:
            raise _Unsure
        return ColumnsBody(_producer(doc), _seq(doc), Columns.of_json(doc["features"]))
    except _Unsure:
        pass
    batch = FeatureBatch.model_validate_json(body)
    return ColumnsBody(_given(batch), batch.seq, Columns.of_models(batch.features))


def group_batch(body: bytes) -> ColumnsBody:
    """A ``GroupBatch`` body; its columns in order, with the group each came in."""
    try:
        doc = _load(body)
        _keys(doc, _GROUP_BATCH_KEYS)
        if "groups" not in doc:
            raise _Unsure
        features: list[Any] = []
        group_names: list[str] = []
        for g in _list(doc["groups"]):
            if type(g) is not dict or not g.keys() <= _GROUP_KEYS:
                raise _Unsure
            name = _name(g.get("name"))
            members = _list(g.get("features"))
            if not members:
                raise _Unsure
            features.extend(members)
            group_names.extend([name] * len(members))
        columns = Columns.of_json(features)
        return ColumnsBody(_producer(doc), _seq(doc), columns, group_names)
    except _Unsure:
        pass
    batch = GroupBatch.model_validate_json(body)
    models = [f for g in batch.groups for f in g.features]
    names = [g.name for g in batch.groups for _ in g.features]
    return ColumnsBody(_given(batch), batch.seq, Columns.of_models(models), names)


# --------------------------------------------------------------------------- instances


@dataclass
class Instances:
    """Instances of a body or frame: ``X`` is None when its rows differ in length."""

    producer: str | None
    seq: int | None
    X: FloatArray | None
    y: FloatArray | None

    def rows(self) -> FloatArray:
        """``X``, or the refusal of rows of different lengths."""
        if self.X is None:
            raise InvalidInput("Every row of X must have the same length.", field="X")
        return self.X


def _rows(rows: Any) -> FloatArray | None:
    """X from its rows; None when rows differ in length. Anything but non-empty lists
    of numbers: ``_Unsure`` (the model then says what is wrong)."""
    rows = _list(rows)
    if not rows or not all(type(r) is list for r in rows):
        raise _Unsure
    _all_of(_NUMBERS, chain.from_iterable(rows))
    if len(set(map(len, rows))) != 1:
        return None
    try:
        return np.array(rows, dtype=np.float64)
    except OverflowError:  # not from orjson, which parses no integer that large
        raise _Unsure from None


def _model_rows(X: list[list[float]]) -> FloatArray | None:
    """X of a validated model; None when its rows differ in length."""
    if len(set(map(len, X))) != 1:
        return None
    return np.array(X, dtype=np.float64)


def _vector(y: Any) -> FloatArray:
    items = _list(y)
    return _floats([items], len(items))


def instance_batch(body: bytes) -> Instances:
    """An ``InstanceBatch`` body; a ValidationError as the model raises it."""
    try:
        doc = _load(body)
        _keys(doc, _INSTANCE_BATCH_KEYS)
        if "X" not in doc:
            raise _Unsure
        y = doc.get("y")
        X = _rows(doc["X"])
        return Instances(_producer(doc), _seq(doc), X, None if y is None else _vector(y))
    except _Unsure:
        pass
    batch = InstanceBatch.model_validate_json(body)
    return Instances(
        _given(batch),
        batch.seq,
        _model_rows(batch.X),
        None if batch.y is None else _labels(batch.y),
    )


def _labels(y: list[Any]) -> Any:
    """Labels as the engine takes them: numbers as a float array, class names as a list of
    str (docs/algorithms.md, "Targets"); a mix of both is refused."""
    if all(type(v) is not str for v in y):
        return np.asarray(y, dtype=np.float64)
    if not all(type(v) is str for v in y):
        raise InvalidInput("Labels must be all numbers or all strings, not a mix.", field="y")
    return list(y)


def instance_frame(text: bytes | str) -> Instances:
    """A JSON frame (``InstanceFrame``; its ``producer`` is the connection's)."""
    try:
        doc = _load(text)
        _keys(doc, _FRAME_KEYS)
        kind = doc.get("type")
        if kind is not None and kind != "instances":
            raise _Unsure
        X, x, y = doc.get("X"), doc.get("x"), doc.get("y")
        if (X is None) == (x is None):
            raise _Unsure
        if X is not None:
            if y is not None and type(y) is not list:
                raise _Unsure
            return Instances(None, _seq(doc), _rows(X), None if y is None else _vector(y))
        row = _vector(x)
        if not row.size or (y is not None and type(y) not in _NUMBERS):
            raise _Unsure
        return Instances(None, _seq(doc), row[None, :], None if y is None else _vector([y]))
    except _Unsure:
        pass
    frame = InstanceFrame.model_validate_json(text)
    if frame.X is not None:
        X = _model_rows(frame.X)
        y = None if frame.y is None else _labels(frame.y)
    else:
        X = np.asarray([frame.x], dtype=np.float64)
        y = None if frame.y is None else _labels([frame.y])
    return Instances(None, frame.seq, X, y)


__all__ = [
    "Columns",
    "ColumnsBody",
    "Instances",
    "feature_batch",
    "group_batch",
    "instance_batch",
    "instance_frame",
]
