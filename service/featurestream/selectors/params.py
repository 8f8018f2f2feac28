"""Selector parameters: a declarative constraint table and the Params base.

Each selector's parameters are a frozen, keyword-only dataclass. A field with
no default is required; every field may name a Constraint in the class's
``constraints`` table, checked at construction with scikit-learn's message
shape ("The 'alpha' parameter of SAOLA must be a float in the range (0, 1).
Got 1.5 instead."). The same table gives each parameter's JSON Schema.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar, Literal, Self

from featurestream.errors import InvalidParameter


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


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


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
        v: float
        if self.type is int:
            v = int(value)  # exact: compared with the bounds as it is, never overflows
            if not _INT64_MIN <= v <= _INT64_MAX:
                return False  # the kernels compute with int64
        else:
            try:
                v = float(value)
            except OverflowError:  # an int beyond float64
                return False
            # NaN is in no interval; an infinity is not a number a state can be
            # computed with (an unbounded side is open: "[0, inf)").
            if not math.isfinite(v):
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


@dataclass(frozen=True, kw_only=True)
class Params:
    """Base of every selector's parameters.

    Subclasses are frozen, keyword-only dataclasses with a ``constraints``
    table mapping each field name to its Constraint; a field without a default
    is required. ``Params.from_mapping`` checks unknown names, values and
    missing required parameters, and fills in defaults.
    """

    constraints: ClassVar[Mapping[str, Constraint]] = {}
    # What each parameter means, one short phrase per field (GET /v1/algorithms shows
    # it as the ``description`` of the parameter's schema; the contract suite checks
    # every field has one). A new parameter adds its line here, beside its constraint.
    descriptions: ClassVar[Mapping[str, str]] = {}
    algorithm: ClassVar[str] = "selector"
    # Parameters added after streams were already stored, with the value those
    # streams ran with: ``from_stored`` gives it to a stored mapping without the
    # key, so an older stream keeps its behaviour (new streams get the default).
    legacy: ClassVar[Mapping[str, Any]] = {}

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            rule = self._checked(f.name, value)
            if rule is not None:
                object.__setattr__(self, f.name, rule.coerce(value))
        self._check()

    @classmethod
    def _checked(cls, name: str, value: Any) -> Constraint | None:
        """The rule of parameter ``name`` once ``value`` passed it; raise InvalidParameter."""
        rule = cls.constraints.get(name)
        if rule is not None and not rule.accepts(value):
            raise InvalidParameter(
                f"The {name!r} parameter of {cls.algorithm} must be "
                f"{rule.describe()}. Got {value!r} instead.",
                parameter=name,
            )
        return rule

    def _check(self) -> None:
        """Cross-parameter checks; raise InvalidParameter."""

    @classmethod
    def required_fields(cls) -> tuple[str, ...]:
        """Names of the parameters without a default, in field order."""
        return tuple(
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> Self:
        values = dict(values or {})
        fields = dataclasses.fields(cls)
        names = {f.name for f in fields}
        for key in values:
            if key not in names:
                raise InvalidParameter(
                    f"{cls.algorithm} has no parameter {key!r}; expected one of {sorted(names)}.",
                    parameter=str(key),
                )
        # A required parameter given as None counts as missing. The values that
        # were given are checked first, in field order, as construction would.
        missing = [name for name in cls.required_fields() if values.get(name) is None]
        if missing:
            for f in fields:
                if f.name in values and f.name not in missing:
                    cls._checked(f.name, values[f.name])
            name = missing[0]
            rule = cls.constraints.get(name)
            expected = "given" if rule is None else rule.describe()
            raise InvalidParameter(
                f"The {name!r} parameter of {cls.algorithm} is required: {expected}.",
                parameter=name,
            )
        return cls(**values)

    @classmethod
    def from_stored(cls, values: Mapping[str, Any] | None) -> Self:
        """Parameters as stored with a stream's state, by any earlier version.

        A parameter the stored mapping lacks takes its ``legacy`` value (the
        behaviour the stream had), else its default.
        """
        return cls.from_mapping(cls.with_legacy(values))

    @classmethod
    def with_legacy(cls, values: Mapping[str, Any] | None) -> dict[str, Any]:
        """``values`` with the ``legacy`` value of every parameter it lacks."""
        stored = dict(values or {})
        return {**{k: v for k, v in cls.legacy.items() if k not in stored}, **stored}

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        props: dict[str, Any] = {}
        required: list[str] = []
        for f in dataclasses.fields(cls):
            entry = dict(cls.constraints[f.name].schema()) if f.name in cls.constraints else {}
            if cls.descriptions.get(f.name):
                entry["description"] = cls.descriptions[f.name]
            if f.default is not dataclasses.MISSING:
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


__all__ = ["Boolean", "Constraint", "Interval", "NoneOr", "Params", "StrOptions"]
