"""Targets: resolving ``target_type`` and coding class labels (docs/algorithms.md, "Targets").

A stream declares ``target_type`` (``auto`` by default). ``auto`` is resolved
once, from the target of a feature stream or the first labelled batch of an
instance stream, the way scikit-learn's ``type_of_target`` does:

* labels that are not numbers -> ``multiclass``;
* numbers that are not all integers -> ``continuous``;
* integers with at most 2 distinct values -> ``binary``, with 3..K_MAX ->
  ``multiclass``, with more -> ``continuous``.

Class labels are kept as given (strings or numbers) in sorted order; the
selectors of feature streams see the classes coded 0..K-1 in that order, so any
two labels of a binary target are 0 and 1 (:func:`binary_codes`). The multi-class rules
(one indicator column per class) apply from K = 3 on: with two classes every
algorithm uses its binary rule, so a two-class target decides the same
whatever its labels are or how it was declared. The labels of an instance
stream's batches are resolved against its target in ``batch_labels.py``.

>>> t = resolve_target(["b", "a", "c", "a"])
>>> t.target_type, t.classes, t.y.tolist(), t.n_classes
('multiclass', ('a', 'b', 'c'), [1.0, 0.0, 2.0, 0.0], 3)
>>> resolve_target([0, 1, 1]).target_type, resolve_target([0.5, 1]).target_type
('binary', 'continuous')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream.errors import InvalidInput

FloatArray = npt.NDArray[np.float64]
Label = str | int | float

TARGET_TYPES = ("auto", "continuous", "binary", "multiclass")
# auto: integer labels with more distinct values than this are a continuous target.
K_MAX = 100
# The most classes a declared multi-class target may have (one indicator column each).
MAX_CLASSES = 1024
# An instance stream whose labels are not resolved yet keeps its declared type; a
# state stored before targets existed has none ("") and keeps its numeric labels.
LEGACY = ""


@dataclass(frozen=True)
class Target:
    """A resolved target.

    ``y`` holds the numbers the selector works on: the values as given for a
    continuous target, the class codes 0..K-1 (sorted label order) otherwise, so a
    binary target is 0 and 1 whatever its two labels are.
    ``n_classes`` is K when the multi-class rules apply (K >= 3), else 0.
    """

    target_type: str
    classes: tuple[Label, ...]
    y: FloatArray
    n_classes: int


def check_target_type(target_type: str, *, field: str = "target_type") -> str:
    if target_type not in TARGET_TYPES:
        raise InvalidInput(
            f"target_type must be one of {', '.join(TARGET_TYPES)}; got {str(target_type)[:40]!r}.",
            field=field,
        )
    return target_type


def plain_label(v: Any) -> Label:
    """A label as JSON shows it: an integral number as an int, a string as it is."""
    if isinstance(v, str):
        return v
    f = float(v)
    if math.isfinite(f) and f == math.floor(f) and abs(f) < 2**53:
        return int(f)
    return f


def plain_labels(values: Sequence[Any] | npt.ArrayLike, field: str) -> tuple[list[Label], bool]:
    """The labels as plain values, and whether they are numbers."""
    items = values.tolist() if isinstance(values, np.ndarray) else list(values)  # type: ignore[arg-type]
    if not items:
        raise InvalidInput("The target must not be empty.", field=field)
    strings = [isinstance(v, str) for v in items]
    if any(strings) and not all(strings):
        bad = strings.index(False) if strings[0] else strings.index(True)
        raise InvalidInput(
            "Labels must be all numbers or all strings, not a mix; "
            f"item {bad} is {str(items[bad])[:40]!r}.",
            field=f"{field}[{bad}]",
        )
    if all(strings):
        return items, False
    for i, v in enumerate(items):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise InvalidInput(
                f"Labels must be numbers or strings; item {i} is {str(v)[:40]!r}.",
                field=f"{field}[{i}]",
            )
        if not math.isfinite(float(v)):
            raise InvalidInput("The target contains NaN or infinite values.", field=field)
    return [plain_label(v) for v in items], True


def _auto(labels: list[Label], numeric: bool, distinct: int) -> str:
    if not numeric:
        return "multiclass"
    if not all(isinstance(v, int) for v in labels):
        return "continuous"
    if distinct <= 2:
        return "binary"
    return "multiclass" if distinct <= K_MAX else "continuous"


def numeric_labels(values: Any) -> FloatArray | None:
    """Labels that are plainly numbers as a float64 vector; None for anything else.

    A 1-D array of integers or floats, or a list of plain ints and floats (not
    bools): the common case, which :func:`resolve_target` and
    :func:`instance_labels_typed` then handle without a Python object per
    label. Anything else (strings, a mix, other types, 2-D arrays, ints too
    large for a float) takes the general path, which also words the errors.
    """
    if isinstance(values, np.ndarray):
        if values.ndim != 1 or values.dtype.kind not in "iuf":
            return None
        return np.asarray(values, dtype=np.float64)
    if isinstance(values, list) and all(type(v) is int or type(v) is float for v in values):
        try:
            return np.array(values, dtype=np.float64).reshape(-1)
        except OverflowError:
            return None
    return None


def plain_classes(distinct: FloatArray) -> list[Label]:
    """Sorted distinct numbers as :func:`plain_label` gives them (``sorted(set(labels))``)."""
    return [plain_label(v) for v in distinct.tolist()]


def _resolve_numeric(a: FloatArray, target_type: str, field: str) -> Target:
    """:func:`resolve_target` for numeric labels, vectorised (the same results and errors)."""
    if a.shape[0] == 0:
        raise InvalidInput("The target must not be empty.", field=field)
    if not np.isfinite(a).all():
        raise InvalidInput("The target contains NaN or infinite values.", field=field)
    distinct = np.unique(a)
    if target_type == "auto":
        # The integers are those plain_label turns into ints.
        integral = bool(np.all((a == np.floor(a)) & (np.abs(a) < 2.0**53)))
        if not integral:
            resolved = "continuous"
        elif distinct.shape[0] <= 2:
            resolved = "binary"
        else:
            resolved = "multiclass" if distinct.shape[0] <= K_MAX else "continuous"
    else:
        resolved = target_type
    # + 0.0: a -0.0 label is the class 0, as plain_label makes it.
    if resolved == "continuous":
        return Target("continuous", (), a + 0.0, 0)
    k = distinct.shape[0]
    if resolved == "binary" and k > 2:
        raise InvalidInput(
            f"A binary target has at most 2 classes; these labels have {k} "
            '(use target_type "multiclass").',
            field=field,
        )
    if k > MAX_CLASSES:
        raise InvalidInput(
            f"A multi-class target has at most {MAX_CLASSES} classes; got {k}.",
            field=field,
        )
    classes = tuple(plain_classes(distinct))
    # Classes are coded by their sorted position, two classes (binary) included.
    y = np.searchsorted(distinct, a).astype(np.float64)
    return Target(resolved, classes, y, k if resolved == "multiclass" and k >= 3 else 0)


def resolve_target(
    values: Sequence[Any] | npt.ArrayLike, target_type: str = "auto", *, field: str = "target"
) -> Target:
    """Resolve ``target_type`` for these labels and code them (docs/algorithms.md, "Targets")."""
    check_target_type(target_type)
    a = numeric_labels(values)
    if a is not None:
        return _resolve_numeric(a, target_type, field)
    labels, numeric = plain_labels(values, field)
    classes = sorted(set(labels))
    resolved = _auto(labels, numeric, len(classes)) if target_type == "auto" else target_type
    if resolved == "continuous":
        if not numeric:
            raise InvalidInput(
                "A continuous target must be numbers; these labels are strings "
                '(use target_type "multiclass" or "binary").',
                field=field,
            )
        return Target("continuous", (), np.array(labels, dtype=np.float64), 0)
    if resolved == "binary" and len(classes) > 2:
        raise InvalidInput(
            f"A binary target has at most 2 classes; these labels have {len(classes)} "
            '(use target_type "multiclass").',
            field=field,
        )
    if len(classes) > MAX_CLASSES:
        raise InvalidInput(
            f"A multi-class target has at most {MAX_CLASSES} classes; got {len(classes)}.",
            field=field,
        )
    y = codes(labels, tuple(classes), field=field)
    k = len(classes)
    return Target(resolved, tuple(classes), y, k if resolved == "multiclass" and k >= 3 else 0)


def codes(
    labels: Sequence[Any] | npt.ArrayLike, classes: tuple[Label, ...], *, field: str
) -> FloatArray:
    """Class codes 0..K-1 of ``labels`` (positions in the sorted ``classes``)."""
    items = labels.tolist() if isinstance(labels, np.ndarray) else list(labels)  # type: ignore[arg-type]
    index = {c: i for i, c in enumerate(classes)}
    out = np.empty(len(items), dtype=np.float64)
    for i, v in enumerate(items):
        key = v if isinstance(v, str) else plain_label(v) if is_number(v) else None
        code = index.get(key) if key is not None else None
        if code is None:
            shown = ", ".join(repr(c) for c in classes[:10])
            raise InvalidInput(
                f"Label {str(v)[:40]!r} is not one of the stream's classes ({shown}"
                f"{', ...' if len(classes) > 10 else ''}); a stream's classes never change.",
                field=f"{field}[{i}]",
            )
        out[i] = code
    return out


def is_number(v: Any) -> bool:
    """Whether ``v`` is a finite number label (not a bool)."""
    return (
        not isinstance(v, bool)
        and isinstance(v, (int, float, np.integer, np.floating))
        and math.isfinite(float(v))
    )


def indicators(y: FloatArray, n_classes: int) -> FloatArray:
    """One-hot indicator rows (K, n) of class codes ``y``: row k is 1 where y == k."""
    return np.asarray(y[None, :] == np.arange(n_classes, dtype=np.float64)[:, None], dtype=float)


def multiclass_algorithms() -> list[str]:
    """The supervised algorithms that accept multi-class targets, by name."""
    from featurestream.selectors import REGISTRY  # the registry imports every selector

    return sorted(
        name
        for name, cls in REGISTRY.items()
        if getattr(cls, "supervised", True) and getattr(cls, "accepts_multiclass", False)
    )


def refuse_multiclass(algorithm: str, k: int | None, *, field: str = "target") -> None:
    """A multi-class stream of an algorithm defined for binary targets: InvalidInput (422)."""
    classes = f" ({k} classes)" if k is not None else ""
    raise InvalidInput(
        f"{algorithm} is defined for binary targets and does not accept a multi-class "
        f"target{classes}; algorithms that accept multi-class targets: "
        f"{', '.join(multiclass_algorithms())}.",
        field=field,
    )


def refuse_continuous(algorithm: str, distinct: int, *, binary_only: bool) -> None:
    """A continuous target for an algorithm that learns classes: InvalidInput (422)."""
    declare = '"binary"' if binary_only else '"binary" or "multiclass"'
    raise InvalidInput(
        f"{algorithm} learns classes and does not accept a continuous target ({distinct} "
        f"distinct values); declare its classes (target_type {declare}). Algorithms that "
        f"accept multi-class targets: {', '.join(multiclass_algorithms())}.",
        field="target",
    )


def class_codes(
    labels: Sequence[Any] | npt.ArrayLike, *, field: str = "y"
) -> tuple[tuple[Label, ...], FloatArray]:
    """The distinct labels in sorted order, and each label's code 0..K-1 among them.

    Numbers or strings (not a mix), checked as :func:`resolve_target` checks them.

    >>> class_codes([7, 5, 7])
    ((5, 7), array([1., 0., 1.]))
    >>> class_codes(["pos", "neg"])[1].tolist()
    [1.0, 0.0]
    """
    a = numeric_labels(labels)
    if a is not None:
        if a.shape[0] == 0:
            raise InvalidInput("The target must not be empty.", field=field)
        if not np.isfinite(a).all():
            raise InvalidInput("The target contains NaN or infinite values.", field=field)
        distinct = np.unique(a)
        classes = tuple(plain_classes(distinct))
        return classes, np.searchsorted(distinct, a).astype(np.float64)
    items = plain_labels(labels, field)[0]
    classes = tuple(sorted(set(items)))
    return classes, codes(items, classes, field=field)


def binary_codes(labels: Sequence[Any] | npt.ArrayLike, *, field: str = "y") -> FloatArray:
    """Labels of at most two classes, any values or type, as 0 and 1 in sorted label order.

    The binary rule of every selector sees these codes (or their +-1 form,
    ``2 * codes - 1``), so 0/1, 1/2, -1/+1, 5/7 and two strings decide alike.

    >>> binary_codes([2, 1, 2]).tolist(), binary_codes(["b", "a"]).tolist()
    ([1.0, 0.0, 1.0], [1.0, 0.0])
    """
    classes, coded = class_codes(labels, field=field)
    if len(classes) > 2:
        raise InvalidInput(
            f"A binary target has at most 2 classes; these labels have {len(classes)} "
            f"({', '.join(repr(c) for c in classes[:5])}"
            f"{', ...' if len(classes) > 5 else ''}).",
            field=field,
        )
    return coded


def binary_signs(labels: Sequence[Any] | npt.ArrayLike, *, field: str = "y") -> FloatArray:
    """Labels of at most two classes as -1 and +1 in sorted label order (the lower is -1).

    Numbers within {0, 1} or {-1, +1} map as they always did (1 is +1, even
    alone), so those targets decide to the last bit as before.

    >>> binary_signs([2, 1, 2]).tolist(), binary_signs([1, 1]).tolist()
    ([1.0, -1.0, 1.0], [1.0, 1.0])
    """
    a = numeric_labels(labels)
    if a is not None and a.size and (np.isin(a, (0.0, 1.0)).all() or np.isin(a, (-1.0, 1.0)).all()):
        return np.where(a == 1.0, 1.0, -1.0)
    return 2.0 * binary_codes(labels, field=field) - 1.0


def discrete_target(y: FloatArray, n_classes: int) -> FloatArray:
    """The target as the discrete tests (G2, chi-square, SU) see it: one categorical column.

    The tests code a class target themselves, so no relabelling changes a
    decision. A multi-class target's classes are renumbered by their first
    appearance in y: the number each class gets then depends only on which rows
    hold it, not on its label, so the count tables and their sums, to the last
    bit, are the same under any relabelling. A two-class target (at most two
    distinct values, whatever they are) is coded 0 and 1 in sorted label order,
    as every binary rule codes it (:func:`binary_codes`); codes 0/1 stay as
    they are. A continuous target (more than two values, no classes) is y as it
    is: it must already hold codes 0..L-1.

    >>> discrete_target(np.array([2.0, 0.0, 2.0, 1.0]), 3).tolist()
    [0.0, 1.0, 0.0, 2.0]
    >>> discrete_target(np.array([7.0, 5.0, 7.0]), 0).tolist()
    [1.0, 0.0, 1.0]
    """
    distinct, first, inverse = np.unique(y, return_index=True, return_inverse=True)
    if not n_classes:
        if distinct.shape[0] > 2:
            return y
        return np.asarray(inverse.reshape(-1), dtype=np.float64)
    rank = np.empty(first.shape[0], dtype=np.float64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0], dtype=np.float64)
    return np.asarray(rank[inverse.reshape(-1)], dtype=np.float64)


def target_columns(y: FloatArray, n_classes: int) -> list[FloatArray]:
    """The target as the tests see it: [y], or the K class indicators when n_classes >= 3."""
    if n_classes:
        return list(indicators(y, n_classes))
    return [y]


__all__ = [
    "K_MAX",
    "LEGACY",
    "MAX_CLASSES",
    "TARGET_TYPES",
    "Label",
    "Target",
    "binary_codes",
    "binary_signs",
    "check_target_type",
    "class_codes",
    "codes",
    "discrete_target",
    "indicators",
    "is_number",
    "multiclass_algorithms",
    "numeric_labels",
    "plain_classes",
    "plain_label",
    "plain_labels",
    "refuse_continuous",
    "refuse_multiclass",
    "resolve_target",
    "target_columns",
]
