"""Drift detection of an instance stream: the watch, its signal and what a detection does.

A stream's ``drift`` (``none``, ``page_hinkley`` or ``adwin``) watches one
number per instance or per batch (docs/algorithms.md, "Drift detectors"):

* a selector that predicts before it learns (OFS, FIRES) gives the 0/1 error
  of each instance it learns (``InstanceUpdate.hits``): a drift is a rise;
* any other (FSDS, NRFS, kbest) gives, once per batch, its selection's total
  score: a drift is a fall.

Only a change for the worse counts: the error that falls while a model learns
(after a start or a reset), or a score that grows as statistics accumulate,
is no drift, so a reset does not set off the next one.

A detection is a :class:`Detection`: the instance count it happened at, the
detector's statistic, and the features whose scores moved most since the
batch before. ``on_drift`` says what follows: ``log`` (only the detection) or
``reset``: the selector restarts its statistics from the next instance, as a
new stream of the same parameters and target type would (a detection inside
a batch splits it there). The stream's count of instances goes on: the
instances seen before the last reset are the watch's ``offset``.

The watch (:class:`Watch`) is plain numbers kept in the selector's state
(its ``watch`` field): the detector's state, the scores of the last
selection (at most ``num_features``) and the offset. It is bounded, stored
with the selector's state and rebuilt exactly: replaying the same batches
gives the same detections and the same bits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream.selectors.decisions import InstanceUpdate, SelectedFeature
from featurestream.selectors.params import StrOptions
from featurestream.stats.drift import ADWIN, DETECTORS, Detector, PageHinkley

# An instance selector (selectors/base.py, which imports this module) and its rows.
Selector = Any
Matrix = npt.NDArray[np.float64]
Vector = npt.NDArray[np.float64]

DRIFT = ("none", *DETECTORS)
ON_DRIFT = ("log", "reset")
# Features named in a detection: those whose scores moved most.
MOVED = 5
# State fields a reset keeps: the stream's target and its prequential record.
KEPT = ("target_type", "predicted", "correct", "recent")

#: The constraints and descriptions every instance selector declares for its watch.
CONSTRAINTS = {"drift": StrOptions(DRIFT), "on_drift": StrOptions(ON_DRIFT)}
DESCRIPTIONS = {
    "drift": "drift detector watching the stream (`page_hinkley`, `adwin`; `none`: no watch): "
    "the prequential 0/1 error of OFS and FIRES, the selection's total score per batch of "
    "the others",
    "on_drift": "what a detection does: `log` (a drift event) or `reset` (also restarts "
    "the selector's statistics from the next instance)",
}


@dataclass(frozen=True)
class Watch:
    """A stream's drift watch: its detector's state, the scores of the last selection,
    and the instances seen before the selector's last reset."""

    detector: str
    state: tuple[Any, ...] = ()
    scores: tuple[tuple[str, float], ...] = ()
    offset: int = 0

    @classmethod
    def start(cls, detector: str) -> Watch:
        return cls(detector, DETECTORS[detector]().to_state())

    @classmethod
    def of(cls, stored: tuple[Any, ...], detector: str) -> Watch:
        """The watch a state's ``watch`` field holds (a new one when it is empty)."""
        if not stored:
            return cls.start(detector)
        state, scores, offset = stored
        return cls(detector, tuple(state), tuple((str(n), float(s)) for n, s in scores), offset)

    def stored(self) -> tuple[Any, ...]:
        """The plain tuple kept in the selector's state."""
        return (self.state, self.scores, self.offset)

    def rebuilt(self, worse: str = "both") -> Detector:
        """The detector, counting changes in the direction ``worse`` ("up", "down")."""
        if self.detector == PageHinkley.name:
            return PageHinkley.from_state(self.state, mode=worse)
        return DETECTORS[self.detector].from_state(self.state)


def offset(stored: tuple[Any, ...]) -> int:
    """The instances seen before the last reset, from a state's ``watch`` field."""
    return int(stored[2]) if stored else 0


@dataclass(frozen=True)
class Detection:
    """One detection: the instance count it happened at, the detector's statistic,
    the features whose scores moved most and whether the selector was reset."""

    instances_seen: int
    statistic: float
    moved: list[dict[str, Any]] = field(default_factory=list)
    reset: bool = False


