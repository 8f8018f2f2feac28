"""The client's logic, written once for the sync and the async client.

Each operation is a generator that yields the HTTP :class:`Call` it needs and
receives the :class:`Reply` (or has the typed error thrown into it); the sync
and async clients only run these generators against their transports, with
retries. Sequence numbering lives here too: each :class:`Producer` numbers its
writes 1, 2, 3, ... Every try of a write carries the same ``seq``, so the
server applies it at most once. A write whose outcome stays unknown after the
last try (timeouts, 5xx) keeps its seq: sent again, it is answered from the
server's stored response if it was applied; another write sent instead
learns from the server that the seq is taken (``seq-reused``) and goes on
with the next one. Nothing is applied twice and nothing is skipped.
"""

from __future__ import annotations

import json
import uuid
from collections import deque
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, Self, TypeVar
from urllib.parse import quote

import numpy as np

from featurestream_client import _data, _groups
from featurestream_client.errors import (
    FeatureStreamError,
    InvalidInput,
    RequestTooExpensive,
    SeqReused,
    SequenceConflict,
    StreamExists,
    StreamNotFound,
    WrongStreamKind,
)
from featurestream_client.models import (
    Algorithm,
    EventPage,
    FeaturesResult,
    InstancesResult,
    Selection,
    StreamInfo,
)

T = TypeVar("T")
R = TypeVar("R")
C = TypeVar("C")

#: A stream kind in a sentence.
KIND_PHRASE = {"features": "a feature stream", "instances": "an instance stream"}

#: A sequence number no producer reaches: a write with it is refused as a gap,
#: and the refusal names the producer's next expected seq (nothing is applied).
PROBE_SEQ = 2**62


@dataclass(frozen=True)
class Call:
    """One HTTP request an operation needs."""

    method: str
    path: str
    json: Any = None
    content: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    accept: frozenset[int] = frozenset()  # statuses >= 300 handed back instead of raised


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    content: bytes
    attempts: int = 1

    def json(self) -> Any:
        return parse_json(self.content)

    @property
    def replayed(self) -> bool:
        return self.headers.get("idempotent-replay", "").lower() == "true"


Op = Generator[Call, Reply, T]

_loads: Callable[[bytes], Any]
try:  # orjson, when installed (the server's environment has it), parses large answers faster
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - exercised where orjson is absent
    _loads = json.loads


def parse_json(content: bytes) -> Any:
    """JSON of an answer."""
    return _loads(content)


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


def stream_path(stream_id: str, tail: str = "") -> str:
    return f"/v1/streams/{quote(stream_id, safe='')}{tail}"


def attempts_of(exc: BaseException) -> int:
    return int(getattr(exc, "attempts", 1))


# ---------------------------------------------------------------- catalogue and streams


def algorithms_op() -> Op[list[Algorithm]]:
    reply = yield Call("GET", "/v1/algorithms")
    return [Algorithm.from_json(a) for a in reply.json()["algorithms"]]


@dataclass
class Catalogue:
    """The server's algorithms as a client last read them.

    A client reads the catalogue once (a stream's algorithm never changes) and
    again only when asked for an algorithm it did not list.
    """

    by_name: dict[str, Algorithm] | None = None

    def load_op(self) -> Op[list[Algorithm]]:
        """Read the catalogue from the server, and keep it."""
        listed = yield from algorithms_op()
        self.by_name = {a.name: a for a in listed}
        return listed

    def supervised_op(self, algorithm: str) -> Op[bool]:
        """Whether streams of ``algorithm`` learn from labels (True if the server does not say)."""
        if self.by_name is None or algorithm not in self.by_name:
            yield from self.load_op()
        assert self.by_name is not None
        entry = self.by_name.get(algorithm)
        return True if entry is None else entry.supervised


def list_streams_op(labels: Mapping[str, str] | None = None) -> Op[list[StreamInfo]]:
    params = {"label": [f"{k}:{v}" for k, v in labels.items()]} if labels else {}
    reply = yield Call("GET", "/v1/streams", params=params)
    return [StreamInfo.from_json(s) for s in reply.json()["streams"]]


def get_info_op(stream_id: str) -> Op[StreamInfo]:
    reply = yield Call("GET", stream_path(stream_id))
    return StreamInfo.from_json(reply.json())


