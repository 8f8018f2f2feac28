"""Messages from a log, and what each asks of a stream.

A message carries what an HTTP write carries (docs/api.md, "Consuming from a
log"): the stream id, the kind of write (``features``, ``groups`` or
``instances``), the body's media type and the body, and optionally the JSON
body of ``POST /v1/streams`` that creates the stream when it does not exist
yet. Its partition is its producer and its position in the log its seq.

Decoding checks everything before anything is applied, as for HTTP: a
message that cannot be decoded is refused with the problem an HTTP write of
the same body would get.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from featurestream.api import arrays, jsonbodies, npz
from featurestream.api.bodies import NPY_MEDIA_TYPE, NPZ_MEDIA_TYPE
from featurestream.api.schemas import StreamCreate
from featurestream.api.tenancy import valid_stream_id
from featurestream.config import Settings
from featurestream.engine import wire
from featurestream.errors import InvalidInput, UnsupportedMediaType

JSON_MEDIA_TYPE = "application/json"
KINDS = ("features", "groups", "instances")
MEDIA_TYPES = (JSON_MEDIA_TYPE, NPY_MEDIA_TYPE, NPZ_MEDIA_TYPE)


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a log, as its source read it.

    ``partition`` is the producer the message writes as (``redis:<key>``,
    ``nats:<stream>``, ``kafka:<topic>:<partition>``), ``position`` its seq
    (increasing in the partition, possibly skipping), ``ref`` the log's own
    name of it (a Redis entry id, an offset), kept with a dead letter.
    """

    partition: str
    position: int
    ref: str
    stream: str | None
    kind: str | None
    content_type: str | None
    body: bytes
    create: bytes | None = None


def media_type(message: Message) -> str:
    """The body's media type (JSON when the message names none), checked."""
    kind = (message.content_type or JSON_MEDIA_TYPE).split(";")[0].strip().lower()
    if kind not in MEDIA_TYPES:
        raise UnsupportedMediaType(kind, MEDIA_TYPES)
    return kind


def checked(message: Message) -> tuple[str, str]:
    """The message's stream id and kind of write, or InvalidInput naming the field."""
    if message.stream is None or not valid_stream_id(message.stream):
        shown = "none" if message.stream is None else repr(message.stream[:40])
        raise InvalidInput(
            f"A message names its stream in 'stream' (1 to 128 of A-Z a-z 0-9 . _ -); got {shown}.",
            field="stream",
        )
    if message.kind not in KINDS:
        raise InvalidInput(
            f"A message's 'kind' is one of {', '.join(KINDS)}; got {message.kind!r}.",
            field="kind",
        )
    media_type(message)
    if message.kind == "groups" and media_type(message) != JSON_MEDIA_TYPE:
        raise UnsupportedMediaType(media_type(message), (JSON_MEDIA_TYPE,))
    return message.stream, message.kind


def creation(message: Message) -> StreamCreate | None:
    """The stream the message creates when it does not exist (its ``create``), checked.

    The body's ``id``, when it gives one, must be the message's stream.
    """
    if message.create is None:
        return None
    try:
        body = StreamCreate.model_validate_json(message.create)
    except ValidationError as exc:
        raise wire.Refused(
            wire.validation_problem(
                [{**e, "loc": ("create", *e["loc"])} for e in exc.errors()],
                detail="The message's 'create' is not a valid stream to create.",
            )
        ) from None
    if body.id is not None and body.id != message.stream:
        raise InvalidInput(
            f"The message's 'create' names stream {body.id!r}, not its stream {message.stream!r}.",
            field="create",
        )
    return body


def _no_ids(producer: str | None, seq: int | None) -> None:
    if producer is not None or seq is not None:
        raise InvalidInput(
            "A message's body carries no producer or seq: its partition is its producer and "
            "its position its seq.",
            field="seq" if seq is not None else "producer",
        )


@dataclass(frozen=True, slots=True)
class Columns:
    """What a ``features`` or ``groups`` message appends to a feature stream."""

    names: list[str] | None
    X: npt.NDArray[np.float64]
    groups: list[str | None] | None


def columns(message: Message, n_instances: int, settings: Settings) -> Columns:
    """The columns of a ``features`` or ``groups`` message for a stream of ``n_instances``."""
    kind = media_type(message)
    if kind != JSON_MEDIA_TYPE:
        bounds = arrays.Bounds.features(settings)
        if kind == NPZ_MEDIA_TYPE:
            X, names = npz.load_npz_columns(message.body, bounds, None)
            return Columns(names, X, None)
        return Columns(None, arrays.load_npy(message.body, bounds, vector="column").T, None)
    try:
        if message.kind == "groups":
            batch = jsonbodies.group_batch(message.body)
        else:
            batch = jsonbodies.feature_batch(message.body)
    except ValidationError as exc:
        raise wire.Refused(wire.validation_problem(exc.errors())) from None
    _no_ids(batch.producer, batch.seq)
    cols = batch.columns
    X = cols.matrix(n_instances)
    if message.kind == "groups":
        groups: list[str | None] = list(batch.group_names or [])
        for name, own, group in zip(cols.names, cols.groups, groups, strict=True):
            if own is not None and own != group:
                raise InvalidInput(
                    f"Feature {name!r} names group {own!r} inside group {group!r}.",
                    field="groups",
                )
        return Columns(list(cols.names), X, groups)
    given = list(cols.groups)
    return Columns(list(cols.names), X, given if any(g is not None for g in given) else None)


def frame_input(message: Message) -> dict[str, Any]:
    """An ``instances`` message as the WebSocket frame of the same content.

    A JSON body is the text of a frame, an ``.npy`` or ``.npz`` body its
    bytes; a JSON body that names a seq must name the message's position.
    """
    kind = media_type(message)
    if kind == JSON_MEDIA_TYPE:
        try:
            text = message.body.decode()
        except UnicodeDecodeError:
            raise InvalidInput("A JSON body must be UTF-8.", field="body") from None
        return {"type": "websocket.receive", "text": text}
    if (message.body[:2] == b"PK") != (kind == NPZ_MEDIA_TYPE):
        raise InvalidInput(f"The body is not an {kind} array.", field="body")
    return {"type": "websocket.receive", "bytes": message.body}


__all__ = [
    "KINDS",
    "MEDIA_TYPES",
    "Columns",
    "Message",
    "checked",
    "columns",
    "creation",
    "frame_input",
    "media_type",
]
