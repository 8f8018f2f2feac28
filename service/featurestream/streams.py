"""StreamEngine: load -> resume -> apply -> snapshot -> commit.

The only module that knows both the selectors and the store. Per stream it
serialises this process's writers with an asyncio lock, keeps the decoded
selector of recently used streams in memory (so a process holding the latest
version does not re-read the state), and commits every change as one
compare-and-set. When another process committed first, the commit fails, the
engine reloads the stream and applies the request again: selectors are
deterministic, so the result is exactly that of the serial order the store saw.

A group of WebSocket frames (``add_instance_frames``) is applied frame by frame,
each as its own batch, and committed once: state, one ``batch`` event per
frame, the producer's seq and one stored response per frame.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import anyio
import numpy as np
import numpy.typing as npt
import orjson

from featurestream import codec
from featurestream.config import Settings
from featurestream.errors import (
    ConcurrentUpdate,
    FeatureStreamError,
    InvalidInput,
    LimitExceeded,
    QuotaExceeded,
    SequenceConflict,
    StoreUnavailable,
    WrongStreamKind,
)
from featurestream.selectors import REGISTRY
from featurestream.selectors.base import (
    Decision,
    FeatureSelector,
    InstanceSelector,
    InstanceUpdate,
    Selector,
)
from featurestream.store.base import Commit, StateStore, StreamSummary, Subscription

Clock = Callable[[], datetime]
T = TypeVar("T")


def new_stream_id() -> str:
    """A fresh stream id for a create request that names none."""
    return f"s-{uuid.uuid4().hex[:16]}"


def utcnow() -> datetime:
    return datetime.now(UTC)


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def _dumps(obj: Any) -> bytes:
    # orjson: these documents hold a decision or event per column, on the hot path.
    return orjson.dumps(obj)


@dataclass
class _Live:
    """A stream as this process last saw it."""

    info: dict[str, Any]
    incarnation: str
    version: int
    selector: Selector[Any, Any]
    producers: dict[str, int] = field(default_factory=dict)
    from_cache: bool = False

    @property
    def kind(self) -> str:
        return str(self.info["kind"])


@dataclass(frozen=True)
class _Outcome:
    """The new state of a stream after one request or one group of frames."""

    events: list[dict[str, Any]]
    names: Sequence[str]
    blob: bytes
    selection: bytes
    status: bytes
    selection_changed: bool


@dataclass(frozen=True)
class _Attempt(Generic[T]):
    """What one attempt at a write commits, and what the caller gets once it is committed.

    With no ``outcome`` the state stays as it is; with neither an outcome nor
    ``responses`` nothing is committed and ``result`` is returned at once (a replay).
    """

    result: T
    outcome: _Outcome | None = None
    seq: int | None = None
    responses: Sequence[tuple[int, bytes]] = ()


@dataclass(frozen=True)
class WriteResult:
    body: bytes
    replayed: bool
    version: int


@dataclass(frozen=True)
class Frame:
    """One frame of instances from a connection, numbered ``seq`` by it.

    ``X`` and ``y`` are as decoded (float32 frames stay float32: the selector
    converts them in the worker thread). ``error`` is set for a frame refused
    before reaching the engine (it could not be decoded): it changes no state
    but uses up its seq.
    """

    seq: int
    X: npt.NDArray[np.floating[Any]] | None = None
    y: npt.NDArray[np.floating[Any]] | None = None
    error: FeatureStreamError | None = None


@dataclass(frozen=True)
class FrameResult:
    """The stored response of one frame.

    ``body`` is the response recorded for (producer, seq): the same JSON an
    HTTP request gets (``version``, ``seq``, ``instances_seen``, ``selected``)
    or, for a refused frame, the rendered error. ``fatal`` marks a seq the
    stream cannot accept (a gap, or older than the replay window): the frames
    after it were not looked at.
    """

    seq: int
    body: bytes
    replayed: bool = False
    fatal: bool = False


@dataclass(frozen=True)
class FramesResult:
    results: list[FrameResult]
    version: int
    # The committed selection JSON when this group changed the selected set.
    selection: bytes | None = None


ErrorRenderer = Callable[[FeatureStreamError, int], bytes]


class StreamEngine:
    """Applies requests to streams kept in a StateStore."""

    def __init__(self, store: StateStore, settings: Settings, clock: Clock = utcnow) -> None:
        self.store = store
        self.settings = settings
        self._clock = clock
        self._cache: OrderedDict[str, _Live] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self.counters: Counter[str] = Counter()

    # ------------------------------------------------------------------ streams

    async def create(
        self,
        *,
        stream_id: str | None,
        algorithm: str,
        params: dict[str, Any] | None,
        target: Sequence[float] | None,
        feature_names: Sequence[str] | None,
        public_id: str | None = None,
        tenant: str | None = None,
    ) -> dict[str, Any]:
        cls = REGISTRY.get(algorithm)
        if cls is None:
            raise InvalidInput(
                f"Unknown algorithm {algorithm!r}; expected one of {sorted(REGISTRY)}.",
                field="algorithm",
            )
        resolved = cls.params_type.from_mapping(params)
        sid = stream_id or new_stream_id()
        quota = self.settings.max_streams_per_tenant
        if len(await self.list(tenant)) >= quota:
            raise QuotaExceeded(
                f"This tenant already has {quota} streams, the most it may hold; delete "
                "streams it no longer needs.",
                limit="max_streams_per_tenant",
                maximum=quota,
            )
        if issubclass(cls, FeatureSelector):
            if target is None:
                raise InvalidInput(f"{algorithm} streams need a target.", field="target")
            if feature_names is not None:
                raise InvalidInput(
                    f"{algorithm} is a feature-stream algorithm; feature_names is for "
                    "instance streams.",
                    field="feature_names",
                )
            y = np.asarray(target, dtype=np.float64)
            selector: Selector[Any, Any] = await anyio.to_thread.run_sync(cls.start, resolved, y)
            size = {"n_instances": int(y.shape[0])}
        else:
            assert issubclass(cls, InstanceSelector)
            if feature_names is None:
                raise InvalidInput(
                    f"{algorithm} streams need feature_names.", field="feature_names"
                )
            if target is not None:
                raise InvalidInput(
                    f"{algorithm} is an instance-stream algorithm; it takes no target.",
                    field="target",
                )
            _check_names(
                feature_names, field="feature_names", max_length=self.settings.max_name_length
            )
            selector = await anyio.to_thread.run_sync(cls.start, resolved, list(feature_names))
            size = {"n_features": len(feature_names)}
        now = _iso(self._clock())
        info = {
            "id": public_id or sid,
            **({"tenant": tenant} if tenant is not None else {}),
            "algorithm": algorithm,
            "kind": cls.kind,
            "params": resolved.to_dict(),
            **size,
            "created_at": now,
        }
        blob = codec.encode(cls.name, resolved.to_dict(), selector.snapshot())
        incarnation = uuid.uuid4().hex
        await self.store.create(
            sid,
            info,
            incarnation,
            blob,
            now,
            _selection_json(selector, 0, now),
            _dumps(selector.status()),
        )
        self._remember(sid, _Live(info, incarnation, 0, selector))
        return {**info, "version": 0, "updated_at": now}

    async def get(self, stream_id: str) -> dict[str, Any]:
        return _resource(await self.store.summary(stream_id))

    async def list(self, tenant: str | None = None) -> list[dict[str, Any]]:
        """The streams of ``tenant`` (None: the streams created without a tenant)."""
        return [
            _resource(s) for s in await self.store.list_streams() if s.info.get("tenant") == tenant
        ]

    async def delete(self, stream_id: str) -> bool:
        async with self._lock(stream_id):
            self._cache.pop(stream_id, None)
            found = await self.store.delete(stream_id)
        self._locks.pop(stream_id, None)
        return found

    # ------------------------------------------------------------------ reads

    async def n_instances(self, stream_id: str) -> int:
        """Rows of a feature stream (from memory when this process holds the stream)."""
        live = self._cache.get(stream_id)
        info = live.info if live is not None else (await self.store.summary(stream_id)).info
        if info["kind"] != "features":
            raise WrongStreamKind(
                f"Stream {stream_id!r} is an instance stream; post instances to it.",
                stream_id=stream_id,
                kind=str(info["kind"]),
            )
        return int(info["n_instances"])

    async def summary(self, stream_id: str) -> StreamSummary:
        return await self.store.summary(stream_id)

    def subscribe(self, stream_id: str) -> AbstractAsyncContextManager[Subscription]:
        """Selection notifications of the stream, from every process (see the store)."""
        return self.store.subscribe(stream_id)

    async def status(self, stream_id: str) -> dict[str, Any]:
        s = await self.store.summary(stream_id)
        return {
            "id": s.info["id"],
            "algorithm": s.info["algorithm"],
            "kind": s.info["kind"],
            "version": s.version,
            "updated_at": s.updated_at,
            **json.loads(s.status),
        }

    async def events(
        self, stream_id: str, after: str | None = None, limit: int = 100
    ) -> dict[str, Any]:
        """Events in order, after the event id ``after`` (``<version>-<index>``)."""
        after_v, after_i = _parse_event_id(after) if after else (0, -1)
        out: list[dict[str, Any]] = []
        next_version = max(after_v, 1)
        while len(out) < limit:
            entries = await self.store.events(stream_id, next_version, 64)
            if not entries:
                break
            for entry in entries:
                payload = json.loads(entry.payload)
                for i, ev in enumerate(payload["events"]):
                    if (entry.version, i) <= (after_v, after_i):
                        continue
                    out.append(
                        {
                            "id": f"{entry.version}-{i}",
                            "version": entry.version,
                            "seq": payload.get("seq"),
                            "producer": payload.get("producer"),
                            **ev,
                        }
                    )
                    if len(out) >= limit:
                        break
                if len(out) >= limit:
                    break
            next_version = entries[-1].version + 1
        return {"events": out, "next": out[-1]["id"] if out else after}

    # ------------------------------------------------------------------ writes

    async def add_features(
        self,
        stream_id: str,
        names: Sequence[str] | None,
        X: npt.NDArray[np.float64],
        *,
        groups: Sequence[str | None] | None = None,
        producer: str = "default",
        seq: int | None = None,
    ) -> WriteResult:
        """Append b feature columns (``X`` is ``(b, n)`` feature-major), in order."""
        limit = self.settings.max_columns_per_request
        if X.shape[0] > limit:
            raise LimitExceeded(
                f"{X.shape[0]} columns in one request; at most {limit} are accepted "
                "(split the request).",
                limit="max_columns_per_request",
                maximum=limit,
            )
        if names is not None:
            _check_names(names, field="features", max_length=self.settings.max_name_length)

        async def prepare(live: _Live) -> list[str]:
            # Names already in the stream are refused by the store's commit itself
            # (atomically, with no round trip of its own): see DuplicateNames.
            if names is not None:
                return list(names)
            tag = str(seq) if seq is not None else f"v{live.version + 1}"
            return [f"{tag}:{i}" for i in range(X.shape[0])]

        def apply(live: _Live, chosen: list[str], version: int) -> tuple[dict[str, Any], _Outcome]:
            sel = live.selector
            assert isinstance(sel, FeatureSelector)
            before = sel.selected()
            decisions = sel.learn_features(chosen, X, groups)
            events: list[dict[str, Any]] = [
                {"type": "batch", "names": chosen, "count": len(chosen)}
                | ({"groups": list(groups)} if groups is not None else {})
            ]
            for d in decisions:
                events.extend(_decision_events(d))
            selected = list(sel.selected())
            response = {
                "version": version,
                "seq": seq,
                "producer": producer,
                "decisions": [d.to_json() for d in decisions],
                "selected": selected,
            }
            outcome = self._outcome(live, version, events, chosen, before != tuple(selected))
            return response, outcome

        return await self._write(stream_id, "features", producer, seq, prepare, apply)

    async def add_instances(
        self,
        stream_id: str,
        X: npt.NDArray[np.float64],
        y: npt.NDArray[np.float64] | None,
        *,
        producer: str = "default",
        seq: int | None = None,
    ) -> WriteResult:
        """Apply a batch of instances (``X`` is ``(m, d)``) as one batch."""
        self._check_instances(X.shape[0])

        async def prepare(live: _Live) -> None:
            return None

        def apply(live: _Live, _: None, version: int) -> tuple[dict[str, Any], _Outcome]:
            sel = live.selector
            assert isinstance(sel, InstanceSelector)
            before = sel.selected()
            update: InstanceUpdate = sel.learn_instances(X, y)
            selected = list(sel.selected())
            events = [
                {
                    "type": "batch",
                    "instances": update.instances,
                    "instances_seen": update.instances_seen,
                    "mistakes": update.mistakes,
                }
            ]
            response = {
                "version": version,
                "seq": seq,
                "producer": producer,
                "instances_seen": update.instances_seen,
                "selected": selected,
            }
            return response, self._outcome(live, version, events, (), before != tuple(selected))

        return await self._write(stream_id, "instances", producer, seq, prepare, apply)

    async def add_instance_frames(
        self,
        stream_id: str,
        frames: Sequence[Frame],
        *,
        producer: str,
        render_error: ErrorRenderer,
    ) -> FramesResult:
        """Apply consecutive frames of one producer, each as its own batch, in one commit.

        Frames the producer already had applied are answered from their stored
        responses; a frame that is refused (``Frame.error``, or an error of the
        selector such as bad labels) changes no state, records
        ``render_error(error, seq)`` as its response and uses up its seq. A seq
        that leaves a gap ends the group with a fatal result.
        """

        checked: list[Frame] = []
        for f in frames:
            try:
                if f.X is not None:
                    self._check_instances(f.X.shape[0])
                checked.append(f)
            except LimitExceeded as exc:
                checked.append(Frame(f.seq, error=exc))
        frames = checked

        async def attempt(live: _Live) -> _Attempt[FramesResult]:
            last = live.producers.get(producer, 0)
            results: list[FrameResult] = []
            fresh: list[Frame] = []
            for f in frames:
                if f.seq <= last:
                    stored = await self.store.stored_response(stream_id, producer, f.seq)
                    if stored is None:
                        exc = _seq_conflict(producer, f.seq, last, "is older than the window")
                        results.append(FrameResult(f.seq, render_error(exc, f.seq), fatal=True))
                        break
                    results.append(FrameResult(f.seq, stored, replayed=True))
                elif f.seq == last + len(fresh) + 1:
                    fresh.append(f)
                else:
                    if live.from_cache:
                        raise _StaleCache
                    exc = _seq_conflict(producer, f.seq, last + len(fresh), "leaves a gap")
                    results.append(FrameResult(f.seq, render_error(exc, f.seq), fatal=True))
                    break
            if not fresh:
                return _Attempt(FramesResult(results, live.version))
            version = live.version + 1
            outcome, pairs = await anyio.to_thread.run_sync(
                _apply_frames, live, fresh, producer, version, render_error, self._outcome
            )
            by_seq: dict[int, bytes] = dict(pairs)
            # Results in frame order: replays first (they precede), then the fresh frames.
            ordered = [r for r in results if not r.fatal]
            ordered += [FrameResult(f.seq, by_seq[f.seq]) for f in fresh]
            ordered += [r for r in results if r.fatal]
            if outcome is None:
                return _Attempt(FramesResult(ordered, live.version), responses=pairs)
            selection = outcome.selection if outcome.selection_changed else None
            return _Attempt(
                FramesResult(ordered, version, selection),
                outcome,
                seq=fresh[-1].seq,
                responses=pairs,
            )

        return await self._transact(stream_id, "instances", producer, attempt)

    # ------------------------------------------------------------------ machinery

    def _check_instances(self, m: int) -> None:
        limit = self.settings.max_instances_per_request
        if m > limit:
            raise LimitExceeded(
                f"{m} instances in one batch; at most {limit} are accepted (send smaller "
                "batches or frames).",
                limit="max_instances_per_request",
                maximum=limit,
            )

    def _outcome(
        self,
        live: _Live,
        version: int,
        events: Sequence[dict[str, Any]],
        names: Sequence[str],
        changed: bool,
    ) -> _Outcome:
        sel = live.selector
        now = _iso(self._clock())
        return _Outcome(
            events=list(events),
            names=names,
            blob=codec.encode(sel.name, sel.params.to_dict(), sel.snapshot()),
            selection=_selection_json(sel, version, now),
            status=_dumps(sel.status()),
            selection_changed=changed,
        )

    async def _write(
        self,
        stream_id: str,
        kind: str,
        producer: str,
        seq: int | None,
        prepare: Callable[[_Live], Awaitable[Any]],
        apply: Callable[[_Live, Any, int], tuple[dict[str, Any], _Outcome]],
    ) -> WriteResult:
        """One HTTP request: replayed when its (producer, seq) was applied, else applied."""

        async def attempt(live: _Live) -> _Attempt[WriteResult]:
            if seq is not None:
                replay = await self._check_seq(stream_id, live, producer, seq)
                if replay is not None:
                    return _Attempt(WriteResult(replay, True, live.version))
            prepared = await prepare(live)
            version = live.version + 1
            response, outcome = await anyio.to_thread.run_sync(apply, live, prepared, version)
            body = _dumps(response)
            return _Attempt(
                WriteResult(body, False, version),
                outcome,
                seq=seq,
                responses=[(seq, body)] if seq is not None else [],
            )

        return await self._transact(stream_id, kind, producer, attempt)

    async def _transact(
        self,
        stream_id: str,
        kind: str,
        producer: str,
        attempt: Callable[[_Live], Awaitable[_Attempt[T]]],
    ) -> T:
        """Run ``attempt`` on the stream and commit it as one compare-and-set.

        On a concurrent update the stream is reloaded and the attempt runs again
        on the winner's state (selectors are deterministic).
        """
        async with self._lock(stream_id):
            for retry in range(self.settings.commit_retries):
                live = await self._live(stream_id)
                if live.kind != kind:
                    raise WrongStreamKind(
                        f"Stream {stream_id!r} is a {live.kind} stream; this request is for "
                        f"{kind} streams.",
                        stream_id=stream_id,
                        kind=live.kind,
                    )
                previous = live.selector.snapshot()
                try:
                    step = await attempt(live)
                except _StaleCache:
                    # Another process moved the producer on: read the stream again.
                    self._cache.pop(stream_id, None)
                    continue
                except BaseException:
                    # Nothing was committed: put the selector back as it was.
                    live.selector = type(live.selector).resume(live.selector.params, previous)
                    raise
                if step.outcome is None and not step.responses:
                    return step.result
                commit = self._commit_of(live, producer, step)
                try:
                    committed = await self.store.commit(stream_id, commit)
                except ConcurrentUpdate:
                    # Another process won: reload its state and apply again.
                    self.counters["commit_conflicts"] += 1
                    self._cache.pop(stream_id, None)
                    await asyncio.sleep(random.uniform(0, 0.002 * min(retry + 1, 10)))
                    continue
                except StoreUnavailable:
                    self.counters["store_errors"] += 1
                    self._cache.pop(stream_id, None)
                    raise
                except BaseException:
                    # Outcome unknown (store down, cancelled): forget what we hold.
                    self._cache.pop(stream_id, None)
                    raise
                live.version = committed
                self.counters["commits"] += 1
                if step.outcome is not None:
                    self._tally(step.outcome.events)
                if step.responses:
                    live.producers[producer] = step.responses[-1][0]
                self._remember(stream_id, live)
                return step.result
            raise ConcurrentUpdate(stream_id, live.version)

    def _tally(self, events: Sequence[dict[str, Any]]) -> None:
        """Count what a committed change processed (for /metrics)."""
        c = self.counters
        for ev in events:
            kind = ev["type"]
            if kind == "batch":
                c["features_processed"] += int(ev.get("count", 0))
                c["instances_processed"] += int(ev.get("instances", 0))
            else:
                c[f"decisions_{kind}"] += 1

    def _commit_of(self, live: _Live, producer: str, step: _Attempt[Any]) -> Commit:
        outcome = step.outcome
        now = _iso(self._clock())
        records = {"producer": producer, "responses": step.responses} if step.responses else {}
        if outcome is None:
            return Commit(
                commit_id=uuid.uuid4().hex,
                incarnation=live.incarnation,
                expected_version=live.version,
                blob=b"",
                updated_at=now,
                selection=b"",
                status=b"",
                events=b"",
                state_changed=False,
                **records,  # type: ignore[arg-type]
            )
        return Commit(
            commit_id=uuid.uuid4().hex,
            incarnation=live.incarnation,
            expected_version=live.version,
            blob=outcome.blob,
            updated_at=now,
            selection=outcome.selection,
            status=outcome.status,
            events=_dumps({"seq": step.seq, "producer": producer, "events": outcome.events}),
            names=outcome.names,
            notify=outcome.selection if outcome.selection_changed else b"",
            **records,  # type: ignore[arg-type]
        )

    async def _check_seq(
        self, stream_id: str, live: _Live, producer: str, seq: int
    ) -> bytes | None:
        last = live.producers.get(producer, 0)
        if seq <= last:
            stored = await self.store.stored_response(stream_id, producer, seq)
            if stored is None:
                raise SequenceConflict(
                    f"seq {seq} of producer {producer!r} is older than the replay window; "
                    f"the next expected seq is {last + 1}.",
                    producer=producer,
                    expected_seq=last + 1,
                )
            return stored
        if seq != last + 1:
            if live.from_cache:
                raise _StaleCache
            raise SequenceConflict(
                f"seq {seq} of producer {producer!r} leaves a gap; the next expected seq "
                f"is {last + 1}.",
                producer=producer,
                expected_seq=last + 1,
            )
        return None

    async def next_seq(self, stream_id: str, producer: str) -> int:
        """The seq the producer's next request must carry."""
        async with self._lock(stream_id):
            self._cache.pop(stream_id, None)
            live = await self._live(stream_id)
            return live.producers.get(producer, 0) + 1

    async def _live(self, stream_id: str) -> _Live:
        live = self._cache.get(stream_id)
        if live is not None:
            self._cache.move_to_end(stream_id)
            live.from_cache = True
            return live
        record = await self.store.load(stream_id)
        decoded = await anyio.to_thread.run_sync(codec.decode, record.blob)
        cls = REGISTRY[decoded.selector]
        params = cls.params_type.from_mapping(decoded.params)
        live = _Live(
            info=record.info,
            incarnation=record.incarnation,
            version=record.version,
            selector=cls.resume(params, decoded.state),
            producers=record.producers,
        )
        self._remember(stream_id, live)
        return live

    def _remember(self, stream_id: str, live: _Live) -> None:
        if self.settings.cache_streams <= 0:
            return
        self._cache[stream_id] = live
        self._cache.move_to_end(stream_id)
        while len(self._cache) > self.settings.cache_streams:
            self._cache.popitem(last=False)

    def _lock(self, stream_id: str) -> asyncio.Lock:
        lock = self._locks.get(stream_id)
        if lock is None:
            lock = self._locks[stream_id] = asyncio.Lock()
        return lock


