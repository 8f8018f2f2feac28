"""Prequential (test-then-train) accuracy of a supervised instance selector.

OFS and FIRES predict each instance with the model they hold before learning
it (OFS: sign(w . x) before its step; FIRES: the model before the batch, on
the batch's inputs as its update sees them). The state counts the instances
predicted, those predicted right, and keeps the outcomes of the last
``RECENT`` as 0/1 flags, oldest first. States stored before these counters
existed load with them empty: the accuracy then covers what was learnt since.
Counting changes nothing of what the selector learns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

RECENT = 1000

Flags = npt.NDArray[np.bool_]


def no_flags() -> Flags:
    return np.zeros(0, dtype=np.bool_)


def tally(state: Any, hits: npt.ArrayLike) -> dict[str, Any]:
    """The State fields after predicting a batch, ``hits[i]`` true when instance i was right.

    >>> from types import SimpleNamespace
    >>> s = SimpleNamespace(predicted=2, correct=1, recent=np.array([True, False]))
    >>> t = tally(s, [True, True, False])
    >>> t["predicted"], t["correct"], t["recent"].tolist()
    (5, 3, [True, False, True, True, False])
    """
    h = np.asarray(hits, dtype=np.bool_).ravel()
    recent = np.concatenate([np.asarray(state.recent, dtype=np.bool_), h])[-RECENT:]
    return {
        "predicted": int(state.predicted) + int(h.size),
        "correct": int(state.correct) + int(h.sum()),
        "recent": np.ascontiguousarray(recent),
    }


__all__ = ["RECENT", "no_flags", "tally"]
