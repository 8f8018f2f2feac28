"""The parsing half of the JSON readers (``jsonbodies``): orjson, bulk type checks.

``_Unsure`` marks input the bulk checks do not vouch for (the caller hands it
to the pydantic model instead); the helpers read the common fields (names,
producer, seq, lists of numbers) of a parsed document. Large bodies are read
with cyclic garbage collection paused (``_without_gc``, ``gcpause``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from typing import Any, ParamSpec, TypeVar

import numpy as np
import numpy.typing as npt
import orjson

from featurestream import gcpause
from featurestream.api.producers import is_producer
from featurestream.api.schemas import NAME_MAX_LENGTH, FeatureIn
from featurestream.errors import InvalidInput

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_NUMBERS = frozenset({float, int})  # bool is not one: type(True) is bool
_INTS = frozenset({int})
_DICT = frozenset({dict})
_STR = frozenset({str})
_STR_OR_NONE: frozenset[type] = frozenset({str, type(None)})
_LIST_OR_NONE: frozenset[type] = frozenset({list, type(None)})
_FEATURE_KEYS = frozenset({"name", "values", "indices", "data", "group"})
_FEATURE_BATCH_KEYS = frozenset({"producer", "seq", "features"})
_GROUP_BATCH_KEYS = frozenset({"producer", "seq", "groups"})
_GROUP_KEYS = frozenset({"name", "features"})
_INSTANCE_BATCH_KEYS = frozenset({"producer", "seq", "X", "y"})
_FRAME_KEYS = frozenset({"type", "seq", "X", "x", "y"})


class _Unsure(Exception):
    """The bulk checks do not vouch for this input: the model decides."""


# --------------------------------------------------------------------------- checks

# Smaller bodies are read without pausing collection: it would cost them nothing.
GC_PAUSE_BYTES = 64 * 1024


P = ParamSpec("P")
R = TypeVar("R")


def _without_gc(fn: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(fn)
    def read(*args: P.args, **kwargs: P.kwargs) -> R:
        body = args[0] if args else b""
        if not isinstance(body, bytes | str) or len(body) < GC_PAUSE_BYTES:
            return fn(*args, **kwargs)
        with gcpause.paused():
            return fn(*args, **kwargs)

    return read


# Bodies at least this large have their long array parsed a piece at a time.
SPLIT_BYTES = 256 * 1024
# Items of that array parsed (and converted) at a time.
SPLIT_ITEMS = 1000

# A body with more top-level members than this is parsed whole (a FeatureBatch has 3).
_MAX_MEMBERS = 16
# Whitespace allowed around the key's colon for the array to be found.
_KEY_WINDOW = 256


def split_array(
    body: bytes, key: str, per: int = SPLIT_ITEMS, max_bytes: int | None = None
) -> tuple[bytes, list[bytes]] | None:
    """The body with its top-level ``key`` array emptied, and that array's items as
    JSON arrays of ``per`` items each (fewer, when items of the array's average size
    would make a piece longer than ``max_bytes``); None when the body is not laid
    out so.

    orjson parses a document in one call that holds the interpreter lock
    throughout: 20,000 columns of JSON (2 MB) hold it for 20 ms and more, and
    every read the event loop was about to answer waits. Cut at the array's
    top-level commas (found in bulk: unescaped quotes, then brackets outside
    strings), the array parses a piece at a time, each piece converted and
    freed before the next, so that other threads get the lock in between.

    The pieces and the rest are the body's own bytes, and the caller uses them
    only when the rest parses with ``key`` holding ``[]`` and every piece
    parses as an array of at least one item: then the body parses to the same
    document, with the items in order. A trailing or doubled comma leaves an
    empty piece, which does not count. The rest must hold the key once and no
    backslash, so that no other spelling of the key can follow and win. In
    every other case the caller parses the body whole, and the answer is the
    same as it always was.

    >>> split_array(b'{"seq": 1, "a": [{"x": "],"}, 2, [3, 4]]}', "a", per=2)
    (b'{"seq": 1, "a": []}', [b'[{"x": "],"}, 2]', b'[ [3, 4]]'])
    >>> split_array(b'[1, 2]', "a") is None
    True
    """
    a = np.frombuffer(body, np.uint8)
    quotes = np.flatnonzero(a == 0x22)
    slashes = np.flatnonzero(a == 0x5C)
    if quotes.size and slashes.size:
        # A quote right after a run of an odd number of backslashes is escaped.
        breaks = np.flatnonzero(np.diff(slashes) != 1)
        run_starts = slashes[np.concatenate([[0], breaks + 1])]
        run_ends = slashes[np.concatenate([breaks, [slashes.size - 1]])]
        at = np.minimum(np.searchsorted(run_ends, quotes - 1), run_ends.size - 1)
        escaped = (run_ends[at] == quotes - 1) & ((run_ends[at] - run_starts[at]) % 2 == 0)
        quotes = quotes[~escaped]
    if quotes.size % 2:
        return None
    structural = (a == 0x5B) | (a == 0x5D) | (a == 0x7B) | (a == 0x7D) | (a == 0x2C)
    marks = np.flatnonzero(structural)
    del structural
    if body and len(body) < 2**31:
        marks = marks.astype(np.int32)  # half the memory of int64 positions
    # Outside strings: an even number of quotes comes before.
    marks = marks[np.searchsorted(quotes, marks) % 2 == 0]
    if not marks.size or a[marks[0]] != 0x7B:
        return None
    kinds = a[marks]
    opens = (kinds == 0x5B) | (kinds == 0x7B)
    closes = (kinds == 0x5D) | (kinds == 0x7D)
    depth = np.cumsum(opens.astype(np.int32) - closes, dtype=np.int32)  # after each mark
    inside = depth - opens + closes  # before it
    # The top-level members start after the object's brace and its top-level commas.
    members = np.concatenate([[0], np.flatnonzero((kinds == 0x2C) & (inside == 1))])
    if members.size > _MAX_MEMBERS:
        return None
    name = orjson.dumps(key)
    found = []
    for m in members.tolist():
        start = int(marks[m]) + 1
        window = body[start : start + len(name) + _KEY_WINDOW]
        rest = window.lstrip()
        if not rest.startswith(name):
            continue
        rest = rest[len(name) :].lstrip()
        if rest[:1] != b":":
            continue
        rest = rest[1:].lstrip()
        if rest[:1] != b"[":
            continue
        found.append(start + len(window) - len(rest))
    if len(found) != 1:
        return None
    opened = found[0]
    k = int(np.searchsorted(marks, opened))
    if k >= marks.size or marks[k] != opened or inside[k] != 1:
        return None
    after = np.flatnonzero(depth[k:] == 1)
    if not after.size:
        return None
    end = k + int(after[0])
    if kinds[end] != 0x5D:
        return None
    closed = int(marks[end])
    rest_of_body = body[: opened + 1] + body[closed:]
    if b"\\" in rest_of_body or rest_of_body.count(name) != 1:
        return None
    commas = marks[k + 1 : end][(kinds[k + 1 : end] == 0x2C) & (inside[k + 1 : end] == 2)]
    del marks, kinds, depth, inside
    items = commas.size + 1
    if max_bytes is not None:
        per = max(1, min(per, items * max_bytes // max(1, closed - opened)))
    # Each piece runs from its first item's start to its last item's end (the byte
    # before the next comma, or the closing bracket); only those bounds leave numpy.
    firsts = np.concatenate([[opened + 1], commas[per - 1 :: per] + 1]).tolist()
    lasts = np.concatenate([commas[per - 1 :: per], [closed]]).tolist()
    pieces = []
    for first, last in zip(firsts, lasts, strict=True):
        content = body[first:last]
        if items > 1 and not content.strip():
            return None  # an empty item alone in its piece: a trailing or doubled comma
        pieces.append(b"[" + content + b"]")
    return rest_of_body, pieces


def _load(body: bytes | str) -> dict[str, Any]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise _Unsure from None
    if type(doc) is not dict:
        raise _Unsure
    return doc


def _keys(doc: dict[str, Any], allowed: frozenset[str]) -> None:
    if not doc.keys() <= allowed:
        raise _Unsure


def _name(value: Any) -> str:
    if type(value) is not str or not 1 <= len(value) <= NAME_MAX_LENGTH:
        raise _Unsure
    return value


def _producer(doc: dict[str, Any]) -> str | None:
    """The body's producer; None when it names none."""
    if "producer" not in doc:
        return None
    value = doc["producer"]
    if not is_producer(value):
        raise _Unsure
    return value


