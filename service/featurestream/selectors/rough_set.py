"""What K-OFSD, OFS-A3M and OFS-Density share: a class target, and S with its distances.

Each judges feature subsets by the neighborhood dependency gamma_S(D) of the
class on them (stats/neighborhood.py), under its own neighbourhood rule. The
state keeps the raw columns of the selected set S in arrival order; the
selector keeps S's squared distances (:class:`~featurestream.stats.neighborhood.Subset`),
rebuilt from those columns when it resumes, to the same bits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt

from featurestream.errors import InvalidInput
from featurestream.selectors.base import FeatureSelector, Matrix, P, S, Vector
from featurestream.selectors.checks import target_vector
from featurestream.selectors.decisions import Decision, Eviction, Reason, ScoreKind
from featurestream.selectors.params import Params
from featurestream.selectors.targets import refuse_continuous
from featurestream.stats.columns import is_constant_rows
from featurestream.stats.neighborhood import (
    MAX_INSTANCES,
    Rule,
    Subset,
    gamma,
    non_significant,
    squared_distances,
    unit_column,
)

IntArray = npt.NDArray[np.int64]
#: A member of S: its name, single dependency and raw column.
Member = tuple[str, float, Vector]


@dataclass(frozen=True, kw_only=True)
class ParameterFree(Params):
    """The parameters of a selector that has none (OFS-A3M, OFS-Density)."""

    constraints: ClassVar[dict[str, Any]] = {}
    descriptions: ClassVar[dict[str, str]] = {}


@dataclass(frozen=True)
class MeanState:
    """What OFS-A3M and OFS-Density know (their states add to it).

    Attributes
    ----------
    y : the class target (codes, or two values as given).
    selected, dep, columns : S in arrival order, each member's single
        dependency and raw column (one row each).
    dep_set : the dependency of S when it last changed (0 at the start).
    dep_mean : the mean a new feature's own dependency is held to (0 at the start).
    passes : how many non-significance passes ran.
    """

    y: Vector
    columns: Matrix
    selected: tuple[str, ...] = ()
    dep: Vector = field(default_factory=lambda: np.zeros(0))
    dep_set: float = 0.0
    dep_mean: float = 0.0
    passes: int = 0
    features_seen: int = 0
    features_accepted: int = 0
    features_rejected: int = 0
    features_evicted: int = 0
    n_classes: int = 0


def class_codes_of(y: Vector) -> IntArray:
    """The target's classes as codes 0..K-1, in sorted order of the values."""
    return np.asarray(np.unique(y, return_inverse=True)[1].reshape(-1), dtype=np.int64)


def rows(columns: list[Vector], n: int) -> Matrix:
    """Columns as a (b, n) float64 array (b may be 0)."""
    return np.array(columns, dtype=np.float64) if columns else np.zeros((0, n))


class RoughSetSelector(FeatureSelector[P, S]):
    """A feature-stream selector on the neighborhood dependency (State: ``y``, the
    class codes; ``columns``, the raw columns of ``selected``)."""

    score: ClassVar[ScoreKind] = ScoreKind("neighborhood_dependency")

    def __init__(self, params: P, state: S) -> None:
        super().__init__(params, state)
        s: Any = state
        self.codes = class_codes_of(s.y)
        self.rule = self.make_rule()
        self.subset = Subset(self.n_instances, [unit_column(c) for c in s.columns])

    def make_rule(self) -> Rule:
        """The selector's neighbourhood rule for this target."""
        raise NotImplementedError

    @classmethod
    def requires_binary_target(cls, params: Any) -> bool:
        # A continuous target is refused (the classes are what is explained).
        return True

    @classmethod
    def start(cls, params: P, y: npt.ArrayLike, n_classes: int = 0) -> Self:
        y_arr = target_vector(y)
        if y_arr.shape[0] > MAX_INSTANCES:
            raise InvalidInput(
                f"{cls.name} computes distances between every pair of instances and "
                f"takes at most {MAX_INSTANCES} instances; the target has {y_arr.shape[0]}.",
                field="target",
            )
        distinct = int(np.unique(y_arr).shape[0])
        if not n_classes and distinct > 2:
            refuse_continuous(cls.name, distinct, binary_only=not cls.accepts_multiclass)
        return super().start(params, y_arr, n_classes)

    def gamma(self, Q: Matrix) -> float:
        """gamma of the subset whose squared distances are Q."""
        return gamma(Q, self.codes, self.rule)

    def arrivals(
        self, names: list[str], X: Matrix, out: list[Decision]
    ) -> Iterator[tuple[int, str, Vector]]:
        """The non-constant arrivals in order: (index, name, standardized column).

        A constant column gets its decision in ``out`` here (rejected before any
        dependency); the caller appends the others' decisions as it goes.
        """
        constant = is_constant_rows(X).tolist()
        for i, name in enumerate(names):
            self.checkpoint(i)
            if constant[i]:
                out.append(Decision(name, False, Reason.CONSTANT, score=None))
                continue
            yield i, name, unit_column(X[i])

    def members(self) -> list[Member]:
        """S as the state holds it, in arrival order."""
        s: Any = self.state
        return list(zip(s.selected, s.dep.tolist(), s.columns, strict=True))

    def member_fields(self, members: list[Member]) -> dict[str, Any]:
        """The State fields of S (``replace`` keywords)."""
        return {
            "selected": tuple(m[0] for m in members),
            "dep": np.array([m[1] for m in members], dtype=np.float64),
            "columns": rows([np.array(m[2], dtype=np.float64) for m in members], self.n_instances),
        }

    def drop_insignificant(
        self,
        members: list[Member],
        by: str,
        g: float,
        removable: Callable[[float, float], bool],
        at: int,
    ) -> tuple[tuple[Eviction, ...], float]:
        """The non-significance pass over S but its newest member ``by`` (in arrival
        order; ``g`` is gamma of S): the members it removes leave ``members`` and
        the subset, and are returned as evictions (``redundant``, by ``by``), with
        gamma of what is left. ``at``: the arrival's place in its batch, for the
        checkpoint between the pass's dependencies."""

        def checked(g_r: float, g_without: float) -> bool:
            self.checkpoint(at)
            return removable(g_r, g_without)

        removed, left = non_significant(self.subset, self.codes, self.rule, g, checked)
        gone = tuple(Eviction(members[k][0], Reason.REDUNDANT, by=by) for k in removed)
        for k in reversed(removed):
            del members[k]
        return gone, left

    def single(self, z: Vector) -> tuple[float, Matrix]:
        """gamma of {f} for f's standardized column z, and {f}'s squared distances."""
        Q = squared_distances([z], self.n_instances)
        return self.gamma(Q), Q


__all__ = [
    "MeanState",
    "Member",
    "ParameterFree",
    "RoughSetSelector",
    "class_codes_of",
    "rows",
]
