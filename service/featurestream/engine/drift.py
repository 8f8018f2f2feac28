"""Drift detection per instance stream: the signal, the detector's state and its events.

A stream's ``drift`` (``none``, ``page_hinkley`` or ``adwin``) watches one
number per instance or per batch (docs/algorithms.md, "Drift detectors"):

* a selector that predicts before it learns (prequential counters, see
  ``selectors/prequential.py``) gives its 0/1 error of each instance of the
  batch, as its ``recent`` flags hold them (the last 1,000 of a larger batch);
* any other gives, once per batch, its selection's total score.

A detection makes a ``drift`` event: the instance count it happened at, the
detector's statistic, and the features whose scores moved most since the
batch before. ``on_drift`` says what follows: ``log`` (only the event) or
``reset`` (the selector restarts its statistics from the next instance).

The watch's state (:class:`Watch`) is plain numbers: the detector's state
tuple and the scores of the last selection (at most ``num_features`` of
them), so it is bounded, stored beside the selector's state and rebuilt
exactly: replaying the same batches gives the same detections.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from featurestream.errors import InvalidInput
from featurestream.selectors.decisions import SelectedFeature
from featurestream.stats.drift import DETECTORS, Detector

DRIFT = ("none", *DETECTORS)
ON_DRIFT = ("log", "reset")
# Features named in a drift event: those whose scores moved most.
MOVED = 5


def check_drift(drift: str, on_drift: str) -> None:
    """Refuse an unknown ``drift`` or ``on_drift`` (InvalidInput, 422)."""
    if drift not in DRIFT:
        raise InvalidInput(
            f"drift must be one of {', '.join(DRIFT)}; got {str(drift)[:40]!r}.", field="drift"
        )
    if on_drift not in ON_DRIFT:
        raise InvalidInput(
            f"on_drift must be one of {', '.join(ON_DRIFT)}; got {str(on_drift)[:40]!r}.",
            field="on_drift",
        )


@dataclass(frozen=True)
class Watch:
    """A stream's drift watch: its detector's state and the scores of the last selection."""

    detector: str
    state: tuple[Any, ...] = ()
    scores: tuple[tuple[str, float], ...] = ()

    @classmethod
    def start(cls, detector: str) -> Watch:
        return cls(detector, DETECTORS[detector]().to_state())

    def rebuilt(self) -> Detector:
        return DETECTORS[self.detector].from_state(self.state)


@dataclass(frozen=True)
class Detection:
    """One detection: the instance count it happened at and the detector's statistic."""

    instances_seen: int
    statistic: float
    moved: list[dict[str, Any]] = field(default_factory=list)


def batch_signal(
    state: Any, before: Any, n: int, selected: Sequence[SelectedFeature]
) -> list[float]:
    """The values a batch of ``n`` instances feeds the detector, in order.

    ``before`` and ``state`` are the selector's states before and after the batch.
    """
    if hasattr(state, "predicted") and hasattr(state, "recent"):
        counted = int(state.predicted) - int(getattr(before, "predicted", 0))
        flags = np.asarray(state.recent, dtype=np.bool_)[-min(counted, len(state.recent)) :]
        return [0.0 if hit else 1.0 for hit in flags.tolist()] if counted else []
    return [float(sum(f.score or 0.0 for f in selected))] if n else []


def observe(
    watch: Watch,
    values: Sequence[float],
    seen_before: int,
    n: int,
    selected: Sequence[SelectedFeature],
) -> tuple[Watch, list[Detection]]:
    """Feed a batch's values; the watch after it and its detections.

    With one value per instance, a detection at value i is at instance count
    ``seen_before + n - len(values) + i + 1``; a batch's one total score is at
    the count after the batch.
    """
    detector = watch.rebuilt()
    found: list[Detection] = []
    first = seen_before + n - len(values)
    now = {f.name: float(f.score or 0.0) for f in selected}
    for i, x in enumerate(values):
        if detector.update(float(x)):
            found.append(
                Detection(first + i + 1, detector.statistic, moved(dict(watch.scores), now))
            )
    kept = tuple((f.name, float(f.score or 0.0)) for f in selected)
    return Watch(watch.detector, detector.to_state(), kept), found


def moved(before: Mapping[str, float], after: Mapping[str, float]) -> list[dict[str, Any]]:
    """The features whose scores moved most (at most MOVED), largest change first.

    A feature outside a selection counts as 0 there; ties go by name.

    >>> [m["name"] for m in moved({"a": 1.0, "b": 0.5}, {"b": 0.9, "c": 2.0})]
    ['c', 'a', 'b']
    """
    names = sorted(set(before) | set(after))
    change = {n: abs(after.get(n, 0.0) - before.get(n, 0.0)) for n in names}
    top = sorted(names, key=lambda n: -change[n])[:MOVED]
    return [
        {"name": n, "before": before.get(n, 0.0), "after": after.get(n, 0.0)}
        for n in top
        if change[n] > 0.0
    ]


def drift_event(version: int, detector: str, d: Detection) -> dict[str, Any]:
    """The event a detection adds to the stream's log."""
    return {
        "type": "drift",
        "version": version,
        "detector": detector,
        "instances_seen": d.instances_seen,
        "statistic": d.statistic,
        "moved": d.moved,
    }


__all__ = [
    "DRIFT",
    "MOVED",
    "ON_DRIFT",
    "Detection",
    "Watch",
    "batch_signal",
    "check_drift",
    "drift_event",
    "moved",
    "observe",
]