def signal(update: InstanceUpdate, selected: Sequence[SelectedFeature]) -> list[float]:
    """The values a learnt batch feeds the detector, in order: one 0/1 error per
    instance of a predicting selector, else the selection's total score."""
    if update.hits is not None:
        errors: list[float] = np.where(update.hits, 0.0, 1.0).tolist()
        return errors
    return [float(sum(f.score or 0.0 for f in selected))] if update.instances else []


def observe(
    watch: Watch, values: Sequence[float], *, worse: str = "both", first_only: bool = False
) -> tuple[Watch, list[tuple[int, float]]]:
    """Feed ``values``; the watch after them and its detections as (index, statistic).

    Only a change in the direction ``worse`` counts ("up": a rise, "down": a fall,
    "both"); the detector restarts after a change either way. With ``first_only``
    the feeding stops at the first detection (the values after it are not seen:
    the caller learns them again after a reset).
    """
    detector = watch.rebuilt(worse)
    found: list[tuple[int, float]] = []
    for i, x in enumerate(values):
        if detector.update(float(x)) and _counts(detector, worse):
            found.append((i, detector.statistic))
            if first_only:
                break
    return replace(watch, state=detector.to_state()), found


def _counts(detector: Detector, worse: str) -> bool:
    """Whether a detection is a change in the direction ``worse``."""
    if isinstance(detector, ADWIN) and worse != "both":
        return detector.rising == (worse == "up")
    return True


def scores_of(selected: Sequence[SelectedFeature]) -> tuple[tuple[str, float], ...]:
    return tuple((f.name, float(f.score or 0.0)) for f in selected)


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


Learn = Callable[[Matrix, Vector | None, int], InstanceUpdate]


def learn_watched(sel: Selector, X: Matrix, y: Vector | None, learn: Learn) -> InstanceUpdate:
    """Learn a validated batch under the stream's drift watch.

    ``learn(X, y, start)`` learns rows as the selector does without a watch
    (``start``: their offset in the batch, for its checkpoints). With ``reset``,
    a detection at instance i of the batch puts the selector back as it was
    before the batch, learns its first i + 1 instances, restarts it, and learns
    the rest on the fresh state (under the same watch).
    """
    p = sel.params
    reset = p.on_drift == "reset"
    m = X.shape[0]
    before = sel.selected()
    watch = Watch.of(sel.state.watch, p.drift)
    parts: list[InstanceUpdate] = []
    found: list[Detection] = []
    pos = 0
    while pos < m:
        snap = sel.snapshot()
        last = dict(watch.scores)
        part = learn(X[pos:], None if y is None else y[pos:], pos)
        values = signal(part, sel.selected_features())
        per_instance = part.hits is not None
        # A drift makes things worse: the error rises, or the selection's score falls.
        worse = "up" if per_instance else "down"
        watch, hits = observe(watch, values, worse=worse, first_only=reset)
        if reset and hits and per_instance and hits[0][0] + 1 < part.instances:
            # The detection is inside the batch: learn up to it only.
            sel.state = snap
            k = hits[0][0] + 1
            part = learn(X[pos : pos + k], None if y is None else y[pos : pos + k], pos)
        now = scores_of(sel.selected_features())
        seen = watch.offset + int(sel.state.instances_seen)
        for i, statistic in hits:
            at = seen - part.instances + i + 1 if per_instance else seen
            found.append(Detection(at, statistic, moved(last, dict(now)), reset))
        parts.append(replace(part, instances_seen=seen))
        pos += part.instances
        watch = replace(watch, scores=now)
        if reset and hits:
            watch = replace(watch, offset=seen, scores=())
            sel.state = restarted(sel)
        sel.state = replace(sel.state, watch=watch.stored())
    return InstanceUpdate.joined(parts, before != sel.selected(), tuple(found))


def restarted(sel: Selector) -> Any:
    """The state a reset gives: the selector's initial state over the same features,
    keeping the stream's target type and prequential record."""
    s = sel.state
    fresh = type(sel).initial_state(sel.params, sel.feature_names)
    kept = {name: getattr(s, name) for name in KEPT if hasattr(s, name)}
    return replace(fresh, **kept)


__all__ = [
    "CONSTRAINTS",
    "DESCRIPTIONS",
    "DRIFT",
    "MOVED",
    "ON_DRIFT",
    "Detection",
    "Watch",
    "learn_watched",
    "moved",
    "observe",
    "offset",
    "restarted",
    "signal",
]
