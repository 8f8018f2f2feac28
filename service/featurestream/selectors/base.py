"""The selector protocol shared by every algorithm.

Each algorithm is three things (STYLE.md section 3):

* ``Params``: a frozen dataclass validated at construction against a
  declarative constraint table (``Interval``, ``StrOptions``, ``Boolean``),
  with scikit-learn's message shape.
* ``State``: a frozen dataclass of everything the selector knows: float64
  arrays, numbers, strings and tuples. ``codec.py`` turns it into bytes.
* ``Selector``: applies arrivals to its State. The core is synchronous, has no
  I/O and never reads a clock or a global random generator.

Feature columns travel feature-major: a batch of b columns over n instances is
a C-contiguous float64 array of shape ``(b, n)`` (see ``stats/columns.py``).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar, Generic, Literal, Self, TypeVar

import numpy as np
import numpy.typing as npt

from featurestream.errors import InvalidInput, InvalidParameter
from featurestream.stats.sparse import canonical_csr, is_sparse

# Largest dense block (float64 elements, 128 MiB) a sparse batch is expanded to at once.
_DENSE_BLOCK = 1 << 24

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float64]
JSON = Any

StreamKind = Literal["features", "instances"]


# --------------------------------------------------------------------------- params


class Constraint(ABC):
    """One allowed form of a parameter value."""

    @abstractmethod
    def accepts(self, value: Any) -> bool: ...

    @abstractmethod
    def describe(self) -> str: ...

    @abstractmethod
    def schema(self) -> dict[str, Any]: ...

    @abstractmethod
    def invalid_example(self) -> Any:
        """A value this constraint rejects (scikit-learn's generate_invalid_param_val)."""

    def coerce(self, value: Any) -> Any:
        return value


@dataclass(frozen=True)
class Interval(Constraint):
    """A real or integer interval; ``closed`` is "both", "left", "right" or "neither"."""

    type: type
    left: float | None
    right: float | None
    closed: Literal["both", "left", "right", "neither"] = "both"

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        if self.type is int:
            if not isinstance(value, Integral):
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                else:
                    return False
        elif not isinstance(value, Real):
            return False
        v = float(value)
        if math.isnan(v):
            return False
        if self.left is not None:
            if self.closed in ("both", "left") and v < self.left:
                return False
            if self.closed in ("right", "neither") and v <= self.left:
                return False
        if self.right is not None:
            if self.closed in ("both", "right") and v > self.right:
                return False
            if self.closed in ("left", "neither") and v >= self.right:
                return False
        return True

    def coerce(self, value: Any) -> Any:
        return int(value) if self.type is int else float(value)

    def describe(self) -> str:
        kind = "an int" if self.type is int else "a float"
        lo = "-inf" if self.left is None else _fmt(self.left)
        hi = "inf" if self.right is None else _fmt(self.right)
        lb = "[" if self.closed in ("both", "left") and self.left is not None else "("
        rb = "]" if self.closed in ("both", "right") and self.right is not None else ")"
        return f"{kind} in the range {lb}{lo}, {hi}{rb}"

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "integer" if self.type is int else "number"}
        if self.left is not None:
            key = "minimum" if self.closed in ("both", "left") else "exclusiveMinimum"
            out[key] = self.left
        if self.right is not None:
            key = "maximum" if self.closed in ("both", "right") else "exclusiveMaximum"
            out[key] = self.right
        return out

    def invalid_example(self) -> Any:
        if self.left is not None:
            return self.left - 1 if self.type is int else self.left - 1.0
        if self.right is not None:
            return self.right + 1 if self.type is int else self.right + 1.0
        return "not a number"


@dataclass(frozen=True)
class StrOptions(Constraint):
    options: tuple[str, ...]

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.options

    def describe(self) -> str:
        return "a str among {" + ", ".join(repr(o) for o in self.options) + "}"

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.options)}

    def invalid_example(self) -> Any:
        return "not-an-option"


@dataclass(frozen=True)
class Boolean(Constraint):
    def accepts(self, value: Any) -> bool:
        return isinstance(value, bool)

    def describe(self) -> str:
        return "a bool"

    def schema(self) -> dict[str, Any]:
        return {"type": "boolean"}

    def invalid_example(self) -> Any:
        return "yes"


@dataclass(frozen=True)
class NoneOr(Constraint):
    """The wrapped constraint, or None (an optional parameter)."""

    inner: Constraint

    def accepts(self, value: Any) -> bool:
        return value is None or self.inner.accepts(value)

    def coerce(self, value: Any) -> Any:
        return None if value is None else self.inner.coerce(value)

    def describe(self) -> str:
        return f"{self.inner.describe()} or None"

    def schema(self) -> dict[str, Any]:
        return {"anyOf": [self.inner.schema(), {"type": "null"}]}

    def invalid_example(self) -> Any:
        return self.inner.invalid_example()


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


