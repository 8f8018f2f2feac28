"""The labels of an instance stream's batches, resolved against the stream's target.

A classifying instance stream (OFS, FIRES) resolves ``auto`` from its first
labelled batch and keeps the classes it has seen (``selectors/targets.py``
resolves and codes targets). Up to two classes take the binary rule, the
labels as -1 and +1 (:func:`signs`, :func:`sign_code`); from the third class
on the multi-class rule, the class codes 0..K-1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream.errors import InvalidInput
from featurestream.selectors.targets import (
    LEGACY,
    MAX_CLASSES,
    FloatArray,
    Label,
    codes,
    is_number,
    numeric_labels,
    plain_classes,
    plain_label,
    plain_labels,
    refuse_multiclass,
    resolve_target,
)


@dataclass(frozen=True)
class Labels:
    """A batch of an instance stream's labels, resolved against the stream's target.

    ``values``: +-1 under the binary rule, the class codes 0..K-1 (sorted
    order of ``classes``) under the multi-class rule (``multiclass`` is True).
    ``target_type``, ``classes`` and ``first`` are the stream's after the batch.
    """

    values: FloatArray
    multiclass: bool
    target_type: str
    classes: tuple[Label, ...]
    first: Label | None


def label_list(y: Any, m: int) -> list[Any] | FloatArray:
    """A batch's m labels: a float64 array when they are numbers in an array, else a list.

    Numbers or strings; they are checked when resolved.
    """
    if isinstance(y, np.ndarray) and y.dtype.kind in "iuf":
        numbers = np.asarray(y.reshape(-1), dtype=np.float64)
        if numbers.shape[0] != m:
            raise InvalidInput(f"Expected {m} labels, got {numbers.shape[0]}.", field="y")
        return numbers
    items = y.reshape(-1).tolist() if isinstance(y, np.ndarray) else list(y)
    if len(items) != m:
        raise InvalidInput(f"Expected {m} labels, got {len(items)}.", field="y")
    return items


def instance_labels_typed(
    algorithm: str,
    accepts_multiclass: bool,
    target_type: str,
    classes: tuple[Label, ...],
    first: Label | None,
    y: Sequence[Any] | npt.ArrayLike,
    *,
    any_two: bool = False,
) -> Labels:
    """Resolve a labelled batch of a classifying instance stream (OFS, FIRES).

    ``auto`` is resolved from the first labelled batch; the classes are the
    labels seen so far (a binary stream holds at most two). Up to two classes,
    whatever the labels and the declared type, take the binary rule: any two
    labels, numbers or strings, coded by :func:`signs` (first label seen), or
    with ``any_two`` by :func:`sign_code` (sorted label order; the learner flips
    its sign when the second class shows the first was the higher). The
    multi-class rule (class codes) applies from the third class on.
    """
    batch = resolve_target(y, "auto" if target_type == "auto" else target_type, field="y")
    resolved = batch.target_type if target_type == "auto" else target_type
    if resolved == "continuous":
        raise InvalidInput(
            "Labels must be class labels; these look continuous (not all integers, or more "
            f"than 100 values), and {algorithm} learns classes. "
            'Declare target_type "binary" or "multiclass".',
            field="y",
        )
    a = numeric_labels(y)
    labels: Sequence[Label] = plain_labels(y, "y")[0] if a is None else ()
    new_classes = merged_classes(classes, batch.classes, resolved)
    if resolved == "multiclass" and not accepts_multiclass and len(new_classes) > 2:
        refuse_multiclass(algorithm, len(new_classes), field="y")
    if first is None:
        first = labels[0] if a is None else plain_label(a[0])
    if resolved == "multiclass" and accepts_multiclass and len(new_classes) >= 3:
        if a is not None:
            # Numbers among numeric classes (mixing was refused above): positions
            # in the sorted classes, as codes() finds them.
            at = np.searchsorted(np.array(new_classes, dtype=np.float64), a)
            return Labels(at.astype(np.float64), True, resolved, new_classes, first)
        return Labels(codes(labels, new_classes, field="y"), True, resolved, new_classes, first)
    if any_two:
        if a is not None:
            distinct = np.unique(a)
            table = np.array([sign_code(v, new_classes) for v in plain_classes(distinct)])
            pm = table[np.searchsorted(distinct, a)]
        else:
            pm = np.array([sign_code(v, new_classes) for v in labels])
        return Labels(pm, False, resolved, new_classes, first)
    return Labels(signs(labels if a is None else a, first), False, resolved, new_classes, first)


def merged_classes(
    classes: tuple[Label, ...], batch: tuple[Label, ...], resolved: str
) -> tuple[Label, ...]:
    """An instance stream's classes after a batch: those seen so far and the batch's, sorted.

    Refuses (InvalidInput) numbers after strings or the other way round, a third
    class of a binary target, and more than MAX_CLASSES classes.
    """
    merged = set(classes) | set(batch)
    if len({isinstance(c, str) for c in merged}) > 1:
        raise InvalidInput(
            "Labels must be all numbers or all strings, like the stream's earlier labels "
            f"({', '.join(repr(c) for c in classes[:5])}).",
            field="y",
        )
    new_classes = tuple(sorted(merged))
    if resolved == "binary" and len(new_classes) > 2:
        raise InvalidInput(
            f"This stream's target is binary; labels {', '.join(map(repr, new_classes[:5]))} "
            'make more than 2 classes (create the stream with target_type "multiclass").',
            field="y",
        )
    if len(new_classes) > MAX_CLASSES:
        raise InvalidInput(f"A stream has at most {MAX_CLASSES} classes.", field="y")
    return new_classes


def signs(labels: Sequence[Label] | FloatArray, first: Label) -> FloatArray:
    """A two-class instance stream's labels as -1 and +1 (the binary rule).

    The first label the stream saw is -1 and the other class +1, except that
    the number 1 is always +1, so 0/1 and -1/+1 map as they always did (0 and
    -1 are -1). The coding is fixed by the first labelled instance, whatever
    the labels are and whichever class comes first; OFS and FIRES (with
    ``mu_init`` 0) are symmetric under y -> -y, so their selections do not
    depend on it.

    >>> signs(np.array([7.0, 5.0]), 7).tolist(), signs(["b", "a"], "a").tolist()
    ([-1.0, 1.0], [1.0, -1.0])
    >>> signs(np.array([0.0, 1.0]), 1).tolist(), signs(np.array([2.0, 1.0]), 1).tolist()
    ([-1.0, 1.0], [-1.0, 1.0])
    """
    flip = -1.0 if first == 1 and not isinstance(first, str) else 1.0
    if isinstance(labels, np.ndarray):
        return np.where(labels == first, -flip, flip)
    return np.array([-flip if v == first else flip for v in labels])


def sign_code(label: Label, classes: tuple[Label, ...]) -> float:
    """The +-1 code of a label among a binary stream's classes (sorted, at most two).

    Of two classes the lower codes -1 and the higher +1. While a stream has
    seen one class, 0 and -1 code -1, 1 codes +1 (as in {0, 1} and {-1, +1})
    and any other label -1; the second class may then show that the first
    was the higher one, and the learner flips its sign (OFS is symmetric
    under y -> -y).

    >>> sign_code(5, (5, 7)), sign_code("b", ("a", "b")), sign_code(1, (1,)), sign_code(7, (7,))
    (-1.0, 1.0, 1.0, -1.0)
    """
    if len(classes) == 2:
        return -1.0 if label == classes[0] else 1.0
    return 1.0 if is_number(label) and label == 1 else -1.0


def typed_labels(
    selector: Any, y: Any, *, any_two: bool = False
) -> tuple[dict[str, Any], FloatArray]:
    """The State fields a labelled batch changes and its labels (+-1 or class codes).

    A stream created before target types (``target_type`` "") keeps its rule:
    numeric labels in {0, 1} or {-1, +1}.
    """
    from featurestream.selectors.checks import binary_labels

    s = selector.state
    if y is not None and len(y) == 0:
        return {}, np.zeros(0)  # an empty batch resolves nothing
    if s.target_type == LEGACY:
        return {}, binary_labels(y if y is not None else np.zeros(0))
    got = instance_labels_typed(
        selector.name, selector.accepts_multiclass, s.target_type, s.classes, s.first_label, y,
        any_two=any_two,
    )  # fmt: skip
    fields = {"target_type": got.target_type, "classes": got.classes, "first_label": got.first}
    return fields, got.values


__all__ = [
    "Labels",
    "instance_labels_typed",
    "label_list",
    "merged_classes",
    "sign_code",
    "signs",
    "typed_labels",
]
