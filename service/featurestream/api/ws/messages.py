"""Frames in: the messages a WebSocket client sends, decoded into numbered frames.

A frame is a JSON text frame (``{"X": [[...]], "y": [...]}`` or ``{"x": [...],
"y": 1}``), or a binary frame holding an ``.npy`` array or, for sparse
instances, a ``scipy.sparse.save_npz`` matrix (a zip); labels come in the last
column for supervised selectors. A frame that cannot be decoded is not an
error of the connection: it becomes a refused frame, answered with its
``error`` message, that uses up its seq.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import numpy as np
from pydantic import ValidationError

from featurestream.api import arrays
from featurestream.api.schemas import InstanceFrame
from featurestream.engine import Frame, wire
from featurestream.errors import (
    FeatureStreamError,
    InvalidInput,
    SequenceConflict,
    WrongStreamKind,
)


def not_instances(stream_id: str, kind: str) -> WrongStreamKind:
    """The refusal of a frame sent to a feature stream."""
    return WrongStreamKind(
        f"Stream {stream_id!r} is a {kind} stream: its WebSocket only sends "
        "selection messages; frames of instances are for instance streams.",
        stream_id=stream_id,
        kind=kind,
    )


class FrameDecoder:
    """Decodes the frames of one connection (its stream's kind fixes what is accepted)."""

    def __init__(
        self, stream_id: str, kind: str, *, supervised: bool, producer: str, max_bytes: int
    ) -> None:
        self.stream_id = stream_id
        self.kind = kind
        self.supervised = supervised
        self.producer = producer
        self.max_bytes = max_bytes

    def decode(self, message: MutableMapping[str, Any], seq: int) -> Frame:
        """Frame ``seq`` of the connection, or a refused one carrying its error."""
        try:
            if self.kind != "instances":
                raise not_instances(self.stream_id, self.kind)
            data = message.get("bytes")
            if data is not None:
                if data[:2] == b"PK":  # a zip: a sparse frame (scipy.sparse.save_npz)
                    A = arrays.load_sparse_instances(data, self.max_bytes)
                    X, y = arrays.split_labels(A, self.supervised, "A binary frame")
                    return Frame(seq, X, y)
                return self._npy(data, seq)
            return self._json(message.get("text") or "", seq)
        except FeatureStreamError as exc:
            return Frame(seq, error=exc)

    def _npy(self, data: bytes, seq: int) -> Frame:
        A = arrays.load_npy_frame(data)
        if A.ndim == 1:
            A = A[None, :]
        X, y = arrays.split_labels(A, self.supervised, "A binary frame")
        return Frame(seq, X, y)

    def _json(self, text: str, seq: int) -> Frame:
        try:
            frame = InstanceFrame.model_validate_json(text)
        except ValidationError as exc:
            raise wire.Refused(wire.validation_problem(exc.errors())) from None
        if frame.seq is not None and frame.seq != seq:
            raise SequenceConflict(
                f"The frame says seq {frame.seq}, but it is frame {seq} of this connection "
                f"(frames are numbered consecutively from the connection's seq).",
                producer=self.producer,
                expected_seq=seq,
            )
        if frame.X is not None:
            if len({len(row) for row in frame.X}) != 1:
                raise InvalidInput("Every row of X must have the same length.", field="X")
            X = np.asarray(frame.X, dtype=np.float64)
            y = None if frame.y is None else np.asarray(frame.y, dtype=np.float64)
        else:
            X = np.asarray([frame.x], dtype=np.float64)
            y = None if frame.y is None else np.asarray([frame.y], dtype=np.float64)
        return Frame(seq, X, y)


__all__ = ["FrameDecoder", "not_instances"]
