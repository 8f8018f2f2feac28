"""k-best's labels: a continuous target, or classes of any labels (docs/algorithms.md, "Targets").

A stream's ``target_type`` (``auto`` until its first labelled batch) decides
how a batch's labels are read: a continuous target's labels are its numbers; a
class target's are coded 0..K-1 in sorted order of every label seen so far. A
class first seen in a batch gets its own zero sums, at its sorted place among
the others, so the sums of a class never depend on its label.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from featurestream.errors import InvalidInput
from featurestream.selectors.batch_labels import merged_classes
from featurestream.selectors.targets import LEGACY, class_codes, resolve_target

CONTINUOUS = "continuous"

Vector = np.ndarray[Any, np.dtype[np.float64]]


def resolve_labels(algorithm: str, score: str, state: Any, y: Any) -> tuple[dict[str, Any], Vector]:
    """The State fields a batch's labels change, and the labels as numbers or class codes."""
    declared = state.target_type or "auto"
    resolved = declared
    if declared == "auto":
        resolved = resolve_target(y, "auto", field="y").target_type
    if resolved == CONTINUOUS:
        if score == "anova":
            raise InvalidInput(
                f'{algorithm} with score "anova" compares classes; these labels are a '
                'continuous target (declare target_type "multiclass", or use "correlation").',
                field="y",
            )
        values = resolve_target(y, CONTINUOUS, field="y").y
        fields: dict[str, Any] = {"target_type": CONTINUOUS}
        if state.sum_xy.shape[0] != state.sum_x.shape[0]:
            fields["sum_xy"] = np.zeros(state.sum_x.shape[0])
        return fields, values
    batch_classes, batch_codes = class_codes(y, field="y")
    old = tuple(state.classes)
    classes = merged_classes(old, batch_classes, resolved)
    at = {c: i for i, c in enumerate(classes)}
    table = np.array([at[c] for c in batch_classes], dtype=np.float64)
    fields = {"target_type": resolved, "classes": classes}
    if classes != old:
        fields.update(_grown(state, old, classes, at))
    return fields, table[batch_codes.astype(np.intp)]


def _grown(state: Any, old: tuple[Any, ...], classes: tuple[Any, ...], at: dict[Any, int]) -> Any:
    """The class sums over ``classes``: the old rows at their new places, zeros elsewhere."""
    d = state.sum_x.shape[0]
    nk, sk = np.zeros(len(classes)), np.zeros((len(classes), d))
    for i, c in enumerate(old):
        nk[at[c]], sk[at[c]] = state.class_weight[i], state.class_sum[i]
    return {"class_weight": nk, "class_sum": sk}


__all__ = ["CONTINUOUS", "LEGACY", "resolve_labels"]