def _apply_frames(
    live: _Live,
    frames: Sequence[Frame],
    producer: str,
    version: int,
    render_error: ErrorRenderer,
    outcome: Callable[[_Live, int, Sequence[dict[str, Any]], Sequence[str], bool], _Outcome],
) -> tuple[_Outcome | None, list[tuple[int, bytes]]]:
    """Apply fresh frames in order (in a worker thread); refused frames keep the state."""
    sel = live.selector
    assert isinstance(sel, InstanceSelector)
    before = sel.selected()
    events: list[dict[str, Any]] = []
    pairs: list[tuple[int, bytes]] = []
    for f in frames:
        if f.error is not None or f.X is None:
            error = f.error or InvalidInput("The frame holds no instances.", field="X")
            pairs.append((f.seq, render_error(error, f.seq)))
            continue
        snapshot = sel.snapshot()
        try:
            update = sel.learn_instances(f.X, f.y)
        except FeatureStreamError as exc:
            # The frame is refused as a whole: put the selector back as it was.
            live.selector = sel = type(sel).resume(sel.params, snapshot)
            pairs.append((f.seq, render_error(exc, f.seq)))
            continue
        events.append(
            {
                "type": "batch",
                "seq": f.seq,
                "instances": update.instances,
                "instances_seen": update.instances_seen,
                "mistakes": update.mistakes,
            }
        )
        response = {
            "version": version,
            "seq": f.seq,
            "producer": producer,
            "instances_seen": update.instances_seen,
            "selected": list(sel.selected()),
        }
        pairs.append((f.seq, _dumps(response)))
    if not events:
        return None, pairs
    changed = before != sel.selected()
    return outcome(live, version, events, (), changed), pairs


