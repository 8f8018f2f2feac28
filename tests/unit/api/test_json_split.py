"""Large JSON feature bodies are parsed a piece of columns at a time (jsonparse.split_array).

The pieces are the body's own bytes cut at its array's top-level commas: the
rule is that whatever the body, splitting never changes what it parses to,
and a large body reads exactly as the whole-body path reads it.
"""

from __future__ import annotations

import json
from typing import Any
from unittest.mock import patch

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from featurestream.api import jsonbodies, jsonparse
from featurestream.api.jsonparse import split_array

from .test_jsonbodies import new_features, outcome

# Strings full of the characters a scanner could trip on.
tricky = st.text(alphabet=st.sampled_from(list('ab"\\[]{},: \n\u00e9\U0001f600')), max_size=12)
scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(-1e6, 1e6) | tricky
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(tricky, inner, max_size=4),
    max_leaves=12,
)


def rejoined(split: tuple[bytes, list[bytes]], key: str) -> Any:
    """The document the pieces stand for."""
    skeleton, pieces = split
    doc = orjson.loads(skeleton)
    assert doc[key] == []
    doc[key] = [item for piece in pieces for item in orjson.loads(piece)]
    return doc


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(values, max_size=30),
    others=st.dictionaries(tricky.filter(lambda k: k != "features"), values, max_size=3),
    per=st.integers(1, 7),
    indent=st.sampled_from([None, 1, "\t"]),
)
def test_pieces_stand_for_the_same_document(
    items: list[Any], others: dict[str, Any], per: int, indent: Any
) -> None:
    doc = {**others, "features": items}
    body = json.dumps(doc, indent=indent, ensure_ascii=False).encode()
    split = split_array(body, "features", per=per)
    if "\\" in json.dumps(others, ensure_ascii=False):
        # The rest of the body needs an escape: another spelling of the key could be
        # hidden in it, so such bodies are parsed whole.
        assert split is None
        return
    assert split is not None  # any other well-formed layout splits
    assert rejoined(split, "features") == orjson.loads(body)
    assert all(len(orjson.loads(p)) <= per for p in split[1])


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=80) | st.text(alphabet='{}[]",:\\ a1"', max_size=60).map(str.encode))
def test_a_split_of_any_bytes_never_parses_to_something_else(body: bytes) -> None:
    wrapped = b'{"features": [' + body + b"]}"
    for text in (body, wrapped):
        try:
            split = split_array(text, "features", per=2)
        except Exception as exc:
            pytest.fail(f"split_array raised {exc!r} on {text!r}")
        if split is None:
            continue
        try:
            parts = rejoined(split, "features")
        except (orjson.JSONDecodeError, AssertionError, TypeError):
            continue  # the caller parses the body whole: its own answer
        assert parts == orjson.loads(text)


@pytest.mark.parametrize(
    "body",
    [
        b'{"features": [1], "features": [2]}',  # the key twice: orjson keeps the last
        b'{"x": {"features": [1]}}',  # not at the top level
        b'{"features": 3}',
        b'[{"features": [1]}]',
        b'{"features": [1, 2]',  # unclosed
        b'{"a": "\\"", "features": [1, 2]} trailing',
    ],
)
def test_bodies_not_laid_out_as_one_array_are_left_whole(body: bytes) -> None:
    split = split_array(body, "features")
    if split is not None:
        with pytest.raises(orjson.JSONDecodeError):
            rejoined(split, "features")


def _sparse_body(b: int, extra: dict[str, Any] | None = None) -> bytes:
    features = [
        {"name": f'c"{j}\\', "indices": [j % 2, 2 + j % 2], "data": [1.0, -0.5 * j]}
        if j % 3
        else {"name": f"d{j}", "values": [0.25 * j, 0, 1, 2]}
        for j in range(b)
    ]
    return json.dumps({"seq": 7, "producer": "p", **(extra or {}), "features": features}).encode()


