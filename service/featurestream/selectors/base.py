"""The selector protocol shared by every algorithm.

Each algorithm is three things (docs/algorithms.md, "How a selector is built"):

* ``Params``: a frozen dataclass validated at construction against a
  declarative constraint table (``selectors/params.py``).
* ``State``: a frozen dataclass of everything the selector knows: float64
  arrays, numbers, strings and tuples. ``codec.py`` turns it into bytes.
* ``Selector``: applies arrivals to its State. The core is synchronous, has no
  I/O and never reads a clock or a global random generator.

Feature columns travel feature-major: a batch of b columns over n instances is
a C-contiguous float64 array of shape ``(b, n)`` (see ``stats/columns.py``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, ClassVar, Generic, Literal, Self, TypeVar

import numpy as np
import numpy.typing as npt

from featurestream.errors import InvalidInput
from featurestream.selectors import drift
from featurestream.selectors.batch_labels import label_list
from featurestream.selectors.checks import (
    check_codes,
    feature_batch,
    feature_names_tuple,
    instance_batch,
    instance_labels,
    target_vector,
)

# Decision and InstanceUpdate are also re-exported from here for older imports;
# new code imports them from the package.
from featurestream.selectors.decisions import Decision, InstanceUpdate, ScoreKind, SelectedFeature
from featurestream.selectors.params import Params
from featurestream.selectors.targets import LEGACY, refuse_multiclass

# Largest dense block (float64 elements, 128 MiB) a sparse batch is expanded to at once.
_DENSE_BLOCK = 1 << 24
# Values of the instances a batch-invariant selector learns between two checkpoints.
_CHECKED_BLOCK = 1 << 20

#: A caller's hook into a long batch: called with how many of the batch's items
#: (columns, or instances) are complete; it may raise to stop the batch (the
#: engine's time budget). The selector's state is then left to the caller to restore.
Checkpoint = Callable[[int], None]

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float64]
JSON = Any

StreamKind = Literal["features", "instances"]

P = TypeVar("P", bound=Params)
S = TypeVar("S")


class Selector(ABC, Generic[P, S]):
    """Behaviour common to both stream kinds."""

    name: ClassVar[str]
    kind: ClassVar[StreamKind]
    params_type: ClassVar[type[Params]]
    state_type: ClassVar[type[Any]]
    # State fields that status() reports after the shared counters, in this order.
    status_fields: ClassVar[tuple[str, ...]] = ()
    # What the scores of the selection mean: ``score``, or, when a parameter decides
    # it, ``score_by`` = (that parameter, {its value: ScoreKind}).
    score: ClassVar[ScoreKind]
    score_by: ClassVar[tuple[str, Mapping[str, ScoreKind]] | None] = None

    def __init__(self, params: P, state: S) -> None:
        self.params = params
        self.state = state
        self._checkpoint: Checkpoint | None = None

    def checkpoint(self, done: int) -> None:
        """Between the items of a batch (and inside a long one): ``done`` items are complete.

        Selectors call it with the batch-relative count of items they finished;
        it does nothing unless the caller of ``learn_*`` passed a checkpoint.
        """
        if self._checkpoint is not None:
            self._checkpoint(done)

    @contextmanager
    def _checked(self, checkpoint: Checkpoint | None, offset: int = 0) -> Iterator[None]:
        """``checkpoint`` in force for one call, counting items from ``offset``."""
        outer = self._checkpoint
        if checkpoint is not None and offset:
            base = checkpoint
            checkpoint = lambda done: base(offset + done)  # noqa: E731
        self._checkpoint = checkpoint
        try:
            yield
        finally:
            self._checkpoint = outer

    @classmethod
    def resume(cls, params: P, state: S) -> Self:
        """Rebuild a selector from a snapshot (no copy: the caller hands over the state)."""
        return cls(params, state)

    def snapshot(self) -> S:
        """The complete state. States are immutable values, so this is safe to keep."""
        return self.state

    @abstractmethod
    def selected_features(self) -> tuple[SelectedFeature, ...]:
        """The current selection, in the selector's own order, with scores."""

    def selected(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.selected_features())

    @abstractmethod
    def counters(self) -> dict[str, JSON]:
        """The counters every selector of this stream kind reports."""

    def status(self) -> dict[str, JSON]:
        """The selector's counters (JSON-compatible values).

        The kind's shared counters, then the State fields named in
        ``status_fields``, then ``warnings`` when there are any; selectors
        with derived counters extend this.
        """
        s = self.state
        return with_warnings(
            {**self.counters(), **{k: getattr(s, k) for k in self.status_fields}}, self.warnings()
        )

    def warnings(self) -> list[dict[str, str]]:
        """What the status warns about now: a list of ``{code, message}`` (API.md, status)."""
        return []

    @classmethod
    def score_kind(cls, params: Params) -> ScoreKind:
        """What the scores of the selection mean with ``params``."""
        if cls.score_by is not None:
            name, kinds = cls.score_by
            return kinds[getattr(params, name)]
        return cls.score

    @classmethod
    def decision_score_kind(cls, params: Params) -> ScoreKind | None:
        """What the scores of the decisions mean (None: this kind of stream has none)."""
        return None

    @classmethod
    def test_params(cls) -> list[dict[str, Any]]:
        """Parameter sets the generic contract suite runs this selector with."""
        return [{}]

    @classmethod
    def requires_discrete(cls, params: Params) -> bool:
        """True when the data must be integer codes (discrete tests)."""
        return False