class _StaleCache(Exception):
    """The cached copy of a stream is behind the store."""


def _seq_conflict(producer: str, seq: int, last: int, problem: str) -> SequenceConflict:
    return SequenceConflict(
        f"seq {seq} of producer {producer!r} {problem}; the next expected seq is {last + 1}.",
        producer=producer,
        expected_seq=last + 1,
    )


def _check_names(names: Sequence[str], *, field: str, max_length: int) -> None:
    for i, name in enumerate(names):
        if (
            not isinstance(name, str)
            or not name
            or len(name) > max_length
            or not name.isprintable()
        ):
            raise InvalidInput(
                f"Feature names must be non-empty printable strings of at most "
                f"{max_length} characters; item {i} is {str(name)[:40]!r}.",
                field=f"{field}[{i}]",
            )
    if len(set(names)) != len(names):
        seen: set[str] = set()
        dup = next(n for n in names if n in seen or seen.add(n))  # type: ignore[func-returns-value]
        raise InvalidInput(f"Feature name {dup!r} appears twice in the request.", field=field)


def _decision_events(d: Decision) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "type": "accepted" if d.accepted else "rejected",
        "names": [d.feature],
        "reason": d.reason,
        "score": d.score,
    }
    if d.by is not None:
        main["by"] = d.by
    if d.group is not None:
        main["group"] = d.group
    out = [main]
    for e in d.evicted:
        out.append({"type": "evicted", "names": [e.feature], "reason": e.reason, "by": e.by})
    return out


def _selection_json(sel: Selector[Any, Any], version: int, updated_at: str) -> bytes:
    return _dumps(
        {
            "version": version,
            "features": [f.to_json() for f in sel.selected_features()],
            "updated_at": updated_at,
        }
    )


def _resource(s: StreamSummary) -> dict[str, Any]:
    return {**s.info, "version": s.version, "updated_at": s.updated_at}


def _parse_event_id(value: str) -> tuple[int, int]:
    try:
        v, i = value.split("-", 1)
        out = int(v), int(i)
    except ValueError:
        raise InvalidInput(
            f"Event ids look like '<version>-<index>'; got {value!r}.", field="after"
        ) from None
    if out[0] < 0 or out[1] < 0:
        raise InvalidInput(f"Event ids are non-negative; got {value!r}.", field="after")
    return out


__all__ = [
    "ErrorRenderer",
    "Frame",
    "FrameResult",
    "FramesResult",
    "StreamEngine",
    "WriteResult",
    "new_stream_id",
    "utcnow",
]