def _seq(doc: dict[str, Any]) -> int | None:
    value = doc.get("seq")
    if value is not None and (type(value) is not int or value < 1):
        raise _Unsure
    return value


def _list(value: Any) -> list[Any]:
    if type(value) is not list:
        raise _Unsure
    return value


def _same_length(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b)


def _all_of(kinds: frozenset[type], items: Iterable[Any]) -> None:
    """Every item's exact type is one of ``kinds`` (one pass, in C)."""
    if not set(map(type, items)) <= kinds:
        raise _Unsure


def _floats(lists: Sequence[list[Any]], total: int) -> FloatArray:
    """The numbers of ``lists``, one after the other (their types checked)."""
    _all_of(_NUMBERS, chain.from_iterable(lists))
    try:
        return np.fromiter(chain.from_iterable(lists), np.float64, total)
    except OverflowError:  # an integer beyond float64
        raise _Unsure from None


def _ints(lists: Sequence[list[Any]], total: int) -> IntArray:
    """The non-negative integers of ``lists``, one after the other."""
    _all_of(_INTS, chain.from_iterable(lists))
    try:
        out = np.fromiter(chain.from_iterable(lists), np.int64, total)
    except OverflowError:  # beyond int64: the model path answers as it always has
        raise _Unsure from None
    if out.size and out.min() < 0:
        raise _Unsure
    return out


def _row_indices(features: Sequence[FeatureIn], indices: list[list[int]]) -> IntArray:
    """The sparse columns' row indices, one after the other; 422 beyond int64.

    Such an index is beyond every stream's rows anyway: it is refused as one,
    naming its column, instead of overflowing the conversion.
    """
    try:
        return np.asarray(list(chain.from_iterable(indices)), dtype=np.int64)
    except OverflowError:
        for i, f in enumerate(features):
            big = [v for v in f.indices or [] if not -_INT64_MAX <= v <= _INT64_MAX]
            if f.values is None and big:
                raise InvalidInput(
                    f"Column {f.name!r} has a row index of {len(str(abs(big[0])))} digits, "
                    "beyond any number of instances.",
                    field=f"features[{i}].indices",
                ) from None
        raise


_INT64_MAX = (1 << 63) - 1
