"""The write transaction: load -> resume -> apply -> commit, retried on a conflict.

:class:`Transactions` is the base of :class:`~featurestream.engine.core.StreamEngine`.
Per stream it serialises this process's writers with an asyncio lock, keeps
the decoded selector of recently used streams in memory (``cache.py``), so a
process holding the latest version does not re-read the state, and commits
every change as one compare-and-set. When another process committed first,
the commit fails, the stream is reloaded and the request applied again:
selectors are deterministic, so the result is exactly that of the serial
order the store saw.

The cached copy is trusted only where the store checks it: a commit is a
compare-and-set on (incarnation, version, last commit id), so a copy that is
behind, of a deleted and re-created stream, or of versions the store lost (a
rollback) never commits. Every answer that is not a commit (a refusal, a
replay that finds no stored response) is given from the cache only after a
cheap check of the stream's head (:meth:`StateStore.head`) shows the copy is
current.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TypeVar

from featurestream.config import Settings
from featurestream.engine import wire
from featurestream.engine.cache import Live, StreamCache
from featurestream.engine.compute import Compute, Threads
from featurestream.engine.idempotency import replayed
from featurestream.engine.outcome import Attempt, StaleCache, commit_of
from featurestream.engine.producers import drop as drop_producers
from featurestream.engine.results import WriteResult
from featurestream.engine.sequencing import Fresh, Gap, Replay, classify, conflict, too_old
from featurestream.engine.work import Work
from featurestream.errors import (
    ConcurrentUpdate,
    FeatureStreamError,
    RequestTooExpensive,
    StoreFull,
    StoreUnavailable,
    WrongStreamKind,
)
from featurestream.store.base import StateStore

Clock = Callable[[], datetime]
T = TypeVar("T")


def iso(t: datetime) -> str:
    """``t`` as the ISO 8601 text stored and sent (UTC as ``Z``)."""
    return t.isoformat().replace("+00:00", "Z")


class Transactions:
    """A store, this process's copies of its streams, and the commit of a write."""

    def __init__(
        self, store: StateStore, settings: Settings, clock: Clock, compute: Compute | None
    ) -> None:
        self.store = store
        self.settings = settings
        self._clock = clock
        # Where selector work runs (engine/compute.py): threads of this process unless
        # the caller (the app) gives compute workers.
        self.compute: Compute = compute or Threads()
        self.cache = StreamCache(settings.cache_streams, settings.cache_bytes)
        self.counters: Counter[str] = Counter()

    async def _write(
        self,
        stream_id: str,
        kind: str,
        producer: str,
        seq: int | None,
        digest: bytes,
        prepare: Callable[[Live], Awaitable[Work]],
        *,
        log: bool = False,
    ) -> WriteResult:
        """One HTTP request: replayed when its (producer, seq) was applied, else applied.

        A seq applied with other content (another ``digest``) is refused: SeqReused.
        ``log``: the producer is a log's partition (``sequencing.py``).
        """

        async def attempt(live: Live) -> Attempt[WriteResult]:
            if seq is not None:
                verdict = classify(seq, live.producers.get(producer, 0), log=log)
                if isinstance(verdict, Replay):
                    stored = await self.store.stored_response(stream_id, producer, seq)
                    if stored is None:
                        if live.from_cache:
                            raise StaleCache
                        raise conflict(too_old(verdict), producer)
                    body = replayed(stored, digest, producer, seq, verdict.expected)
                    problem = wire.stored_problem(body)
                    return Attempt(WriteResult(body, True, live.version, problem))
                if isinstance(verdict, Gap):
                    if live.from_cache:
                        raise StaleCache
                    raise conflict(verdict, producer)
                assert isinstance(verdict, Fresh)
            work = await prepare(live)
            version = live.version + 1
            answer, outcome = await self.compute.apply(stream_id, live, work, version)
            assert isinstance(answer, tuple)
            body, sealed = answer
            return Attempt(
                WriteResult(body, False, version if outcome is not None else live.version),
                outcome,
                seq=seq,
                responses=[(seq, sealed)] if seq is not None else [],
            )

        return await self._transact(stream_id, kind, producer, attempt, log=log)

    async def _transact(
        self,
        stream_id: str,
        kind: str,
        producer: str,
        attempt: Callable[[Live], Awaitable[Attempt[T]]],
        *,
        log: bool = False,
    ) -> T:
        """Run ``attempt`` on the stream and commit it as one compare-and-set.

        On a concurrent update the stream is reloaded and the attempt runs again
        on the winner's state (selectors are deterministic). A commit that records
        ``producer`` also drops the producer records past their retention or the cap
        (``producers.py``); ``log``: the producer is a log's partition, never dropped.
        """
        async with self.cache.locked(stream_id), self._counted():
            verified = False
            for retry in range(self.settings.commit_retries):
                live = await self._live(stream_id)
                if verified:
                    # The head showed this copy is current: its refusals stand.
                    live.from_cache = verified = False
                if live.kind != kind:
                    if await self._stale(stream_id, live):
                        continue
                    raise WrongStreamKind.for_request(stream_id, live.kind, kind)
                try:
                    step = await attempt(live)
                except StaleCache:
                    # A refusal from the cached copy (a gap, a replay with no stored
                    # response): answer it only once the copy is known to be current.
                    verified = not await self._stale(stream_id, live)
                    continue
                except BaseException as exc:
                    # Nothing was committed (the compute put the selector back as it was).
                    if (
                        isinstance(exc, FeatureStreamError)
                        # Over budget: applied again, it would be over budget again.
                        and not isinstance(exc, (StoreUnavailable, RequestTooExpensive))
                        and await self._stale(stream_id, live)
                    ):
                        # Refused by a copy of another incarnation or version: try again.
                        continue
                    raise
                if step.outcome is None and not step.responses:
                    return step.result
                now = self._clock()
                seen_ms: int | None = None
                drops: tuple[str, ...] = ()
                if step.responses and not log:
                    seen_ms = int(now.timestamp() * 1000)
                    drops = drop_producers(
                        live.seen,
                        producer,
                        seen_ms,
                        retention_ms=int(self.settings.producer_retention * 1000),
                        cap=self.settings.max_producers,
                    )
                commit = commit_of(live, producer, step, iso(now), seen_ms, drops)
                try:
                    committed = await self.store.commit(stream_id, commit)
                except ConcurrentUpdate:
                    # Another process won, or the store is not at this copy's version any
                    # more (a rollback): reload and apply again.
                    self.counters["commit_conflicts"] += 1
                    self.cache.drop(stream_id)
                    await asyncio.sleep(random.uniform(0, 0.002 * min(retry + 1, 10)))
                    continue
                except BaseException:
                    # Outcome unknown (store down or hung, cancelled): forget what we hold.
                    self.cache.drop(stream_id)
                    raise
                live.version = committed
                live.commit_id = commit.commit_id
                self.counters["commits"] += 1
                if step.outcome is not None:
                    self.compute.committed(live, step.outcome)
                    self.counters.update(step.outcome.tally)
                for gone in drops:
                    live.producers.pop(gone, None)
                    live.seen.pop(gone, None)
                if step.responses:
                    live.producers[producer] = step.responses[-1][0]
                    if seen_ms is not None:
                        live.seen[producer] = seen_ms
                self.cache.put(stream_id, live)
                return step.result
            raise ConcurrentUpdate(stream_id, live.version)

    async def _stale(self, stream_id: str, live: Live) -> bool:
        """Whether ``live`` came from the cache and is not the store's current stream
        (then it is dropped). StreamNotFound when the stream is gone."""
        if not live.from_cache:
            return False
        head = await self.store.head(stream_id)
        if (head.incarnation, head.version, head.commit_id) == (
            live.incarnation,
            live.version,
            live.commit_id,
        ):
            return False
        self.cache.drop(stream_id)
        return True

    @asynccontextmanager
    async def _counted(self) -> AsyncIterator[None]:
        """Count the calls that fail because the store is unavailable (or full)."""
        try:
            yield
        except StoreUnavailable as exc:
            self.counters["store_errors"] += 1
            if isinstance(exc, StoreFull):
                self.counters["store_full"] += 1
            raise

    async def _live(self, stream_id: str) -> Live:
        live = self.cache.get(stream_id)
        if live is not None:
            live.from_cache = True
            return live
        record = await self.store.load(stream_id)
        live = Live(
            info=record.info,
            incarnation=record.incarnation,
            version=record.version,
            selector=None,
            producers=record.producers,
            seen=record.seen,
            commit_id=record.commit_id,
        )
        # Raises NumericallyUnstable for a state that is not finite: refused, never cached.
        await self.compute.load(stream_id, live, record.blob)
        self.cache.put(stream_id, live)
        return live


__all__ = ["Clock", "Transactions", "iso"]