def test_a_large_body_reads_as_the_whole_body_path_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = _sparse_body(6000)
    assert len(body) >= jsonparse.SPLIT_BYTES
    assert split_array(body, "features") is not None
    split = outcome(lambda: new_features(body))
    assert split[0] not in ("validation", "invalid")
    monkeypatch.setattr(jsonbodies, "SPLIT_BYTES", len(body) + 1)
    assert outcome(lambda: new_features(body)) == split


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "x", "indices": [1], "data": [1.0, 2.0]},  # lengths differ
        {"name": "x", "values": [1, "2", 3, 4]},  # a string among numbers
        {"name": "", "values": [1, 2, 3, 4]},  # an empty name
    ],
)
def test_a_bad_column_deep_in_a_large_body_is_refused_as_before(
    monkeypatch: pytest.MonkeyPatch, bad: dict[str, Any]
) -> None:
    features = json.loads(_sparse_body(6000))["features"]
    features.insert(4321, bad)
    body = json.dumps({"features": features}).encode()
    split = outcome(lambda: new_features(body))
    assert split[0] in ("validation", "invalid")
    monkeypatch.setattr(jsonbodies, "SPLIT_BYTES", len(body) + 1)
    assert outcome(lambda: new_features(body)) == split


def test_a_key_spelled_twice_reads_as_the_whole_body_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The split finds the plain spelling; the escaped one comes later and wins.
    features = json.loads(_sparse_body(6000))["features"]
    head = json.dumps({"features": features[:3000]})[:-1]
    body = (head + ', "\\u0066eatures": ' + json.dumps(features[3000:]) + "}").encode()
    assert len(body) >= jsonparse.SPLIT_BYTES
    assert len(orjson.loads(body)["features"]) == 3000
    split = outcome(lambda: new_features(body))
    assert split[2][0] == features[3000]["name"]
    monkeypatch.setattr(jsonbodies, "SPLIT_BYTES", len(body) + 1)
    assert outcome(lambda: new_features(body)) == split


@pytest.mark.parametrize(
    "body",
    [
        # A trailing comma after a whole number of pieces left an empty last piece.
        b'{"features": [1, 1,]}',
        b'{"features": [1, 1, 1, 1,]}',
        b'{"features": [1,, 1]}',
        b'{"features": [,]}',
        # A key after the last bracket (an IndexError, a 500, before).
        b'{"features": [1, 2]} "features"',
        b'{"producer":"p","seq":1,"features":[]"features"',
        # A later spelling of the key wins, with an escape or far from its colon.
        b'{"features": [1, 2], "\\u0066eatures": []}',
        b'{"features": [1, 2], "features"' + b" " * 300 + b":[]}",
        b'{"features": [1, 2], "features": []}',
    ],
)
def test_a_body_the_pieces_would_misread_is_not_split(body: bytes) -> None:
    for per in (1, 2, 3):
        split = split_array(body, "features", per=per)
        if split is not None:  # then a piece does not parse: the body is parsed whole
            with pytest.raises((orjson.JSONDecodeError, AssertionError)):
                rejoined(split, "features")


def test_a_body_of_many_top_level_members_is_not_searched_member_by_member() -> None:
    body = b"{" + b", ".join(b'"k%d": 1' % i for i in range(17)) + b', "features": [1]}'
    assert split_array(body, "features") is None
    body = b"{" + b", ".join(b'"k%d": 1' % i for i in range(10)) + b', "features": [1]}'
    assert split_array(body, "features") is not None


def test_a_trailing_comma_in_a_large_body_is_refused_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Regression: 1,000 columns and a trailing comma were accepted and committed.
    features = json.loads(_sparse_body(6000))["features"]
    body = json.dumps({"features": features}).encode()[:-2] + b",]}"
    split = outcome(lambda: new_features(body))
    assert split[0] == "validation"
    monkeypatch.setattr(jsonbodies, "SPLIT_BYTES", len(body) + 1)
    assert outcome(lambda: new_features(body)) == split


# ----------------------------------------------------------------- instance rows

numbers = st.floats(-1e6, 1e6) | st.integers(-(10**6), 10**6)
# Cells a row may hold: numbers mostly, now and then what the whole-body path refuses.
cells = numbers | st.sampled_from([True, None, "1", 10**400, [1.0], 1e308])
row_lists = st.lists(st.lists(cells, min_size=1, max_size=4), max_size=12)


def _instances(parse: Any, body: bytes | str) -> Any:
    """What the engine gets of a body: its rows (or their refusal), labels, seq."""

    def run() -> Any:
        got = parse(body)
        return (got.producer, got.seq, got.rows(), got.y)

    return outcome(run)


