"""What a selector answers: per-feature decisions, the selection, instance updates.

Plain data: how they are shown to clients is the engine's wire module's job.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt


class Reason(enum.StrEnum):
    """Why a feature was rejected or evicted (docs/concepts.md, "Decisions")."""

    CONSTANT = "constant"
    IRRELEVANT = "irrelevant"
    REDUNDANT = "redundant"
    IRRELEVANT_GROUP = "irrelevant group"
    NOT_SIGNIFICANT = "not significant"
    GRADIENT_BELOW_LAMBDA1 = "gradient below lambda1"
    WEIGHT_SHRUNK_TO_ZERO = "weight shrunk to zero"
    MAX_FEATURES = "max_features"
    UNDETERMINED = "undetermined"


@dataclass(frozen=True)
class Eviction:
    """A member of the selected set removed by a later arrival."""

    feature: str
    reason: Reason
    by: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one arriving feature.

    ``score`` is the selector's measure of the feature (dep for SAOLA and
    OSFS, p-value for Alpha-investing, |gradient| for Grafting); ``by`` names
    the feature that made this one redundant.

    >>> d = Decision("a", False, Reason.IRRELEVANT, score=0.5)
    >>> d.feature, d.accepted, d.reason, d.by, d.score, d.evicted, d.group
    ('a', False, <Reason.IRRELEVANT: 'irrelevant'>, None, 0.5, (), None)
    """

    feature: str
    accepted: bool
    reason: Reason | None = None
    by: str | None = None
    score: float | None = None
    evicted: tuple[Eviction, ...] = ()
    group: str | None = None


@dataclass(frozen=True)
class SelectedFeature:
    """A member of the current selection, with the selector's score for it."""

    name: str
    score: float | None = None
    group: str | None = None


@dataclass(frozen=True)
class ScoreKind:
    """What a selector's scores mean (``GET /v1/algorithms``: ``score_kind``).

    ``kind`` names the quantity (``abs_correlation``, ``p_value``, ``weight``...);
    ``higher_is_better`` says which end ranks first; ``by_magnitude`` says the
    score is signed (a direction, as a model's weight) and its absolute value ranks.
    """

    kind: str
    higher_is_better: bool = True
    by_magnitude: bool = False


@dataclass(frozen=True)
class InstanceUpdate:
    """Outcome of a batch of instances."""

    instances: int
    instances_seen: int
    predictions: tuple[int, ...] = ()
    mistakes: int = 0
    selection_changed: bool = False
    # Whether each instance was predicted right (a bool array), for a selector that
    # predicts before it learns (None for the others): the drift watch's signal.
    hits: npt.NDArray[np.bool_] | None = field(default=None, compare=False)
    # The drift watch's detections in this batch (selectors/drift.py, Detection).
    drifts: tuple[Any, ...] = ()

    @classmethod
    def joined(
        cls, parts: Sequence[InstanceUpdate], changed: bool, drifts: tuple[Any, ...] = ()
    ) -> InstanceUpdate:
        """One batch's update from those of its parts, in order."""
        hits = [part.hits for part in parts if part.hits is not None]
        return cls(
            instances=sum(part.instances for part in parts),
            instances_seen=parts[-1].instances_seen,
            predictions=tuple(p for part in parts for p in part.predictions),
            mistakes=sum(part.mistakes for part in parts),
            selection_changed=changed,
            hits=np.concatenate(hits) if len(hits) == len(parts) else None,
            drifts=drifts,
        )


__all__ = ["Decision", "Eviction", "InstanceUpdate", "Reason", "ScoreKind", "SelectedFeature"]

#: The relevance score of each conditional-independence test, by the ``test`` parameter:
#: |r| (Fisher z), symmetrical uncertainty, or the G2 / chi-square statistic over its df.
TEST_SCORES = {
    "fisher_z": ScoreKind("abs_correlation"),
    "su": ScoreKind("symmetrical_uncertainty"),
    "g2": ScoreKind("g2_per_df"),
    "chi2": ScoreKind("chi2_per_df"),
}
