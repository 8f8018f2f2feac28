"""Request and response models (Base/Create/Public naming). Lists become arrays at this edge."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    PlainValidator,
    WithJsonSchema,
    model_validator,
)

from featurestream.api.producers import PRODUCER_MAX_LENGTH, PRODUCER_PATTERN
from featurestream.api.tenancy import STREAM_ID_PATTERN, reachable_stream_id

# The bounds below are also checked by the fast reader of JSON bodies (jsonbodies.py).
NAME_MAX_LENGTH = 1024

# Numbers are strict: "1.5" (a string) or true are errors, not coerced.
Number = Annotated[float, Field(strict=True)]
# One rule for every channel (api/producers.py): the same pattern, anchored at both ends.
Producer = Annotated[
    str, Field(min_length=1, max_length=PRODUCER_MAX_LENGTH, pattern=PRODUCER_PATTERN)
]
Name = Annotated[str, Field(min_length=1, max_length=NAME_MAX_LENGTH)]
Seq = Annotated[int, Field(ge=1, strict=True)]


def _whole(v: Any) -> Any:
    """A float with no fractional part as the integer it spells (``80.0``: 80).

    JSON has one number type, and the schema's ``integer`` (JSON Schema 2020-12)
    is any number without a fraction: a body may spell one either way. Other
    values (``80.5``, ``true``, ``"80"``) are left to the strict check.
    """
    return int(v) if type(v) is float and v.is_integer() else v


# The integers of HTTP bodies: strict, but 80.0 is 80 (see _whole).
BodySeq = Annotated[int, Field(ge=1, strict=True), BeforeValidator(_whole)]
RowIndex = Annotated[int, Field(strict=True, ge=0), BeforeValidator(_whole)]


LABEL_KEY_MAX = 64
LABEL_VALUE_MAX = 256
LABELS_MAX = 32
#: Bookkeeping labels of a stream: a flat map of strings (``GET /v1/streams?label=k:v``).
_LABEL_KEY = r"^[^:\x00-\x1f]+$"
_LABEL_VALUE = r"^[^\x00-\x1f]*$"
StreamLabels = Annotated[
    dict[
        Annotated[str, Field(min_length=1, max_length=LABEL_KEY_MAX, pattern=_LABEL_KEY)],
        Annotated[str, Field(max_length=LABEL_VALUE_MAX, pattern=_LABEL_VALUE)],
    ],
    Field(max_length=LABELS_MAX),
    # Every key is checked (pydantic's own schema would leave other keys' values open).
    WithJsonSchema(
        {
            "type": "object",
            "maxProperties": LABELS_MAX,
            "propertyNames": {"minLength": 1, "maxLength": LABEL_KEY_MAX, "pattern": _LABEL_KEY},
            "additionalProperties": {
                "type": "string",
                "maxLength": LABEL_VALUE_MAX,
                "pattern": _LABEL_VALUE,
            },
        }
    ),
]
#: Seconds without a write after which a stream and all its keys expire (1 s to 10 years).
TtlSeconds = Annotated[float, Field(ge=1, le=10 * 365 * 86400, allow_inf_nan=False)]


def _label(v: Any) -> float | str:
    """A number (not a boolean) or a non-empty string of at most NAME_MAX_LENGTH characters."""
    if isinstance(v, str):
        if not 1 <= len(v) <= NAME_MAX_LENGTH:
            raise ValueError(f"a label is 1 to {NAME_MAX_LENGTH} characters")
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            return float(v)
        except OverflowError:  # an integer beyond float64
            raise ValueError("a label is a number within float64's range") from None
    raise ValueError("a label is a number or a string")


# A class label or target value: a number, or a string (class names). One
# validator, so an error names the item (``target.1``), not a member of a union.
Label = Annotated[
    Any,
    PlainValidator(_label),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string", "minLength": 1}]}),
]
# A list of labels: all numbers, or all strings (a mix is refused).
LABEL_LIST_SCHEMA: dict[str, list[dict[str, Any]]] = {
    "anyOf": [
        {"type": "array", "items": {"type": "number"}},
        {"type": "array", "items": {"type": "string", "minLength": 1}},
    ]
}
Labels = Annotated[list[Label], WithJsonSchema(LABEL_LIST_SCHEMA)]
TargetLabels = Annotated[
    list[Label],
    WithJsonSchema({"anyOf": [dict(b, minItems=1) for b in LABEL_LIST_SCHEMA["anyOf"]]}),
]
TargetType = Literal["auto", "continuous", "binary", "multiclass"]


class _In(BaseModel):
    """A document a client sends (a request body, a WebSocket frame): what fails to
    validate against one of these is the client's (422); against any other model, the
    server's own (500)."""

    model_config = ConfigDict(extra="forbid")