@settings(max_examples=400, deadline=None)
@given(
    X=row_lists,
    y=st.none() | st.lists(numbers, max_size=12),
    frame=st.booleans(),
    piece=st.integers(1, 64),
)
def test_rows_in_pieces_read_as_the_whole_rows_read(
    X: list[Any], y: Any, frame: bool, piece: int
) -> None:
    """Any X (rows of other lengths, non-numbers, overflowing integers among them) and
    any piece size: the body reads the same, or is refused the same, as when whole."""
    doc: dict[str, Any] = {"X": X, "seq": 3}
    if y is not None:
        doc["y"] = y
    if not frame:
        doc["producer"] = "p"
    parse = jsonbodies.instance_frame if frame else jsonbodies.instance_batch
    body: bytes | str = json.dumps(doc)
    if not frame:
        body = body.encode()
    with (
        patch.object(jsonbodies, "SPLIT_BYTES", 0),
        patch.object(jsonbodies, "ROW_PIECE_BYTES", piece),
    ):
        split = _instances(parse, body)
    with patch.object(jsonbodies, "SPLIT_BYTES", len(body) + 1):
        whole = _instances(parse, body)
    assert split == whole


def _instance_body(m: int, d: int, seed: int = 0) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return {
        "producer": "p",
        "seq": 1,
        "X": rng.normal(size=(m, d)).round(12).tolist(),
        "y": rng.integers(0, 2, m).astype(float).tolist(),
    }


def test_a_large_instance_body_is_parsed_a_piece_of_rows_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import numpy as np

    doc = _instance_body(100, 1000)
    body = json.dumps(doc).encode()
    assert len(body) >= jsonparse.SPLIT_BYTES
    split = split_array(body, "X", max_bytes=jsonbodies.ROW_PIECE_BYTES)
    assert split is not None
    assert 5 <= len(split[1]) <= 15  # rows of ~20 KB, pieces of at most 256 KiB
    assert all(len(p) <= jsonbodies.ROW_PIECE_BYTES + 2 for p in split[1])
    loads: list[int] = []
    real = orjson.loads

    def counting(data: Any) -> Any:
        loads.append(len(data))
        return real(data)

    monkeypatch.setattr(jsonbodies.orjson, "loads", counting)
    got = jsonbodies.instance_batch(body)
    assert max(loads) <= jsonbodies.ROW_PIECE_BYTES + 2  # never the whole body at once
    np.testing.assert_array_equal(got.X, np.array(doc["X"]))
    np.testing.assert_array_equal(got.y, np.array(doc["y"]))
    text = json.dumps({k: v for k, v in doc.items() if k != "producer"})
    loads.clear()
    frame = jsonbodies.instance_frame(text)
    assert max(loads) <= jsonbodies.ROW_PIECE_BYTES + 2
    np.testing.assert_array_equal(frame.X, got.X)


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
def test_a_bad_row_deep_in_a_large_body_is_refused_as_before(
    monkeypatch: pytest.MonkeyPatch, at: int, row: list[Any], kind: str
) -> None:
    doc = _instance_body(100, 1000)
    doc["X"][at] = row
    body = json.dumps(doc).encode()

    def parsed() -> Any:
        return _instances(jsonbodies.instance_batch, body)

    split = parsed()
    if kind == "inf":
        assert split[2][3][50][-1] == float("inf")  # the engine refuses non-finite data
    else:
        assert split[0] == kind
    monkeypatch.setattr(jsonbodies, "SPLIT_BYTES", len(body) + 1)
    assert parsed() == split


def test_max_bytes_bounds_the_pieces_by_the_items_average_size() -> None:
    body = b'{"X": [' + b", ".join(b"[%d, 2, 3]" % i for i in range(40)) + b"]}"
    split = split_array(body, "X", max_bytes=40)
    assert split is not None
    assert [len(orjson.loads(p)) for p in split[1]] == [3] * 13 + [1]
    assert split_array(body, "X", per=2, max_bytes=10**6)[1][0] == b"[[0, 2, 3], [1, 2, 3]]"
    # An item longer than max_bytes still makes a piece of its own.
    assert len(split_array(body, "X", max_bytes=1)[1]) == 40