def with_warnings(status: dict[str, JSON], warnings: list[dict[str, str]]) -> dict[str, JSON]:
    """``status`` with its ``warnings`` last, when there are any."""
    if warnings:
        status["warnings"] = warnings
    return status


class FeatureSelector(Selector[P, S]):
    """A selector over a stream of feature columns (fixed instances, target y).

    States keep the target as ``y``, the selection as ``selected`` and the
    counters ``features_seen``, ``features_accepted``, ``features_rejected``
    (and ``features_evicted`` when members can leave).
    """

    kind: ClassVar[StreamKind] = "features"
    uses_groups: ClassVar[bool] = False
    # True when _learn_batch takes scipy.sparse (b, n) input as it is.
    accepts_sparse: ClassVar[bool] = False
    # The State's per-member scores, parallel to ``selected``.
    score_field: ClassVar[str] = "dep"
    # What a decision's score means, when not what the selection's does (Grafting).
    decision_score: ClassVar[ScoreKind | None] = None

    @classmethod
    def decision_score_kind(cls, params: Params) -> ScoreKind | None:
        return cls.decision_score or cls.score_kind(params)

    # True when the selector has multi-class rules (docs/algorithms.md, "Targets").
    accepts_multiclass: ClassVar[bool] = True

    @classmethod
    def start(cls, params: P, y: npt.ArrayLike, n_classes: int = 0) -> Self:
        """A new stream over target ``y``.

        ``n_classes`` is K >= 3 for a multi-class target, whose ``y`` then holds
        the class codes 0..K-1 (``selectors/targets.py``); 0 for one target column.
        """
        y_arr = target_vector(y)
        if n_classes and not cls.accepts_multiclass:
            refuse_multiclass(cls.name, n_classes)
        cls.check_target(params, y_arr)
        if n_classes:
            return cls(params, cls.multiclass_state(params, y_arr, n_classes))
        return cls(params, cls.initial_state(params, y_arr))

    @classmethod
    def multiclass_state(cls, params: P, y: Vector, n_classes: int) -> S:
        """The initial state over a multi-class target (class codes y, K = n_classes)."""
        return replace(cls.initial_state(params, y), n_classes=n_classes)  # type: ignore[type-var]

    @classmethod
    def check_target(cls, params: P, y: Vector) -> None:
        """Selector-specific checks of the target (e.g. binary labels); raise InvalidInput."""
        if cls.requires_discrete(params) and np.unique(y).shape[0] > 2:
            # A class target is coded by the tests themselves (discrete_target);
            # a continuous one must already hold codes.
            check_codes(y[None, :], field="target")

    @classmethod
    def requires_binary_target(cls, params: Params) -> bool:
        """True when the target must be binary labels (e.g. a logistic loss)."""
        return False

    @classmethod
    @abstractmethod
    def initial_state(cls, params: P, y: Vector) -> S: ...

    @property
    def n_instances(self) -> int:
        """Rows of every column: the target's length."""
        return int(self.state.y.shape[0])  # type: ignore[attr-defined]

    def selected_features(self) -> tuple[SelectedFeature, ...]:
        s: Any = self.state
        scores = getattr(s, self.score_field)
        return tuple(
            SelectedFeature(name, float(v)) for name, v in zip(s.selected, scores, strict=True)
        )

    def counters(self) -> dict[str, JSON]:
        """The counters every feature-stream status reports, from the State's fields."""
        s: Any = self.state
        return {
            "features_seen": s.features_seen,
            "features_accepted": s.features_accepted,
            "features_rejected": s.features_rejected,
            "features_evicted": getattr(s, "features_evicted", 0),
            "selected_count": len(s.selected),
        }

    def counted(self, b: int, accepted: int, evicted: int) -> dict[str, Any]:
        """The State's feature counters after a batch of b arrivals (``replace`` keywords)."""
        s: Any = self.state
        return {
            "features_seen": s.features_seen + b,
            "features_accepted": s.features_accepted + accepted,
            "features_rejected": s.features_rejected + b - accepted,
            "features_evicted": s.features_evicted + evicted,
        }

    def learn_features(
        self,
        names: Sequence[str],
        X: npt.ArrayLike,
        groups: Sequence[str | None] | None = None,
        *,
        checkpoint: Checkpoint | None = None,
    ) -> list[Decision]:
        """Apply b arriving columns in order; X is ``(b, n)`` feature-major.

        Validates the whole batch first (all or nothing), then decides. The
        decisions equal those of b calls with one column each. ``X`` may be a
        scipy.sparse matrix; selectors that do not declare ``accepts_sparse``
        receive it densified, a bounded number of columns at a time.
        ``checkpoint`` is called between columns (see :meth:`checkpoint`); when
        it raises, the batch stops and the state is left to the caller to restore.
        """
        names = list(names)
        A, _, sparse = feature_batch(names, X, self.n_instances, groups)
        if self.requires_discrete(self.params):
            check_codes(A, field="features", names=names)
        self.check_groups(names, groups)
        if not names:
            return []
        if not sparse or self.accepts_sparse:
            with self._checked(checkpoint):
                return self._learn_batch(names, A, groups)
        if self.uses_groups:
            with self._checked(checkpoint):
                return self._learn_batch(names, A.toarray(), groups)
        # Densify a bounded block of columns at a time; batches decide exactly as
        # their items, so the blocks change nothing but peak memory.
        step = max(1, _DENSE_BLOCK // max(1, A.shape[1]))
        out: list[Decision] = []
        for lo in range(0, len(names), step):
            with self._checked(checkpoint, lo):
                out += self._learn_batch(names[lo : lo + step], A[lo : lo + step].toarray(), None)
        return out

    def learn_feature(self, name: str, column: npt.ArrayLike, group: str | None = None) -> Decision:
        """Apply one arriving column."""
        return self.learn_features(
            [name], np.asarray(column)[None, :], None if group is None else [group]
        )[0]

    def check_groups(self, names: Sequence[str], groups: Sequence[str | None] | None) -> None:
        """Group-aware selectors validate group structure here (raise InvalidInput)."""

    @abstractmethod
    def _learn_batch(
        self, names: list[str], X: Matrix, groups: Sequence[str | None] | None
    ) -> list[Decision]:
        """Decide a validated batch, in order."""


class InstanceSelector(Selector[P, S]):
    """A selector over a stream of instances in a fixed feature space.

    States keep the feature names as ``feature_names`` and the count of
    instances learned as ``instances_seen``.
    """

    kind: ClassVar[StreamKind] = "instances"
    supervised: ClassVar[bool] = True
    # True when _learn_batch takes a canonical scipy.sparse CSR matrix as it is.
    accepts_sparse: ClassVar[bool] = False
    # True when one batch of m instances equals m batches of one (OFS); FSDS's
    # sketch depends on the batch boundaries by definition (docs/algorithms.md, FSDS).
    batch_invariant: ClassVar[bool] = True

    # True when the selector has multi-class rules (docs/algorithms.md, "Targets").
    accepts_multiclass: ClassVar[bool] = False

    @classmethod
    def start(cls, params: P, feature_names: Sequence[str], target_type: str = "auto") -> Self:
        """A new stream; a supervised one has a ``target_type`` (docs/algorithms.md,
        "Targets"). ``LEGACY`` ("") is the rule of streams stored before target types:
        numeric binary labels only."""
        names = feature_names_tuple(feature_names)
        state = cls.initial_state(params, names)
        if target_type != LEGACY and cls.supervised:
            state = replace(state, target_type=target_type)  # type: ignore[type-var]
        return cls(params, state)

    @classmethod
    @abstractmethod
    def initial_state(cls, params: P, feature_names: tuple[str, ...]) -> S: ...

    @property
    def feature_names(self) -> tuple[str, ...]:
        names: tuple[str, ...] = self.state.feature_names  # type: ignore[attr-defined]
        return names

    @property
    def instances_seen(self) -> int:
        """The stream's count of instances (those before a drift reset included)."""
        s: Any = self.state
        return int(s.instances_seen) + drift.offset(getattr(s, "watch", ()))

    def counters(self) -> dict[str, JSON]:
        """The counter every instance-stream status reports (and the target, when typed)."""
        out: dict[str, JSON] = {"instances_seen": self.instances_seen}
        target_type = getattr(self.state, "target_type", LEGACY)
        if target_type != LEGACY:
            out["target_type"] = target_type
            if target_type != "continuous":
                out["classes"] = list(self.state.classes)  # type: ignore[attr-defined]
        return out

    def learn_instances(
        self,
        X: npt.ArrayLike,
        y: npt.ArrayLike | None = None,
        *,
        checkpoint: Checkpoint | None = None,
    ) -> InstanceUpdate:
        """Apply a batch of m instances (``X`` is ``(m, d)``), validated all or nothing.

        ``X`` may be a scipy.sparse matrix; selectors that do not declare
        ``accepts_sparse`` receive it densified. With a ``checkpoint``, a
        batch-invariant selector learns a long batch in blocks and calls it
        between them (see :meth:`checkpoint`); the others, whose batch is one
        computation, call it where they can.
        """
        A, sparse = instance_batch(X, len(self.feature_names))
        y_arr: Any = None
        if y is not None and getattr(self.state, "target_type", LEGACY) != LEGACY:
            # A stream with a target type: labels may be strings (selectors/targets.py).
            y_arr = label_list(y, A.shape[0])
        elif y is not None:
            y_arr = instance_labels(y, A.shape[0])
        elif self.supervised:
            raise InvalidInput(f"{self.name} needs labels y for every instance.", field="y")
        if sparse and not self.accepts_sparse:
            A = A.toarray()
        elif not sparse:
            A = np.ascontiguousarray(A)
        if getattr(self.params, "drift", "none") == "none" or A.shape[0] == 0:
            return self._learn_rows(A, y_arr, checkpoint)
        return drift.learn_watched(
            self, A, y_arr, lambda X, y, start: self._learn_rows(X, y, checkpoint, start)
        )

    def _learn_rows(
        self, A: Matrix, y: Any, checkpoint: Checkpoint | None, start: int = 0
    ) -> InstanceUpdate:
        """Learn validated rows; ``start``: their offset in the request's batch."""
        m = A.shape[0]
        step = max(1, _CHECKED_BLOCK // max(1, A.shape[1]))
        if checkpoint is None or not self.batch_invariant or m <= step:
            with self._checked(checkpoint, start):
                return self._learn_batch(A, y)
        # A batch-invariant selector learns the blocks exactly as the whole batch.
        before = self.selected()
        parts: list[InstanceUpdate] = []
        for lo in range(0, m, step):
            checkpoint(start + lo)
            labels = None if y is None else y[lo : lo + step]
            with self._checked(checkpoint, start + lo):
                parts.append(self._learn_batch(A[lo : lo + step], labels))
        return InstanceUpdate.joined(parts, before != self.selected())

    @abstractmethod
    def _learn_batch(self, X: Matrix, y: Vector | None) -> InstanceUpdate: ...


__all__ = [
    "JSON",
    "Checkpoint",
    "Decision",
    "FeatureSelector",
    "InstanceSelector",
    "InstanceUpdate",
    "Matrix",
    "Selector",
    "StreamKind",
    "Vector",
    "with_warnings",
]
