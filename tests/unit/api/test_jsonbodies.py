"""The fast JSON reader answers exactly as the models and the per-column checks did.

The reference below is the reading of JSON bodies before the fast reader:
the pydantic model, then each column checked and converted in turn. Every
body, valid or not, must give the same arrays or the same error (pydantic's
error list, or the same InvalidInput message and field).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from featurestream.api import jsonbodies
from featurestream.api.schemas import FeatureBatch, FeatureIn, GroupBatch, InstanceBatch
from featurestream.api.schemas import InstanceFrame as FrameModel
from featurestream.errors import InvalidInput

N = 4


def reference_matrix(features: Sequence[FeatureIn], n: int) -> Any:
    """Columns as the route built them from the models, one column at a time."""
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
        (np.concatenate(data), np.concatenate(indices), indptr), shape=(len(features), n)
    )


def labels_as_given(y: Any) -> Any:
    """Labels as the contract reads them: numbers as floats, class names as strings
    (docs/algorithms.md, "Targets"); a mix of both is refused."""
    if all(type(v) is not str for v in y):
        return np.asarray(y, dtype=np.float64)
    if not all(type(v) is str for v in y):
        raise InvalidInput("Labels must be all numbers or all strings, not a mix.", field="y")
    return list(y)


def outcome(fn: Callable[[], Any]) -> Any:
    """What ``fn`` gives: arrays as lists, or the error it raises, comparably."""
    try:
        value = fn()
    except ValidationError as exc:
        return ("validation", [(e["type"], e["loc"], e["msg"]) for e in exc.errors()])
    except InvalidInput as exc:
        return ("invalid", str(exc), exc.field)
    return normal(value)


def normal(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(normal(v) for v in value)
    if scipy.sparse.issparse(value):
        return (
            "csr",
            value.shape,
            value.data.tolist(),
            value.indices.tolist(),
            value.indptr.tolist(),
        )
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tolist())
    return value


def old_features(body: bytes) -> Any:
    batch = FeatureBatch.model_validate_json(body)
    groups = [f.group for f in batch.features]
    X = reference_matrix(batch.features, N)
    return named(batch), batch.seq, [f.name for f in batch.features], groups, X


def named(batch: Any) -> str | None:
    """The producer a body names (None: it names none, and the route decides)."""
    return batch.producer if "producer" in batch.model_fields_set else None


def new_features(body: bytes) -> Any:
    batch = jsonbodies.feature_batch(body)
    X = batch.columns.matrix(N)
    return batch.producer, batch.seq, batch.columns.names, batch.columns.groups, X


def same_features(body: bytes) -> None:
    assert outcome(lambda: new_features(body)) == outcome(lambda: old_features(body))


GOOD = [0.5, 1, -2.0, 3]

FEATURE_CASES: list[Any] = [
    {"features": []},
    {"features": [{"name": "a", "values": GOOD}]},
    {"features": [{"name": "a", "values": GOOD}], "producer": "p", "seq": 3},
    {"features": [{"name": "a", "indices": [3, 0], "data": [1.5, 2]}]},
    {"features": [{"name": "a", "indices": [], "data": []}, {"name": "b", "values": GOOD}]},
    {
        "features": [
            {"name": "d", "values": [0.0, 2.0, 0.0, 1.0], "group": "g"},
            {"name": "s", "indices": [2, 1], "data": [1.0, 0.0]},
            {"name": "e", "values": [0, 0, 0, 0]},
            {"name": "t", "indices": [0], "data": [9]},
        ]
    },
    # refused by the model
    {"features": [{"name": "a"}]},
    {"features": [{"name": "", "values": GOOD}]},
    {"features": [{"name": "x" * 1025, "values": GOOD}]},
    {"features": [{"name": "a", "values": GOOD, "indices": [0], "data": [1]}]},
    {"features": [{"name": "a", "indices": [0]}]},
    {"features": [{"name": "a", "indices": [0, 1], "data": [1]}]},
    {"features": [{"name": "a", "values": [True, 1, 2, 3]}]},
    {"features": [{"name": "a", "values": ["1", 1, 2, 3]}]},
    {"features": [{"name": "a", "values": [None, 1, 2, 3]}]},
    {"features": [{"name": "a", "indices": [1.0], "data": [1]}]},
    {"features": [{"name": "a", "indices": [-1], "data": [1]}]},
    {"features": [{"name": "a", "indices": [True], "data": [1]}]},
    {"features": [{"name": "a", "values": GOOD, "extra": 1}]},
    {"features": [{"name": "a", "values": GOOD, "group": ""}]},
    {"features": [{"name": 1, "values": GOOD}]},
    {"features": [["a"]]},
    {"features": {"name": "a"}},
    {"features": [{"name": "a", "values": GOOD}], "seq": 0},
    {"features": [{"name": "a", "values": GOOD}], "seq": True},
    {"features": [{"name": "a", "values": GOOD}], "seq": 1.0},
    {"features": [{"name": "a", "values": GOOD}], "producer": ""},
    {"features": [{"name": "a", "values": GOOD}], "producer": "a\nb"},
    {"features": [{"name": "a", "values": GOOD}], "producer": "p" * 257},
    {"features": [{"name": "a", "values": GOOD}], "producer": None},
    {"features": [{"name": "a", "values": GOOD}], "other": 1},
    {"producer": "p"},
    [],
    "text",
    # refused by the checks against the stream
    {"features": [{"name": "a", "values": GOOD}, {"name": "b", "values": [1, 2]}]},
    {"features": [{"name": "a", "values": [1, 2, 3, 4, 5]}]},
    {"features": [{"name": "a", "indices": [0, 4], "data": [1, 2]}]},
    {"features": [{"name": "a", "indices": [1, 1], "data": [1, 2]}]},
    {"features": [{"name": "a", "indices": [2, 0, 2], "data": [1, 2, 3]}]},
    {
        "features": [
            {"name": "ok", "indices": [0, 1], "data": [1, 2]},
            {"name": "b", "indices": [9, 9], "data": [1, 2]},
            {"name": "c", "values": [1, 2]},
        ]
    },
    {"features": [{"name": "a", "indices": [0], "data": [1e999]}]},
    {"features": [{"name": "a", "values": [1, 2, 3, -1e999]}]},
    {"features": [{"name": "a", "values": [1, 2, 3, 2**70]}]},
]

RAW_FEATURE_CASES = [
    b"{oops",
    b"",
    b'{"features": [{"name": "a", "values": [NaN, 1, 2, 3]}]}',
    b'{"features": [{"name": "a", "indices": [0], "data": [Infinity]}]}',
    b'{"features": [{"name": "a", "indices": [99999999999999999999999], "data": [1]}]}',
    b'{"features": [{"name": "a", "name": "b", "values": [1, 2, 3, 4]}]}',
    b'{"features": [{"name": "\\ud800", "values": [1, 2, 3, 4]}]}',
    b'{"features": [{"name": "\xff", "values": [1, 2, 3, 4]}]}',
]


@pytest.mark.parametrize("doc", FEATURE_CASES, ids=range(len(FEATURE_CASES)))
def test_feature_bodies_read_as_the_model_and_the_column_checks_did(doc: Any) -> None:
    same_features(json.dumps(doc).encode())


@pytest.mark.parametrize("body", RAW_FEATURE_CASES, ids=range(len(RAW_FEATURE_CASES)))
def test_raw_feature_bodies_read_as_the_model_did(body: bytes) -> None:
    try:
        same_features(body)
    except OverflowError:
        # An index beyond int64 was an internal error before (a 500); now it is
        # refused like any index beyond the stream's rows, naming its column.
        with pytest.raises(InvalidInput) as err:
            new_features(body)
        assert err.value.field is not None and err.value.field.endswith("].indices")


_numbers = st.one_of(
    st.integers(-3, 5),
    st.floats(allow_nan=False, allow_infinity=True, width=64),
    st.sampled_from([True, "1", None]),
)
_column = st.fixed_dictionaries(
    {"name": st.text(min_size=0, max_size=3)},
    optional={
        "values": st.lists(_numbers, max_size=6),
        "indices": st.lists(st.one_of(st.integers(-1, 5), st.just(1.0)), max_size=5),
        "data": st.lists(_numbers, max_size=5),
        "group": st.one_of(st.none(), st.text(max_size=2)),
    },
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_column, max_size=5), st.one_of(st.none(), st.integers(-1, 3)))
def test_any_feature_body_reads_as_before(columns: list[dict[str, Any]], seq: int | None) -> None:
    same_features(json.dumps({"features": columns, "seq": seq}).encode())


GROUP_CASES: list[Any] = [
    {"groups": []},
    {"groups": [{"name": "g", "features": [{"name": "a", "values": GOOD}]}]},
    {"groups": [{"name": "g", "features": []}]},
    {"groups": [{"name": "", "features": [{"name": "a", "values": GOOD}]}]},
    {"groups": [{"features": [{"name": "a", "values": GOOD}]}]},
    {
        "producer": "p",
        "groups": [
            {"name": "g", "features": [{"name": "a", "values": GOOD, "group": "h"}]},
            {"name": "h", "features": [{"name": "b", "indices": [0], "data": [1]}]},
        ],
    },
]


@pytest.mark.parametrize("doc", GROUP_CASES, ids=range(len(GROUP_CASES)))
def test_group_bodies_read_as_before(doc: Any) -> None:
    body = json.dumps(doc).encode()

    def old() -> Any:
        batch = GroupBatch.model_validate_json(body)
        features = [f for g in batch.groups for f in g.features]
        names = [g.name for g in batch.groups for _ in g.features]
        return (
            named(batch),
            [f.name for f in features],
            [f.group for f in features],
            names,
            reference_matrix(features, N),
        )

    def new() -> Any:
        batch = jsonbodies.group_batch(body)
        c = batch.columns
        return batch.producer, c.names, c.groups, batch.group_names, c.matrix(N)

    assert outcome(new) == outcome(old)


INSTANCE_CASES: list[Any] = [
    {"X": [[1, 2.5], [3, 4]], "y": [0, 1]},
    {"X": [[1, 2.5], [3, 4]], "y": ["no", "yes"]},
    {"X": [[1, 2.5]], "producer": "p", "seq": 2},
    {"X": [[1, 2.5]], "producer": "default"},
    {"X": [[1, 2.5]], "producer": ""},
    {"X": [[1, 2.5]], "producer": "p\n"},
    {"X": [[1, 2.5]], "producer": "p\x00q"},
    {"X": [[1, 2.5]], "producer": "p\x85"},
    {"X": [[1, 2.5]], "producer": "é" * 256},
    {"X": [[1, 2.5]], "producer": "é" * 257},
    {"X": [[]]},
    {"X": [[1, 2], [3]]},
    {"X": []},
    {"X": [[1, True]]},
    {"X": [[1, "2"]]},
    {"X": [1, 2]},
    {"X": [[1, 2]], "y": [True]},
    {"X": [[1, 2]], "y": 1},
    {"X": [[1, 2]], "z": 1},
    {"y": [1]},
    {"X": [[1, 2**70]]},
]


@pytest.mark.parametrize("doc", INSTANCE_CASES, ids=range(len(INSTANCE_CASES)))
def test_instance_bodies_read_as_before(doc: Any) -> None:
    body = json.dumps(doc).encode()

    def old() -> Any:
        batch = InstanceBatch.model_validate_json(body)
        if len({len(row) for row in batch.X}) != 1:
            raise InvalidInput("Every row of X must have the same length.", field="X")
        y = None if batch.y is None else labels_as_given(batch.y)
        return named(batch), batch.seq, np.asarray(batch.X, dtype=np.float64), y

    def new() -> Any:
        batch = jsonbodies.instance_batch(body)
        return batch.producer, batch.seq, batch.rows(), batch.y

    assert outcome(new) == outcome(old)


FRAME_CASES: list[Any] = [
    {"X": [[1, 2.5], [3, 4]], "y": [0, 1]},
    {"type": "instances", "seq": 4, "X": [[1, 2]]},
    {"x": [1, 2], "y": 1},
    {"x": [1, 2]},
    {"x": [1, 2], "y": [1]},
    {"X": [[1, 2]], "y": 1},
    {"X": [[1, 2]], "x": [1, 2]},
    {},
    {"x": []},
    {"x": [1, True], "y": 1},
    {"x": [1, 2], "y": True},
    {"x": [1, 2], "y": "1"},
    {"X": [[1, 2], [3, 4]], "y": ["cat", "dog"]},
    {"X": [[1, 2], [3, 4]], "y": ["cat", 1]},
    {"type": "other", "x": [1]},
    {"X": [[1, 2], [3]], "y": [1, 1]},
    {"X": [[1, 2]], "seq": 0},
]


@pytest.mark.parametrize("doc", FRAME_CASES, ids=range(len(FRAME_CASES)))
def test_json_frames_read_as_before(doc: Any) -> None:
    text = json.dumps(doc)

    def old() -> Any:
        frame = FrameModel.model_validate_json(text)
        if frame.X is not None:
            if len({len(row) for row in frame.X}) != 1:
                raise InvalidInput("Every row of X must have the same length.", field="X")
            X = np.asarray(frame.X, dtype=np.float64)
            y = None if frame.y is None else labels_as_given(frame.y)
        else:
            X = np.asarray([frame.x], dtype=np.float64)
            y = None if frame.y is None else labels_as_given([frame.y])
        return frame.seq, X, y

    def new() -> Any:
        frame = jsonbodies.instance_frame(text)
        return frame.seq, frame.rows(), frame.y

    assert outcome(new) == outcome(old)


def test_frames_with_nan_literals_still_reach_the_checks_against_the_stream() -> None:
    frame = jsonbodies.instance_frame('{"x": [NaN, 1.0], "y": 1}')
    assert frame.X is not None and np.isnan(frame.X[0, 0])


def test_a_large_sparse_body_builds_one_csr_matrix() -> None:
    rng = np.random.default_rng(0)
    cols = []
    for j in range(2000):
        idx = rng.choice(N, size=int(rng.integers(0, N + 1)), replace=False)
        cols.append(
            {"name": f"f{j}", "indices": idx.tolist(), "data": rng.random(idx.size).tolist()}
        )
    body = json.dumps({"features": cols}).encode()
    assert outcome(lambda: new_features(body)) == outcome(lambda: old_features(body))


def _large_body(b: int, extra: Sequence[dict[str, Any]] = (), at: int = 0) -> bytes:
    """A FeatureBatch of ``b`` columns of N rows, sparse and dense; ``extra`` inserted at ``at``."""
    features: list[dict[str, Any]] = [
        {"name": f'c"{j}\\', "indices": [j % 2, 2 + j % 2], "data": [1.0, -0.5 * j]}
        if j % 3
        else {"name": f"d{j}", "values": [0.25 * j, 0, 1, 2]}
        for j in range(b)
    ]
    features[at:at] = extra
    return json.dumps({"seq": 7, "producer": "p", "features": features}).encode()


def test_a_large_body_reads_as_the_model_reads_it() -> None:
    body = _large_body(6000)
    assert len(body) > 256 * 1024
    assert outcome(lambda: new_features(body))[0] not in ("validation", "invalid")
    same_features(body)


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "x", "indices": [1], "data": [1.0, 2.0]},  # lengths differ
        {"name": "x", "values": [1, "2", 3, 4]},  # a string among numbers
        {"name": "", "values": [1, 2, 3, 4]},  # an empty name
    ],
)
def test_a_bad_column_deep_in_a_large_body_is_refused_as_the_model_refuses_it(
    bad: dict[str, Any],
) -> None:
    body = _large_body(6000, [bad], at=4321)
    assert outcome(lambda: new_features(body))[0] in ("validation", "invalid")
    same_features(body)


def test_a_trailing_comma_in_a_large_body_is_refused() -> None:
    # Regression: 1,000 columns and a trailing comma were accepted and committed.
    body = _large_body(6000)[:-2] + b",]}"
    assert outcome(lambda: new_features(body))[0] == "validation"


@pytest.mark.parametrize(
    ("at", "row", "kind"),
    [
        (77, [1.0] * 999, "invalid"),  # a shorter row, deep in the body
        (77, [1.0] * 998 + ["x", 1.0], "validation"),  # a string
        (3, [1.0] * 999 + [None], "validation"),  # a null
        (99, [True] + [1.0] * 999, "validation"),  # a boolean, in the last row
        (50, [1.0] * 999 + [10**400], "inf"),  # beyond float64: the model reads inf
    ],
)
def test_a_bad_row_deep_in_a_large_body_is_refused(at: int, row: list[Any], kind: str) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 1000)).round(12).tolist()
    X[at] = row
    body = json.dumps({"producer": "p", "seq": 1, "X": X, "y": [0.0] * 100}).encode()

    def parsed() -> Any:
        got = jsonbodies.instance_batch(body)
        return (got.producer, got.seq, got.rows(), got.y)

    got = outcome(parsed)
    if kind == "inf":
        assert got[2][3][50][-1] == float("inf")  # the engine refuses non-finite data
    else:
        assert got[0] == kind


def test_a_row_index_beyond_int64_is_refused_naming_its_column() -> None:
    # Regression: such an index overflowed the conversion to int64 (a 500).
    body = (
        b'{"features": [{"name": "a", "indices": [1], "data": [1.0]},'
        b' {"name": "b", "indices": [99999999999999999999999], "data": [1.0]}]}'
    )
    with pytest.raises(InvalidInput) as err:
        jsonbodies.feature_batch(body)
    assert err.value.field == "features[1].indices"