def is_input_model(title: str) -> bool:
    """Whether ``title`` (a pydantic ``ValidationError``'s) names a document a client sends."""
    pending, names = list(_In.__subclasses__()), set()
    while pending:
        cls = pending.pop()
        names.add(cls.__name__)
        pending += cls.__subclasses__()
    return title in names


class StreamCreate(_In):
    id: (
        Annotated[str, Field(pattern=STREAM_ID_PATTERN), AfterValidator(reachable_stream_id)] | None
    ) = None
    algorithm: str
    params: dict[str, Any] = Field(default_factory=dict)
    target: TargetLabels | None = Field(
        None,
        min_length=1,
        description="Feature streams: the target y, numbers or class labels (strings).",
    )
    target_type: TargetType = Field(
        "auto",
        description="auto (resolved once from the target, or from an instance stream's "
        "first labelled batch, as scikit-learn's type_of_target), continuous, binary or "
        "multiclass. See docs/algorithms.md, Targets.",
    )
    feature_names: list[str] | None = Field(None, min_length=1)
    labels: StreamLabels | None = None
    ttl_seconds: TtlSeconds | None = None


class StreamPublic(BaseModel):
    id: str
    algorithm: str
    kind: Literal["features", "instances"]
    params: dict[str, Any]
    n_instances: int | None = None
    n_features: int | None = None
    #: An instance stream's feature space, in order (not in the list of streams).
    feature_names: list[str] | None = None
    labels: dict[str, str] | None = None
    ttl_seconds: float | None = None
    target_type: str | None = Field(
        None, description="Supervised streams: the resolved target type (auto until resolved)."
    )
    classes: list[float | str] | None = Field(
        None, description="Class targets: the labels as given, sorted (seen so far)."
    )
    version: int
    created_at: str
    updated_at: str

    def document(self) -> dict[str, Any]:
        """The resource as sent: the optional extras only when the stream has them."""
        out = self.model_dump()
        for key in ("feature_names", "labels", "ttl_seconds"):
            if out[key] is None:
                del out[key]
        return out


class StreamsPublic(BaseModel):
    streams: list[StreamPublic]


class AlgorithmPublic(BaseModel):
    """One algorithm a stream can be created with.

    ``supervised`` says whether its streams learn from labels: true for every
    feature-stream algorithm (the target given at creation) and for the
    instance-stream algorithms whose instances carry a label in the last column
    (``ofs``, ``fires``); false for ``fsds`` and ``nrfs``, whose instances are rows
    of features only.

    ``score_kind`` says what the ``score`` of the selection means (e.g.
    ``abs_correlation``, ``symmetrical_uncertainty``, ``g2_per_df``, ``p_value``,
    ``weight``) with the default parameters, and ``higher_is_better`` which end
    ranks first; ``score_by_magnitude`` means the score is signed (a model's
    weight) and its absolute value ranks. ``score_kind_by`` gives the kind for
    each value of the parameter that decides it (``{"test": {"su":
    "symmetrical_uncertainty", ...}}``), or null. ``decision_score_kind`` and
    ``decision_higher_is_better`` say the same of the ``score`` of a decision
    (feature streams; null for instance streams): for Grafting it is the gradient
    test's ``abs_gradient``, where its selection shows each member's ``weight``.
    Every property of ``params_schema`` has a ``description``.
    """

    name: str
    kind: Literal["features", "instances"]
    title: str
    summary: str
    params_schema: dict[str, Any]
    defaults: dict[str, Any]
    supports_groups: bool
    supervised: bool
    score_kind: str
    higher_is_better: bool
    score_by_magnitude: bool
    score_kind_by: dict[str, dict[str, str]] | None = None
    decision_score_kind: str | None = None
    decision_higher_is_better: bool | None = None


class AlgorithmsPublic(BaseModel):
    algorithms: list[AlgorithmPublic]


# The two shapes of a column, as _dense_or_sparse checks them.
_DENSE_OR_SPARSE: list[JsonValue] = [
    {
        "required": ["values"],
        "properties": {
            "values": {"type": "array"},
            "indices": {"type": "null"},
            "data": {"type": "null"},
        },
    },
    {
        "required": ["indices", "data"],
        "properties": {
            "values": {"type": "null"},
            "indices": {"type": "array"},
            "data": {"type": "array"},
        },
    },
]


class FeatureIn(_In):
    """A dense column (``values``) or a sparse one (``indices`` + ``data``; other rows are 0)."""

    model_config = ConfigDict(json_schema_extra={"oneOf": _DENSE_OR_SPARSE})

    name: Name
    values: list[Number] | None = None
    indices: list[RowIndex] | None = None
    data: list[Number] | None = None
    group: Name | None = None

    @model_validator(mode="after")
    def _dense_or_sparse(self) -> FeatureIn:
        dense = self.values is not None
        sparse = self.indices is not None or self.data is not None
        if dense == sparse:
            raise ValueError("give either 'values' or both 'indices' and 'data'")
        if sparse and (self.indices is None or self.data is None):
            raise ValueError("a sparse column needs both 'indices' and 'data'")
        if sparse and len(self.indices or ()) != len(self.data or ()):
            raise ValueError("'indices' and 'data' must have the same length")
        return self