def target_list(target: Any) -> list[float] | list[str]:
    """The target vector as JSON takes it: numbers, or class labels as strings.

    Labels that are not numbers (``"yes"``/``"no"``, class names) travel as
    strings: the server keeps them as given, and no result depends on how they
    sort (docs/algorithms.md, "Targets").
    """
    values = target.to_numpy() if hasattr(target, "to_numpy") else np.asarray(target)
    values = np.asarray(values).reshape(-1)
    if values.dtype.kind == "b":
        values = values.astype(np.float64)
    if values.dtype.kind not in "fiu":
        if values.size == 0:
            raise InvalidInput("The target is empty.")
        labels = [str(v) for v in values.tolist()]
        if any(v in ("nan", "None", "") for v in labels):
            raise InvalidInput("The target contains missing labels (NaN, None or empty).")
        return labels
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        raise InvalidInput("The target is empty.")
    if not np.isfinite(values).all():
        raise InvalidInput("The target contains NaN or infinite values.")
    return [float(v) for v in values.tolist()]


def plain(value: Any, where: str = "params") -> Any:
    """``value`` with numpy scalars and arrays made plain Python (JSON can then hold it).

    ``np.int64(5)`` becomes 5, ``np.float64(0.1)`` 0.1, ``np.bool_(True)`` True and
    an array a list, at any depth of dicts, lists and tuples.
    """
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{where}: keys must be strings; got {key!r}.")
            out[key] = plain(item, f"{where}.{key}")
        return out
    if isinstance(value, list | tuple):
        return [plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
    return value


def create_op(
    algorithm: str,
    *,
    target: Any = None,
    feature_names: Sequence[str] | None = None,
    params: Mapping[str, Any] | None = None,
    stream_id: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Op[StreamInfo]:
    # The id is chosen here when not given, so a retry of a create whose answer
    # was lost finds its own stream instead of creating a second one.
    sid = stream_id or f"s-{uuid.uuid4().hex[:16]}"
    body: dict[str, Any] = {"id": sid, "algorithm": algorithm, "params": plain(params or {})}
    if target is not None:
        body["target"] = target_list(target)
    if feature_names is not None:
        body["feature_names"] = [str(n) for n in feature_names]
    for key, value in (options or {}).items():
        if value is not None:
            body[key] = plain(value, key)
    try:
        reply = yield Call("POST", "/v1/streams", json=body)
    except StreamExists as exc:
        if attempts_of(exc) > 1:
            info = yield from get_info_op(sid)
            size_matches = (target is None or info.n_instances == len(body["target"])) and (
                feature_names is None or info.n_features == len(body["feature_names"])
            )
            if info.algorithm == algorithm and size_matches:
                return info
        raise
    return StreamInfo.from_json(reply.json())


def delete_op(stream_id: str) -> Op[None]:
    try:
        yield Call("DELETE", stream_path(stream_id))
    except StreamNotFound as exc:
        if attempts_of(exc) == 1:
            raise
        # An earlier attempt deleted it; its answer was lost.


# ---------------------------------------------------------------- reads


def selected_op(stream_id: str, etag: str | None = None) -> Op[tuple[Selection | None, str | None]]:
    headers = {"If-None-Match": etag} if etag else {}
    reply = yield Call(
        "GET", stream_path(stream_id, "/selected"), headers=headers, accept=frozenset({304})
    )
    tag = reply.headers.get("etag", etag)
    if reply.status == 304:
        return None, tag
    return Selection.from_json(reply.json()), tag


def events_op(stream_id: str, after: str | None, limit: int) -> Op[EventPage]:
    params: dict[str, Any] = {"limit": limit}
    if after is not None:
        params["after"] = after
    reply = yield Call("GET", stream_path(stream_id, "/events"), params=params)
    return EventPage.from_json(reply.json())


def status_op(stream_id: str) -> Op[dict[str, Any]]:
    reply = yield Call("GET", stream_path(stream_id, "/status"))
    return dict(reply.json())


# ---------------------------------------------------------------- writes


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
        data = _data.as_instances(X, y, keep_sparse=True)
        self._check_kind("instances")
        d = None if self.info is None else self.info.n_features
        if d is not None and data.X.shape[1] != d:
            raise InvalidInput(
                f"X has {data.X.shape[1]} columns; stream {self.id!r} has {d} features."
            )
        if batch_size is not None and batch_size < 1:
            raise InvalidInput(f"batch_size must be >= 1; got {batch_size}.")
        chunks = _data.plan_rows(
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
                lambda c, seq: _data.instances_body(data, c, self.producer.name, seq),
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
        _data.refuse_row_shapes(X)
        if not _data._is_frame(X):
            return X
        info = yield from self.info_op()
        self._check_kind("instances")
        if info.feature_names is None:  # a server that does not say: by position
            return X
        return _data.align_frame(X, info.feature_names, self.id)

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
            _Answers(parse, background=several) as parts,
            _Bodies(body_of, ahead=several) as bodies,
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


class _Aside:
    """Work of one call done in a thread of its own (``pool``: None, in the caller's);
    the thread is joined when the call ends."""

    def __init__(self, aside: bool, name: str) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=name) if aside else None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


class _Bodies(_Aside, Generic[C]):
    """The bodies of one call's requests, each next one encoded while a request is out.

    With ``ahead``, building the body of a chunk starts a thread encoding the
    chunk ``after`` it for the seq that follows, which the next request takes
    when it is indeed that chunk with that seq (after a retry or a split it is
    encoded again, at once). The client's encoding then overlaps the server's
    work on the request before.
    """

    def __init__(self, body_of: Callable[[C, int], Any], *, ahead: bool) -> None:
        super().__init__(ahead, "featurestream-bodies")
        self._body_of = body_of
        self._next: tuple[C, int, Future[Any]] | None = None

    def body(self, chunk: C, seq: int, after: C | None = None) -> Any:
        ready, self._next = self._next, None
        if ready is not None and ready[0] is chunk and ready[1] == seq:
            body = ready[2].result()
        else:
            if ready is not None:
                ready[2].cancel()
            body = self._body_of(chunk, seq)
        if self._pool is not None and after is not None:
            try:
                self._next = (after, seq + 1, self._pool.submit(self._body_of, after, seq + 1))
            except RuntimeError:  # the interpreter is shutting down: encoded when needed
                self._next = None
        return body


# Answers at least this large are parsed beside the next request (see _Answers).
_BACKGROUND_BYTES = 1 << 18


class _Answers(_Aside, Generic[R]):
    """The answers of one call's requests, parsed in order, the large ones in a thread.

    Parsing a large answer (20,000 decisions are 2 MB) takes a while, during which
    the next request would wait and the server sit idle: with ``background``,
    an answer of ``_BACKGROUND_BYTES`` or more is parsed in a thread of its own
    while the next request is encoded and sent. ``results`` waits for them all
    (an answer that does not parse raises there); before each next request,
    ``raise_failed`` waits for all but the last answer and raises if one did not
    parse, so that at most one request goes out after an answer that does not
    parse; ``parsed`` gives those that parsed, up to the first that did not.
    """

    def __init__(self, parse: Callable[[Reply], R], *, background: bool) -> None:
        super().__init__(background, "featurestream-answers")
        self._parse = parse
        self._parts: list[Future[R] | _Parsed[R]] = []
        self._settled = 0  # the answers before this one are known to have parsed

    def add(self, reply: Reply) -> None:
        if self._pool is not None and len(reply.content) >= _BACKGROUND_BYTES:
            try:
                self._parts.append(self._pool.submit(self._parse, reply))
                return
            except RuntimeError:  # the interpreter is shutting down: parsed here
                pass
        self._parts.append(_Parsed(self._parse(reply)))

    def results(self) -> list[R]:
        return [p.result() for p in self._parts]

    def raise_failed(self) -> None:
        # Every answer but the last must have parsed: one at most is parsed aside (it
        # had a whole request's time to finish). Each answer is waited for once: a call
        # of thousands of small requests does not walk its answers before each one.
        last = len(self._parts) - 1
        while self._settled < last:
            self._parts[self._settled].result()
            self._settled += 1

    def parsed(self) -> list[R]:
        out: list[R] = []
        for p in self._parts:
            if isinstance(p, Future) and p.exception() is not None:
                break
            out.append(p.result())
        return out


@dataclass(frozen=True)
class _Parsed(Generic[R]):
    value: R

    def result(self) -> R:
        return self.value


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


def parse_problem(status: int, content: bytes) -> dict[str, Any]:
    """The problem document of an error answer (a minimal one when the body is not JSON)."""
    try:
        body = json.loads(content) if content else {}
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    if "detail" not in body:
        text = content.decode("utf-8", "replace").strip()[:200]
        body.setdefault("detail", text or f"HTTP {status}")
    body.setdefault("status", status)
    return body


__all__ = [
    "PROBE_SEQ",
    "Call",
    "Catalogue",
    "Chunking",
    "Op",
    "Producer",
    "Reply",
    "StreamCore",
    "algorithms_op",
    "create_op",
    "delete_op",
    "events_op",
    "get_info_op",
    "list_streams_op",
    "new_producer_name",
    "parse_problem",
    "selected_op",
    "status_op",
    "stream_path",
]
