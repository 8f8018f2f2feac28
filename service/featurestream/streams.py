"""StreamEngine: load -> resume -> apply -> snapshot -> commit.

The only module that knows both the selectors and the store. Per stream it
serialises this process's writers with an asyncio lock, keeps the decoded
selector of recently used streams in memory (so a process holding the latest
version does not re-read the state), and commits every change as one
compare-and-set. When another process committed first, the commit fails, the
engine reloads the stream and applies the request again: selectors are
deterministic, so the result is exactly that of the serial order the store saw.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import numpy as np
import numpy.typing as npt

from featurestream import codec
from featurestream.config import Settings
from featurestream.errors import (
    ConcurrentUpdate,
    InvalidInput,
    SequenceConflict,
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
from featurestream.store.base import Commit, StateStore, StreamSummary

Clock = Callable[[], datetime]
MAX_NAME_LENGTH = 1024


def utcnow() -> datetime:
    return datetime.now(UTC)


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()


@dataclass
class _Live:
    """A stream as this process last saw it."""

    info: dict[str, Any]
    incarnation: str
    version: int
    selector: Selector[Any, Any]
    producers: dict[str, int] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return str(self.info["kind"])


@dataclass(frozen=True)
class _Outcome:
    """What one applied request commits."""

    response: dict[str, Any]
    events: list[dict[str, Any]]
    names: Sequence[str]
    blob: bytes
    selection: bytes
    status: bytes
    selection_changed: bool


@dataclass(frozen=True)
class WriteResult:
    body: bytes
    replayed: bool
    version: int


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
    ) -> dict[str, Any]:
        cls = REGISTRY.get(algorithm)
        if cls is None:
            raise InvalidInput(
                f"Unknown algorithm {algorithm!r}; expected one of {sorted(REGISTRY)}.",
                field="algorithm",
            )
        resolved = cls.params_type.from_mapping(params)
        sid = stream_id or f"s-{uuid.uuid4().hex[:16]}"
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
            _check_names(feature_names, field="feature_names")
            selector = await anyio.to_thread.run_sync(cls.start, resolved, list(feature_names))
            size = {"n_features": len(feature_names)}
        now = _iso(self._clock())
        info = {
            "id": sid,
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

    async def list(self) -> list[dict[str, Any]]:
        return [_resource(s) for s in await self.store.list_streams()]

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
        if names is not None:
            _check_names(names, field="features")

        async def prepare(live: _Live) -> list[str]:
            if names is None:
                tag = str(seq) if seq is not None else f"v{live.version + 1}"
                chosen = [f"{tag}:{i}" for i in range(X.shape[0])]
            else:
                chosen = list(names)
            known = await self.store.known_names(stream_id, chosen)
            if known:
                shown = ", ".join(repr(n) for n in known[:5])
                raise InvalidInput(
                    f"{len(known)} feature name(s) already in stream {stream_id!r}: {shown}.",
                    field="features",
                )
            return chosen

        def apply(live: _Live, chosen: list[str], version: int) -> _Outcome:
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
            return self._outcome(live, version, response, events, chosen, before != tuple(selected))

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

        async def prepare(live: _Live) -> None:
            return None

        def apply(live: _Live, _: None, version: int) -> _Outcome:
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
            return self._outcome(live, version, response, events, (), before != tuple(selected))

        return await self._write(stream_id, "instances", producer, seq, prepare, apply)

    # ------------------------------------------------------------------ machinery

    def _outcome(
        self,
        live: _Live,
        version: int,
        response: dict[str, Any],
        events: list[dict[str, Any]],
        names: Sequence[str],
        changed: bool,
    ) -> _Outcome:
        sel = live.selector
        now = _iso(self._clock())
        return _Outcome(
            response=response,
            events=events,
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
        apply: Callable[[_Live, Any, int], _Outcome],
    ) -> WriteResult:
        async with self._lock(stream_id):
            for attempt in range(self.settings.commit_retries):
                live = await self._live(stream_id)
                if live.kind != kind:
                    raise WrongStreamKind(
                        f"Stream {stream_id!r} is a {live.kind} stream; this request is for "
                        f"{kind} streams.",
                        stream_id=stream_id,
                        kind=live.kind,
                    )
                if seq is not None:
                    replay = await self._check_seq(stream_id, live, producer, seq)
                    if replay is not None:
                        return WriteResult(replay, True, live.version)
                prepared = await prepare(live)
                previous = live.selector.snapshot()
                version = live.version + 1
                try:
                    outcome = await anyio.to_thread.run_sync(apply, live, prepared, version)
                except BaseException:
                    # Nothing was committed: put the selector back as it was.
                    live.selector = type(live.selector).resume(live.selector.params, previous)
                    raise
                body = _dumps(outcome.response)
                now = _iso(self._clock())
                commit = Commit(
                    commit_id=uuid.uuid4().hex,
                    incarnation=live.incarnation,
                    expected_version=live.version,
                    blob=outcome.blob,
                    updated_at=now,
                    selection=outcome.selection,
                    status=outcome.status,
                    events=_dumps({"seq": seq, "producer": producer, "events": outcome.events}),
                    names=outcome.names,
                    producer=producer if seq is not None else None,
                    seq=seq,
                    response=body,
                    notify=outcome.selection if outcome.selection_changed else b"",
                )
                try:
                    committed = await self.store.commit(stream_id, commit)
                except ConcurrentUpdate:
                    # Another process won: reload its state and apply again.
                    self.counters["commit_conflicts"] += 1
                    self._cache.pop(stream_id, None)
                    await asyncio.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))
                    continue
                except BaseException:
                    # Outcome unknown (store down, cancelled): forget what we hold.
                    self._cache.pop(stream_id, None)
                    raise
                live.version = committed
                self.counters["commits"] += 1
                if seq is not None:
                    live.producers[producer] = seq
                self._remember(stream_id, live)
                return WriteResult(body, False, committed)
            raise ConcurrentUpdate(stream_id, live.version)

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
            raise SequenceConflict(
                f"seq {seq} of producer {producer!r} leaves a gap; the next expected seq "
                f"is {last + 1}.",
                producer=producer,
                expected_seq=last + 1,
            )
        return None

    async def next_seq(self, stream_id: str, producer: str) -> int:
        async with self._lock(stream_id):
            live = await self._live(stream_id)
            return live.producers.get(producer, 0) + 1

    async def _live(self, stream_id: str) -> _Live:
        live = self._cache.get(stream_id)
        if live is not None:
            self._cache.move_to_end(stream_id)
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


def _check_names(names: Sequence[str], *, field: str) -> None:
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name or len(name) > MAX_NAME_LENGTH:
            raise InvalidInput(
                f"Feature names must be non-empty strings of at most {MAX_NAME_LENGTH} "
                f"characters; item {i} is {str(name)[:40]!r}.",
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
        "reason": None if d.reason is None else d.reason.value,
        "score": d.to_json()["score"],
    }
    if d.by is not None:
        main["by"] = d.by
    if d.group is not None:
        main["group"] = d.group
    out = [main]
    for e in d.evicted:
        out.append({"type": "evicted", "names": [e.feature], "reason": e.reason.value, "by": e.by})
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


__all__ = ["StreamEngine", "WriteResult", "utcnow"]