@dataclass(frozen=True)
class Params:
    """Base of every selector's parameters.

    Subclasses are frozen dataclasses with defaults and a ``constraints`` table
    mapping each field name to its Constraint. ``Params.from_mapping`` checks
    unknown names and values, and fills in defaults.
    """

    constraints: ClassVar[Mapping[str, Constraint]] = {}
    algorithm: ClassVar[str] = "selector"
    # Fields that must be given although the dataclass needs a default (None).
    required: ClassVar[frozenset[str]] = frozenset()

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            rule = self.constraints.get(f.name)
            value = getattr(self, f.name)
            if rule is None:
                continue
            if not rule.accepts(value):
                raise InvalidParameter(
                    f"The {f.name!r} parameter of {self.algorithm} must be "
                    f"{rule.describe()}. Got {value!r} instead.",
                    parameter=f.name,
                )
            object.__setattr__(self, f.name, rule.coerce(value))
        for name in self.required:
            if getattr(self, name) is None:
                rule = self.constraints.get(name)
                expected = rule.inner.describe() if isinstance(rule, NoneOr) else "given"
                raise InvalidParameter(
                    f"The {name!r} parameter of {self.algorithm} is required: {expected}.",
                    parameter=name,
                )
        self._check()

    def _check(self) -> None:
        """Cross-parameter checks; raise InvalidParameter."""

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> Self:
        values = dict(values or {})
        names = {f.name for f in dataclasses.fields(cls)}
        for key in values:
            if key not in names:
                raise InvalidParameter(
                    f"{cls.algorithm} has no parameter {key!r}; expected one of {sorted(names)}.",
                    parameter=str(key),
                )
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        props: dict[str, Any] = {}
        required: list[str] = []
        for f in dataclasses.fields(cls):
            entry = dict(cls.constraints[f.name].schema()) if f.name in cls.constraints else {}
            if f.name in cls.required:
                # Required: the schema is the non-null form of its constraint.
                entry = entry.get("anyOf", [entry])[0]
                required.append(f.name)
            elif f.default is not dataclasses.MISSING:
                entry["default"] = f.default
            else:
                required.append(f.name)
            props[f.name] = entry
        schema: dict[str, Any] = {
            "type": "object",
            "properties": props,
            "additionalProperties": False,
        }
        if required:
            schema["required"] = required
        return schema


# --------------------------------------------------------------------------- decisions


class Reason(enum.StrEnum):
    """Why a feature was rejected or evicted; the strings of ALGORITHMS.md."""

    CONSTANT = "constant"
    IRRELEVANT = "irrelevant"
    REDUNDANT = "redundant"
    IRRELEVANT_GROUP = "irrelevant group"
    NOT_SIGNIFICANT = "not significant"
    GRADIENT_BELOW_LAMBDA1 = "gradient below lambda1"
    WEIGHT_SHRUNK_TO_ZERO = "weight shrunk to zero"
    MAX_FEATURES = "max_features"


@dataclass(frozen=True)
class Eviction:
    """A member of the selected set removed by a later arrival."""

    feature: str
    reason: Reason
    by: str | None = None


@dataclass(frozen=True)
class Decision:
    """The outcome of one arriving feature.

    ``score`` is the selector's measure of the feature (dep for SAOLA and
    OSFS, p-value for Alpha-investing, |gradient| for Grafting); ``by`` names
    the feature that made this one redundant.
    """

    feature: str
    accepted: bool
    reason: Reason | None = None
    by: str | None = None
    score: float | None = None
    evicted: tuple[Eviction, ...] = ()
    group: str | None = None

    def to_json(self) -> dict[str, Any]:
        # On the hot path (one per column): the reason is a str already (StrEnum),
        # and a non-finite score is left to the encoder, which writes null.
        out: dict[str, Any] = {
            "name": self.feature,
            "accepted": self.accepted,
            "evicted": [e.feature for e in self.evicted] if self.evicted else [],
            "reason": self.reason,
            "score": self.score,
        }
        if self.by is not None:
            out["by"] = self.by
        if self.group is not None:
            out["group"] = self.group
        return out


def _json_float(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return float(x)


@dataclass(frozen=True)
class SelectedFeature:
    name: str
    score: float | None = None
    group: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "score": _json_float(self.score)}
        if self.group is not None:
            out["group"] = self.group
        return out


@dataclass(frozen=True)
class InstanceUpdate:
    """Outcome of a batch of instances."""

    instances: int
    instances_seen: int
    predictions: tuple[int, ...] = ()
    mistakes: int = 0
    selection_changed: bool = False


# --------------------------------------------------------------------------- selectors

