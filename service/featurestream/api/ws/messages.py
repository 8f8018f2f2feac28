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

from pydantic import ValidationError

from featurestream import offload
from featurestream.api import arrays, jsonbodies, npz
from featurestream.engine import Frame, wire
from featurestream.errors import (
    FeatureStreamError,
    SequenceConflict,
    WrongStreamKind,
)


def not_instances(stream_id: str, kind: str) -> WrongStreamKind:
    """The refusal of a frame sent to a feature stream."""
    return WrongStreamKind(
        f"Stream {stream_id!r} is a feature stream: its WebSocket only sends "
        "selection messages; frames of instances are for instance streams. Send it feature "
        "columns: POST /v1/streams/ID/features (SDK: Stream.add_features).",
        stream_id=stream_id,
        kind=kind,
    )


class FrameDecoder:
    """Decodes the frames of one connection (its stream's kind fixes what is accepted)."""

    def __init__(
        self, stream_id: str, kind: str, *, supervised: bool, producer: str, bounds: arrays.Bounds
    ) -> None:
        self.stream_id = stream_id
        self.kind = kind
        self.supervised = supervised
        self.producer = producer
        self.bounds = bounds

    async def read(self, message: MutableMapping[str, Any], seq: int) -> Frame:
        """:meth:`decode`, in a decode thread for a large frame that is costly to read.

        The common binary frame (a float .npy read in place, without a copy) is
        read inline whatever its size; a sparse (.npz) frame, a JSON frame or
        an .npy frame that must be converted is read in a thread when large
        (an archive by the sizes its members inflate to).
        """
        data = message.get("bytes")
        if data is not None:
            costly = data[:2] == b"PK" or arrays.npy_view(data) is None
            size = arrays.decoded_size(data) if costly else 0
        else:
            size = len(message.get("text") or "")
        return await offload.run(size, lambda: self.decode(message, seq))

    def decode(self, message: MutableMapping[str, Any], seq: int) -> Frame:
        """Frame ``seq`` of the connection, or a refused one carrying its error."""
        try:
            if self.kind != "instances":
                raise not_instances(self.stream_id, self.kind)
            data = message.get("bytes")
            if data is not None:
                if data[:2] == b"PK":  # a zip: a sparse frame (scipy.sparse.save_npz)
                    A = npz.load_sparse_instances(data, self.bounds)
                    X, y = arrays.split_labels(A, self.supervised, "A binary frame")
                    return Frame(seq, X, y)
                return self._npy(data, seq)
            return self._json(message.get("text") or "", seq)
        except FeatureStreamError as exc:
            return Frame(seq, error=exc)

    def _npy(self, data: bytes, seq: int) -> Frame:
        A = arrays.load_npy_frame(data, self.bounds)
        X, y = arrays.split_labels(A, self.supervised, "A binary frame")
        return Frame(seq, X, y)

    def _json(self, text: str, seq: int) -> Frame:
        try:
            frame = jsonbodies.instance_frame(text)
        except ValidationError as exc:
            raise wire.Refused(wire.validation_problem(exc.errors())) from None
        if frame.seq is not None and frame.seq != seq:
            raise SequenceConflict(
                f"The frame says seq {frame.seq}, but it is frame {seq} of this connection "
                f"(frames are numbered consecutively from the connection's seq).",
                producer=self.producer,
                expected_seq=seq,
            )
        return Frame(seq, frame.rows(), frame.y)


__all__ = ["FrameDecoder", "not_instances"]
