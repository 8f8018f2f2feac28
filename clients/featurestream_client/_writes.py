"""A stream handle's writes: columns, groups and rows, numbered and chunked.

Sequence numbering lives here: each :class:`Producer` numbers its writes 1, 2,
3, ... Every try of a write carries the same ``seq``, so the server applies it
at most once. A write whose outcome stays unknown after the last try
(timeouts, 5xx) keeps its seq: sent again, it is answered from the server's
stored response if it was applied; another write sent instead learns from the
server that the seq is taken (``seq-reused``) and goes on with the next one.
Nothing is applied twice and nothing is skipped. A large write goes as
several requests (chunks), each with its own seq.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from featurestream_client import _data, _groups, _inputs, _instances
from featurestream_client._core import (
    Call,
    Op,
    Reply,
    attempts_of,
    get_info_op,
    parse_json,
    stream_path,
)
from featurestream_client._pipeline import Answers, Bodies
from featurestream_client.errors import (
    FeatureStreamError,
    InvalidInput,
    RequestTooExpensive,
    SeqReused,
    SequenceConflict,
    WrongStreamKind,
)
from featurestream_client.models import FeaturesResult, InstancesResult, StreamInfo

R = TypeVar("R")
C = TypeVar("C")

#: A stream kind in a sentence.
KIND_PHRASE = {"features": "a feature stream", "instances": "an instance stream"}

#: A sequence number no producer reaches: a write with it is refused as a gap,
#: and the refusal names the producer's next expected seq (nothing is applied).
PROBE_SEQ = 2**62


@dataclass
class Producer:
    """A writer's name and the next ``seq`` it will use (None: ask the server first).

    ``unknown`` is the seq of the last write whose outcome stayed unknown (it is
    also ``next_seq``): the next write is sent with it.
    """

    name: str
    next_seq: int | None = 1
    unknown: int | None = None


def new_producer_name() -> str:
    return f"py-{uuid.uuid4().hex[:16]}"


@dataclass
class Chunking:
    """How large one request may grow."""

    columns: int = 20_000
    bytes: int = 8 * 1024 * 1024
    header_bytes: int = 8 * 1024

    def __post_init__(self) -> None:
        if self.columns < 1 or self.bytes < 1 or self.header_bytes < 1:
            raise ValueError("chunk sizes must be >= 1")


@dataclass
class StreamCore:
    """What a stream handle knows: its id, its producer and (once read) its resource."""

    id: str
    producer: Producer
    chunking: Chunking
    info: StreamInfo | None = None

    def info_op(self) -> Op[StreamInfo]:
        if self.info is None:
            self.info = yield from get_info_op(self.id)
        return self.info

    # -------------------------------------------------------- numbering

    def resync_op(self) -> Op[int]:
        """Ask the server for this producer's next seq, with a write it refuses as a gap."""
        info = yield from self.info_op()
        if info.kind == "features":
            body: dict[str, Any] = {"features": []}
            path = stream_path(self.id, "/features")
        else:
            body = {"X": [[0.0] * int(info.n_features or 1)]}
            path = stream_path(self.id, "/instances")
        body.update(producer=self.producer.name, seq=PROBE_SEQ)
        try:
            yield Call("POST", path, json=body)
        except SequenceConflict as exc:
            self.producer.next_seq = exc.expected_seq
            return exc.expected_seq
        # Only a producer already at PROBE_SEQ - 1 gets here: an empty, harmless write.
        self.producer.next_seq = PROBE_SEQ + 1
        return self.producer.next_seq

    def write_op(self, build: Callable[[int], Call]) -> Op[Reply]:
        """Send one numbered write; keep the producer's numbering exact whatever happens."""
        if self.producer.next_seq is None:
            yield from self.resync_op()
        seq = self.producer.next_seq
        assert seq is not None
        # The last write with this seq has an unknown outcome: this may be it, again.
        retrying = self.producer.unknown == seq
        try:
            reply = yield build(seq)
        except SeqReused as exc:
            if retrying and attempts_of(exc) == 1:
                # The write of unknown outcome was applied after all, and this one,
                # another write, was not: it goes on with the next seq.
                self.producer.unknown = None
                self.producer.next_seq = exc.expected_seq
                return (yield from self.write_op(build))
            self.producer.next_seq = None
            raise
        except FeatureStreamError as exc:
            if isinstance(exc, RequestTooExpensive):
                # The server classifies the seq before doing any work: a write over its
                # time budget was not applied, on this try or an earlier one.
                raise
            if isinstance(exc, SequenceConflict):
                # Out of step: learn the next seq from the server before writing again.
                self.producer.next_seq = None
                self.producer.unknown = None
            elif exc.status is None or exc.status >= 500 or attempts_of(exc) > 1:
                # A try may have been applied: keep the seq, so that sending this write
                # again is answered from the server's stored response if it was.
                self.producer.unknown = seq
                _outcome_unknown(exc, self.producer.name, seq)
            # Any other 4xx was refused whole: the seq is still free for the next write.
            raise
        self.producer.unknown = None
        if reply.replayed and reply.attempts == 1 and not retrying:
            # The first try of this seq was answered from the store: the producer
            # name was used before by someone else, and this request was not applied.
            self.producer.next_seq = None
            raise SequenceConflict(
                f"seq {seq} of producer {self.producer.name!r} was already used; this request "
                "was not applied. Use a producer name of your own (or none: the client makes "
                "one up).",
                status=409,
                type="/problems/sequence-conflict",
                problem={"producer": self.producer.name, "expected_seq": seq},
            )
        self.producer.next_seq = seq + 1
        return reply

    def _check_kind(self, kind: str) -> None:
        if self.info is not None and self.info.kind != kind:
            calls = {
                "features": "Stream.add_features or add_groups",
                "instances": "Stream.add_instances or stream_instances",
            }
            have = self.info.kind
            raise WrongStreamKind(
                f"Stream {self.id!r} is {KIND_PHRASE.get(have, have)}; this call is for "
                f"{kind[:-1]} streams. Send it data with {calls.get(have)}.",
                problem={"stream_id": self.id, "kind": self.info.kind},
            )

    def _check_rows(self, n_rows: int) -> None:
        n = None if self.info is None else self.info.n_instances
        if n is not None and n_rows != n:
            raise InvalidInput(
                f"The columns have {n_rows} rows; stream {self.id!r} has {n} instances."
            )

    # -------------------------------------------------------- features

    def add_features_op(
        self,
        data: Any,
        names: Sequence[str] | None,
        *,
        chunk_columns: int | None = None,
        chunk_bytes: int | None = None,
    ) -> Op[FeaturesResult]:
        cols = _data.as_columns(data, names)
        if cols.n_cols == 0:
            raise InvalidInput("No feature columns to add.")
        self._check_kind("features")
        self._check_rows(cols.n_rows)
        chunks = _data.plan_chunks(
            cols,
            chunk_columns or self.chunking.columns,
            chunk_bytes or self.chunking.bytes,
            self.chunking.header_bytes,
        )
        return (
            yield from self._post_chunks(
                "/features",
                chunks,
                lambda c, seq: _data.features_body(cols, c, self.producer.name, seq),
                _features_result,
                FeaturesResult.combine,
                _data.split_chunk,
            )
        )

    def add_groups_op(
        self,
        groups: Any,
        *,
        chunk_columns: int | None = None,
        chunk_bytes: int | None = None,
    ) -> Op[FeaturesResult]:
        parsed = _groups.as_groups(groups)
        if not parsed:
            raise InvalidInput("No groups to add.")
        self._check_kind("features")
        self._check_rows(parsed[0].cols.n_rows)
        plan = _groups.plan_groups(
            parsed, chunk_columns or self.chunking.columns, chunk_bytes or self.chunking.bytes
        )
        return (
            yield from self._post_chunks(
                "/groups",
                plan,
                lambda b, seq: _groups.groups_body(b, self.producer.name, seq),
                _features_result,
                FeaturesResult.combine,
                _groups.split_groups,
            )
        )

    # -------------------------------------------------------- instances

    def add_instances_op(
        self,
        X: Any,
        y: Any = None,
        *,
        batch_size: int | None = None,
        chunk_bytes: int | None = None,
    ) -> Op[InstancesResult]:
        X = yield from self.aligned_op(X)
        data = _instances.as_instances(X, y, keep_sparse=True)
        self._check_kind("instances")
        d = None if self.info is None else self.info.n_features
        if d is not None and data.X.shape[1] != d:
            raise InvalidInput(
                f"X has {data.X.shape[1]} columns; stream {self.id!r} has {d} features."
            )
        if batch_size is not None and batch_size < 1:
            raise InvalidInput(f"batch_size must be >= 1; got {batch_size}.")
        chunks = _instances.plan_rows(
            data.X.shape[0],
            data.X.shape[1],
            batch_size,
            chunk_bytes or self.chunking.bytes,
            getattr(data.X, "nnz", None),
        )
        return (
            yield from self._post_chunks(
                "/instances",
                chunks,
                lambda c, seq: _instances.instances_body(data, c, self.producer.name, seq),
                _instances_result,
                InstancesResult.combine,
                _data.split_chunk,
            )
        )

    def aligned_op(self, X: Any) -> Op[Any]:
        """A DataFrame's columns in the order of the stream's features, matched by name.

        Anything else (arrays, sparse matrices, iterables) is matched by position
        and returned as it is.
        """
        _inputs.refuse_row_shapes(X)
        if not _inputs.is_frame(X):
            return X
        info = yield from self.info_op()
        self._check_kind("instances")
        if info.feature_names is None:  # a server that does not say: by position
            return X
        return _inputs.align_frame(X, info.feature_names, self.id)

    def _post_chunks(
        self,
        suffix: str,
        chunks: Sequence[C],
        body_of: Callable[[C, int], Any],
        parse: Callable[[Reply], R],
        combine: Callable[[Sequence[R]], R],
        split: Callable[[C, int], list[C]],
    ) -> Op[R]:
        """POST each chunk in order (its body built for its seq) and combine the results.

        A chunk the server finds over its time budget (413 request-too-expensive:
        nothing of it applied) is sent again in smaller pieces, in order, each with
        its own seq: ``split(chunk, completed)`` cuts it. A failure carries what the
        chunks before it did as ``exc.partial``.
        """
        path = stream_path(self.id, suffix)
        todo = deque(chunks)
        several = len(chunks) > 1
        with (
            Answers(parse, background=several) as parts,
            Bodies(body_of, ahead=several) as bodies,
        ):
            while todo:
                parts.raise_failed()  # an answer parsed aside that did not parse: stop here
                chunk = todo.popleft()
                encode = partial(bodies.body, after=todo[0] if todo else None)
                try:
                    reply = yield from self.write_op(partial(_post_call, path, encode, chunk))
                except RequestTooExpensive as exc:
                    pieces = split(chunk, exc.completed)
                    if len(pieces) > 1:
                        todo.extendleft(reversed(pieces))
                        continue
                    exc.partial = combine(parts.parsed())
                    raise
                except FeatureStreamError as exc:
                    exc.partial = combine(parts.parsed())
                    raise
                parts.add(reply)
            return combine(parts.results())


def _outcome_unknown(exc: FeatureStreamError, producer: str, seq: int) -> None:
    """Say in ``exc`` that its write may have been applied, and that retrying it is safe."""
    note = (
        f" The outcome of this write (producer {producer!r}, seq {seq}) is unknown: it may "
        "have been applied. Retrying the same write is safe: this handle sends it again "
        "with the same seq, and the server applies it at most once."
    )
    exc.detail = exc.detail.rstrip() + note
    exc.args = (exc.detail,)
    exc.outcome_unknown = True


def _features_result(reply: Reply) -> FeaturesResult:
    return FeaturesResult.from_answer(reply.content, reply.replayed, parse_json)


def _instances_result(reply: Reply) -> InstancesResult:
    return InstancesResult.from_json(reply.json(), reply.replayed)


def _post_call(path: str, body_of: Callable[[C, int], Any], chunk: C, seq: int) -> Call:
    body = body_of(chunk, seq)
    return Call("POST", path, content=body.content, headers=body.headers)


__all__ = [
    "PROBE_SEQ",
    "Chunking",
    "Producer",
    "StreamCore",
    "new_producer_name",
]