class FeatureBatch(_In):
    producer: Producer = "default"
    seq: BodySeq | None = None
    features: list[FeatureIn]


class GroupIn(_In):
    name: Name
    features: list[FeatureIn] = Field(min_length=1)


class GroupBatch(_In):
    producer: Producer = "default"
    seq: BodySeq | None = None
    groups: list[GroupIn]


class InstanceBatch(_In):
    producer: Producer = "default"
    seq: BodySeq | None = None
    X: list[list[Number]] = Field(min_length=1)
    y: Labels | None = Field(
        None, description="Labels, one per row: numbers, or class labels (strings)."
    )


class DecisionPublic(BaseModel):
    name: str
    accepted: bool
    evicted: list[str]
    reason: str | None
    score: float | None
    by: str | None = None
    group: str | None = None


class WarningPublic(BaseModel):
    code: str
    message: str


class FeaturesAppended(BaseModel):
    version: int
    seq: int | None
    producer: str
    decisions: list[DecisionPublic]
    selected: list[str]
    # Present on the request that raised a status warning (e.g. untestable tests).
    warnings: list[WarningPublic] | None = None


class InstancesAppended(BaseModel):
    version: int
    seq: int | None
    producer: str
    instances_seen: int
    selected: list[str]


class SelectedFeaturePublic(BaseModel):
    name: str
    score: float | None
    group: str | None = None


class SelectionPublic(BaseModel):
    version: int
    features: list[SelectedFeaturePublic]
    updated_at: str


class EventPublic(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    version: int
    seq: int | None
    producer: str | None
    # The commit time; null for events stored before the log kept it.
    at: str | None = None
    # ``drift``: a detection of the stream's drift watch (``detector``,
    # ``instances_seen``, ``statistic``, ``moved``, ``reset``).
    type: Literal["accepted", "rejected", "evicted", "batch", "drift"]
    names: list[str] | None = None
    reason: str | None = None


class EventsPublic(BaseModel):
    events: list[EventPublic]
    next: str | None


class StatusPublic(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    algorithm: str
    kind: str
    version: int
    updated_at: str


class Health(BaseModel):
    status: str


# --------------------------------------------------------------------------- WebSocket


class InstanceFrame(_In):
    """A text frame of ``/v1/streams/{id}/ws``: a batch ``X`` (with ``y``) or one ``x``.

    ``seq``, when given, must equal the frame's number on the connection.
    """

    type: Literal["instances"] | None = None
    seq: Seq | None = None
    X: list[list[Number]] | None = Field(None, min_length=1)
    x: list[Number] | None = Field(None, min_length=1)
    y: list[Label] | Label | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> InstanceFrame:
        if (self.X is None) == (self.x is None):
            raise ValueError("give either 'X' (a batch of rows) or 'x' (one instance)")
        if self.x is not None and isinstance(self.y, list):
            raise ValueError("with 'x' (one instance), 'y' is a single number")
        if self.X is not None and self.y is not None and not isinstance(self.y, list):
            raise ValueError("with 'X' (a batch), 'y' is a list with one label per row")
        return self


class AckMessage(BaseModel):
    """The frame numbered ``ack`` is committed; the state includes it."""

    type: Literal["ack"] = "ack"
    ack: int
    version: int
    instances_seen: int


class SelectionMessage(BaseModel):
    """The selected set as of ``version`` (sent when it changes, and once on connect).

    The message sent on connect also names the connection's ``producer`` (one of
    its own, ``ws-<uuid>``, when the query named none) and the ``seq`` of its
    first frame.
    """

    type: Literal["selection"] = "selection"
    selected: list[str]
    version: int
    features: list[SelectedFeaturePublic]
    producer: str | None = None
    seq: int | None = None


class ErrorMessage(BaseModel):
    """A frame was refused (``seq``; null for the connection itself): an RFC 9457 problem."""

    type: Literal["error"] = "error"
    error: dict[str, Any]
    seq: int | None


__all__ = [
    "AckMessage",
    "AlgorithmPublic",
    "AlgorithmsPublic",
    "DecisionPublic",
    "ErrorMessage",
    "EventPublic",
    "EventsPublic",
    "FeatureBatch",
    "FeatureIn",
    "FeaturesAppended",
    "GroupBatch",
    "GroupIn",
    "Health",
    "InstanceBatch",
    "InstanceFrame",
    "InstancesAppended",
    "SelectedFeaturePublic",
    "SelectionMessage",
    "SelectionPublic",
    "StatusPublic",
    "StreamCreate",
    "StreamPublic",
    "StreamsPublic",
    "is_input_model",
]
