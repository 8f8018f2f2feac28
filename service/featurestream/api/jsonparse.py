"""The parsing half of the JSON readers (``jsonbodies``): orjson, bulk type checks.

``_Unsure`` marks input the bulk checks do not vouch for (the caller hands it
to the pydantic model instead); the helpers read the common fields (names,
producer, seq, lists of numbers) of a parsed document.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

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