P = TypeVar("P", bound=Params)
S = TypeVar("S")


class Selector(ABC, Generic[P, S]):
    """Behaviour common to both stream kinds."""

    name: ClassVar[str]
    kind: ClassVar[StreamKind]
    params_type: ClassVar[type[Params]]
    state_type: ClassVar[type[Any]]

    def __init__(self, params: P, state: S) -> None:
        self.params = params
        self.state = state

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
    def status(self) -> dict[str, JSON]:
        """Counters for the stream's /status (JSON-compatible values)."""

    @classmethod
    def test_params(cls) -> list[dict[str, Any]]:
        """Parameter sets the generic contract suite runs this selector with."""
        return [{}]

    @classmethod
    def requires_discrete(cls, params: Params) -> bool:
        """True when the data must be integer codes (discrete tests)."""
        return False


class FeatureSelector(Selector[P, S]):
    """A selector over a stream of feature columns (fixed instances, target y)."""

    kind: ClassVar[StreamKind] = "features"
    uses_groups: ClassVar[bool] = False
    # True when _learn_batch takes scipy.sparse (b, n) input as it is.
    accepts_sparse: ClassVar[bool] = False

    @classmethod
    def start(cls, params: P, y: npt.ArrayLike) -> Self:
        y_arr = np.array(y, dtype=np.float64)
        if y_arr.ndim != 1 or y_arr.shape[0] < 1:
            raise InvalidInput("The target must be a non-empty 1-D array.", field="target")
        if not np.isfinite(y_arr).all():
            raise InvalidInput("The target contains NaN or infinite values.", field="target")
        cls.check_target(params, y_arr)
        return cls(params, cls.initial_state(params, y_arr))

    @classmethod
    def check_target(cls, params: P, y: Vector) -> None:
        """Selector-specific checks of the target (e.g. binary labels); raise InvalidInput."""
        if cls.requires_discrete(params):
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
        """Rows of every column: the target's length (States keep the target as ``y``)."""
        return int(self.state.y.shape[0])  # type: ignore[attr-defined]

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

    def learn_features(
        self,
        names: Sequence[str],
        X: npt.ArrayLike,
        groups: Sequence[str | None] | None = None,
    ) -> list[Decision]:
        """Apply b arriving columns in order; X is ``(b, n)`` feature-major.

        Validates the whole batch first (all or nothing), then decides. The
        decisions equal those of b calls with one column each. ``X`` may be a
        scipy.sparse matrix; selectors that do not declare ``accepts_sparse``
        receive it densified, a bounded number of columns at a time.
        """
        names = list(names)
        sparse = is_sparse(X)
        if sparse:
            A: Any = X.tocsr()  # type: ignore[union-attr]
            values = np.asarray(A.data, dtype=np.float64)
        else:
            # "+ 0.0" turns -0.0 into 0.0 (and copies): a column's state must not
            # depend on whether a zero arrived signed, or sparse (where it is absent).
            A = np.ascontiguousarray(np.asarray(X, dtype=np.float64)) + 0.0
            if A.ndim == 1:
                A = A[None, :]
            values = A
        if A.ndim != 2 or A.shape[0] != len(names):
            raise InvalidInput(
                f"Expected {len(names)} columns, got an array of shape {A.shape}.",
                field="features",
            )
        if A.shape[1] != self.n_instances:
            raise InvalidInput(
                f"Each column must have {self.n_instances} values (the target's length); "
                f"got {A.shape[1]}.",
                field="features",
            )
        if len(set(names)) != len(names):
            raise InvalidInput("Feature names within a request must be unique.", field="features")
        if not np.isfinite(values).all():
            if sparse:
                raise InvalidInput("A column contains NaN or infinite values.", field="features")
            bad = int(np.argmax(~np.isfinite(A).all(axis=1)))
            raise InvalidInput(
                f"Column {names[bad]!r} contains NaN or infinite values.",
                field=f"features[{bad}].values",
            )
        if groups is not None and len(groups) != len(names):
            raise InvalidInput("One group entry per feature is required.", field="groups")
        if self.requires_discrete(self.params):
            check_codes(values if sparse else A, field="features")
        self.check_groups(names, groups)
        if not names:
            return []
        if not sparse or self.accepts_sparse:
            return self._learn_batch(names, A, groups)
        if self.uses_groups:
            return self._learn_batch(names, A.toarray(), groups)
        # Densify a bounded block of columns at a time; batches decide exactly as
        # their items, so the blocks change nothing but peak memory.
        step = max(1, _DENSE_BLOCK // max(1, A.shape[1]))
        out: list[Decision] = []
        for lo in range(0, len(names), step):
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
    """A selector over a stream of instances in a fixed feature space."""

    kind: ClassVar[StreamKind] = "instances"
    supervised: ClassVar[bool] = True
    # True when _learn_batch takes a canonical scipy.sparse CSR matrix as it is.
    accepts_sparse: ClassVar[bool] = False
    # True when one batch of m instances equals m batches of one (OFS); FSDS's
    # sketch depends on the batch boundaries by definition (ALGORITHMS.md).
    batch_invariant: ClassVar[bool] = True

    @classmethod
    def start(cls, params: P, feature_names: Sequence[str]) -> Self:
        names = tuple(feature_names)
        if not names:
            raise InvalidInput("feature_names must not be empty.", field="feature_names")
        if len(set(names)) != len(names):
            raise InvalidInput("feature_names must be unique.", field="feature_names")
        return cls(params, cls.initial_state(params, names))

    @classmethod
    @abstractmethod
    def initial_state(cls, params: P, feature_names: tuple[str, ...]) -> S: ...

    @property
    @abstractmethod
    def feature_names(self) -> tuple[str, ...]: ...

    @property
    @abstractmethod
    def instances_seen(self) -> int: ...

    def learn_instances(self, X: npt.ArrayLike, y: npt.ArrayLike | None = None) -> InstanceUpdate:
        """Apply a batch of m instances (``X`` is ``(m, d)``), validated all or nothing.

        ``X`` may be a scipy.sparse matrix; selectors that do not declare
        ``accepts_sparse`` receive it densified.
        """
        sparse = is_sparse(X)
        A: Any
        if sparse:
            A = canonical_csr(X)
            values = A.data
        else:
            A = np.asarray(X, dtype=np.float64)
            if A.ndim == 1:
                A = A[None, :]
            values = A
        d = len(self.feature_names)
        if A.ndim != 2 or A.shape[1] != d:
            raise InvalidInput(
                f"Each instance must have {d} values; got an array of shape {A.shape}.",
                field="X",
            )
        if not np.isfinite(values).all():
            raise InvalidInput("X contains NaN or infinite values.", field="X")
        y_arr: Vector | None = None
        if y is not None:
            y_arr = np.asarray(y, dtype=np.float64).reshape(-1)
            if y_arr.shape[0] != A.shape[0]:
                raise InvalidInput(
                    f"Expected {A.shape[0]} labels, got {y_arr.shape[0]}.", field="y"
                )
            if not np.isfinite(y_arr).all():
                raise InvalidInput("y contains NaN or infinite values.", field="y")
        elif self.supervised:
            raise InvalidInput(f"{self.name} needs labels y for every instance.", field="y")
        if sparse:
            return self._learn_batch(A if self.accepts_sparse else A.toarray(), y_arr)
        return self._learn_batch(np.ascontiguousarray(A), y_arr)

    @abstractmethod
    def _learn_batch(self, X: Matrix, y: Vector | None) -> InstanceUpdate: ...


MAX_LEVELS = 1024


def check_codes(A: Matrix, *, field: str) -> None:
    """Discrete data must hold integer codes 0..L-1 (ALGORITHMS.md, discrete tests).

    L is capped at MAX_LEVELS: the tests build count tables of L_a x L_b cells per
    stratum, so one stray large code would otherwise allocate gigabytes, and a
    G2/chi2 test with that many degrees of freedom is never reliable anyway.
    """
    if A.size and (not np.all(A >= 0) or not np.all(np.floor(A) == A)):
        raise InvalidInput("Discrete tests need non-negative integer codes 0..L-1.", field=field)
    if A.size and A.max() >= MAX_LEVELS:
        raise InvalidInput(
            f"Discrete tests support at most {MAX_LEVELS} levels (codes 0..{MAX_LEVELS - 1}); "
            f"got a code of {A.max():g}.",
            field=field,
        )


def binary_labels(y: npt.ArrayLike, *, field: str = "y") -> Vector:
    """Map labels in {0, 1} or {-1, +1} to {-1, +1}; anything else is an error."""
    arr = np.asarray(y, dtype=np.float64)
    ok = (arr == 0) | (arr == 1) | (arr == -1)
    if not ok.all() or ((arr == 0).any() and (arr == -1).any()):
        raise InvalidInput("Labels must be in {0, 1} or {-1, +1}.", field=field)
    return np.where(arr == 0, -1.0, arr)


__all__ = [
    "JSON",
    "Boolean",
    "Constraint",
    "Decision",
    "Eviction",
    "FeatureSelector",
    "InstanceSelector",
    "InstanceUpdate",
    "Interval",
    "Matrix",
    "NoneOr",
    "Params",
    "Reason",
    "SelectedFeature",
    "Selector",
    "StrOptions",
    "StreamKind",
    "Vector",
    "binary_labels",
    "check_codes",
]
