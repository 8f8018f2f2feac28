"""StreamEngine: the requests on streams, from create to reads and writes.

The only code that knows both the selectors and the store. Each write is
checked and prepared here, then applied and committed by the write
transaction of its base class (``transact.py``: load -> resume -> apply ->
commit as one compare-and-set, retried when another process committed
first). Reads that need the stream's state (the size of a feature stream,
an evaluation) use this process's copy only after a cheap check of the
stream's head (:meth:`StateStore.head`) shows the copy is current.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from functools import partial
from typing import Any

import anyio
import numpy as np
import numpy.typing as npt

from featurestream import codec, offload
from featurestream.config import Settings
from featurestream.engine import catalogue, wire
from featurestream.engine import evaluation as judged
from featurestream.engine import history as past
from featurestream.engine.budget import Budget
from featurestream.engine.cache import Live
from featurestream.engine.catalogue import check_names
from featurestream.engine.compute import Compute
from featurestream.engine.events import read_events
from featurestream.engine.frames import Frame, Reply, attempt_frames, prepared
from featurestream.engine.idempotency import content_bytes, content_digest
from featurestream.engine.outcome import Attempt, Outcome, finite_state
from featurestream.engine.results import (
    AlgorithmInfo,
    EventPage,
    FramesResult,
    Selection,
    StoredSelection,
    StreamResource,
    StreamStatus,
    WriteResult,
)
from featurestream.engine.transact import Clock, Transactions, iso
from featurestream.engine.work import FeaturesWork, FramesWork, InstancesWork, resume_stored
from featurestream.errors import LimitExceeded, QuotaExceeded, WrongStreamKind
from featurestream.selectors import Selector
from featurestream.store.base import QuotaReached, StateStore, Subscription


def new_stream_id() -> str:
    """A fresh stream id for a create request that names none."""
    return f"s-{uuid.uuid4().hex[:16]}"


def utcnow() -> datetime:
    return datetime.now(UTC)


class StreamEngine(Transactions):
    """Applies requests to streams kept in a StateStore."""

    def __init__(
        self,
        store: StateStore,
        settings: Settings,
        clock: Clock = utcnow,
        compute: Compute | None = None,
    ) -> None:
        super().__init__(store, settings, clock, compute)
        self.evaluations = judged.EvaluationCache()

    # ------------------------------------------------------------------ catalogue

    @staticmethod
    def algorithms() -> list[AlgorithmInfo]:
        """Every algorithm a stream can be created with, by name."""
        return catalogue.algorithms()

    @staticmethod
    def supervised(algorithm: str) -> bool:
        """Whether instances of the algorithm's streams carry labels (the last column)."""
        return catalogue.supervised(algorithm)

    # ------------------------------------------------------------------ streams

    async def create(
        self,
        *,
        stream_id: str | None,
        algorithm: str,
        params: dict[str, Any] | None,
        target: Sequence[float | str] | None,
        feature_names: Sequence[str] | None,
        public_id: str | None = None,
        tenant: str | None = None,
        labels: Mapping[str, str] | None = None,
        ttl_seconds: float | None = None,
        target_type: str = "auto",
    ) -> StreamResource:
        cls, resolved = catalogue.resolve(algorithm, params)
        sid = stream_id or new_stream_id()
        quota = self.settings.max_streams_per_tenant
        start, size = catalogue.starter(
            cls,
            resolved,
            target,
            feature_names,
            max_name_length=self.settings.max_name_length,
            target_type=target_type,
        )
        selector: Selector[Any, Any] = await anyio.to_thread.run_sync(start)
        now = iso(self._clock())
        # The stored info: the stream resource as created, never changed afterwards.
        info = {
            "id": public_id or sid,
            **({"tenant": tenant} if tenant is not None else {}),
            "algorithm": algorithm,
            "kind": cls.kind,
            "params": resolved.to_dict(),
            **size,
            "created_at": now,
            # The owner's bookkeeping, and the expiry the store applies (store/base.py).
            **({"labels": dict(labels)} if labels else {}),
            **({"ttl_seconds": ttl_seconds} if ttl_seconds is not None else {}),
        }
        state = finite_state(selector, public_id or sid)
        blob = codec.encode(cls.name, resolved.to_dict(), state)
        incarnation = uuid.uuid4().hex
        selection = wire.selection(Selection(0, selector.selected_features(), now))
        status = wire.status_counters(selector.status())
        try:
            # The store counts the tenant's streams and creates in one atomic step.
            async with self._counted():
                await self.store.create(
                    sid, info, incarnation, blob, now, selection, status, tenant=tenant, quota=quota
                )
        except QuotaReached:
            raise QuotaExceeded(
                f"This tenant already has {quota} streams, the most it may hold; delete "
                "streams it no longer needs.",
                limit="max_streams_per_tenant",
                maximum=quota,
            ) from None
        live = Live(info, incarnation, 0, selector)
        self.compute.hold(live, blob)
        self.cache.put(sid, live)
        return wire.stream_resource(info, 0, now)

    async def get(self, stream_id: str) -> StreamResource:
        s = await self.store.summary(stream_id)
        return wire.stream_resource(s.info, s.version, s.updated_at, s.status)

    async def list(self, tenant: str | None = None) -> list[StreamResource]:
        """The streams of ``tenant`` (None: the streams created without a tenant)."""
        return [
            wire.stream_resource(s.info, s.version, s.updated_at, s.status)
            for s in await self.store.list_streams(tenant)
            if s.info.get("tenant") == tenant
        ]

    async def delete(self, stream_id: str) -> bool:
        async with self.cache.locked(stream_id), self._counted():
            self.cache.drop(stream_id)
            return await self.store.delete(stream_id)

    # ------------------------------------------------------------------ reads

    async def ping(self) -> bool:
        """Whether the store answers."""
        return await self.store.ping()

    async def n_instances(self, stream_id: str) -> int:
        """Rows of a feature stream (from memory when this process holds the stream and
        it is still the same incarnation: the id may have been deleted and created again)."""
        live = self.cache.peek(stream_id)
        if live is not None and (await self.store.head(stream_id)).incarnation != live.incarnation:
            self.cache.drop(stream_id)
            live = None
        info = live.info if live is not None else (await self.store.summary(stream_id)).info
        if info["kind"] != "features":
            raise WrongStreamKind.for_request(stream_id, str(info["kind"]), "features")
        return int(info["n_instances"])

    async def selection(self, stream_id: str) -> StoredSelection:
        """The committed selection document, as stored (no state is decoded, no info read)."""
        version, document = await self.store.selection(stream_id)
        return StoredSelection(version, document)

    def subscribe(self, stream_id: str) -> AbstractAsyncContextManager[Subscription]:
        """Selection notifications of the stream, from every process (see the store)."""
        return self.store.subscribe(stream_id)

    async def status(self, stream_id: str) -> StreamStatus:
        s = await self.store.summary(stream_id)
        return StreamStatus(
            id=str(s.info["id"]),
            algorithm=str(s.info["algorithm"]),
            kind=str(s.info["kind"]),
            version=s.version,
            updated_at=s.updated_at,
            counters=wire.parse_status_counters(s.status),
        )

    async def events(self, stream_id: str, after: str | None = None, limit: int = 100) -> EventPage:
        """Events in order, after the event id ``after`` (``<version>-<index>``)."""
        return await read_events(self.store, stream_id, after, limit)

    async def selection_at(self, stream_id: str, version: int) -> Selection:
        """The selection after ``version``, rebuilt from the event log (``history.py``)."""
        return await past.selection_at(self.store, stream_id, version)

    async def history(
        self, stream_id: str, after_version: int | None = None, limit: int = 100
    ) -> past.HistoryPage:
        """The changes of the selected set after ``after_version``, in order."""
        return await past.history(self.store, stream_id, after_version, limit)

    async def stability(self, stream_id: str, last: int = 20) -> past.Stability:
        """Jaccard and Nogueira's stability over the last ``last`` selections."""
        return await past.stability(self.store, stream_id, last)

    async def evaluation(
        self,
        stream_id: str,
        model: str,
        folds: int,
        repeats: int,
        run: judged.Run[dict[str, Any]],
        *,
        tenant: str | None = None,
    ) -> dict[str, Any]:
        """How good the current selection is (``evaluation.py``); heavy work goes to ``run``,
        held to ``request_time_budget`` once it runs."""
        judged.check_query(model, folds, repeats)
        view = await self._view(stream_id)
        budget = self.settings.request_time_budget
        return await judged.evaluate(
            view,
            self.evaluations,
            stream_id,
            model,
            folds,
            repeats,
            run,
            tenant=tenant,
            budget=budget,
        )

    async def _view(self, stream_id: str) -> judged.StateView:
        """The committed state of the stream, as the store holds it now."""
        async with self.cache.locked(stream_id):
            while True:
                live = await self._live(stream_id)
                if not await self._stale(stream_id, live):
                    break
            sel = live.selector
            if sel is None:
                # Held encoded (compute workers): decoded for this evaluation only.
                decoded = await anyio.to_thread.run_sync(resume_stored, stream_id, live.blob)
                sel = decoded[0]
            return judged.StateView(
                live.info,
                live.incarnation,
                live.version,
                sel.name,
                sel.snapshot(),
                sel.params.to_dict(),
            )

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
        log: bool = False,
    ) -> WriteResult:
        """Append b feature columns (``X`` is ``(b, n)`` feature-major), in order.

        ``log``: the producer is a log's partition, whose seqs may skip
        (``sequencing.py``).
        """
        limit = self.settings.max_columns_per_request
        if X.shape[0] > limit:
            raise LimitExceeded(
                f"{X.shape[0]} columns in one request; at most {limit} are accepted "
                "(split the request).",
                limit="max_columns_per_request",
                maximum=limit,
            )
        if names is not None:
            check = partial(
                check_names, names, field="features", max_length=self.settings.max_name_length
            )
            await offload.run(sum(map(len, names)), check)
        digest = await self._digest(seq, "features", names, X, groups)
        budget = Budget(self.settings.request_time_budget, "columns", X.shape[0])

        async def prepare(live: Live) -> FeaturesWork:
            # Names already in the stream are refused by the store's commit itself
            # (made atomic with it by its version check): see DuplicateNames.
            if names is not None:
                chosen = list(names)
            else:
                # Unnamed columns: named after the request, unique in the stream (a seq
                # is unique per producer, a version per stream).
                tag = f"{producer}:{seq}" if seq is not None else f"v{live.version + 1}"
                chosen = [f"{tag}:{i}" for i in range(X.shape[0])]
            return FeaturesWork(
                seq, producer, budget, iso(self._clock()), digest, chosen, X, groups
            )

        return await self._write(stream_id, "features", producer, seq, digest, prepare, log=log)

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
        digest = await self._digest(seq, "instances", X, y)
        budget = Budget(self.settings.request_time_budget, "instances", X.shape[0])

        async def prepare(live: Live) -> InstancesWork:
            return InstancesWork(seq, producer, budget, iso(self._clock()), digest, X, y)

        return await self._write(stream_id, "instances", producer, seq, digest, prepare)

    async def add_instance_frames(
        self, stream_id: str, frames: Sequence[Frame], *, producer: str, log: bool = False
    ) -> FramesResult:
        """Apply consecutive frames of one producer, each as its own batch, in one commit.

        Frames the producer already had applied are answered from their stored
        responses; a frame that is refused (``Frame.error``, or an error of the
        selector such as bad labels) changes no state, is answered with its
        problem and uses up its seq. A seq that leaves a gap ends the group
        with a fatal result (see ``frames.py``). ``log``: the producer is a log's
        partition, whose seqs may skip (``sequencing.py``).
        """
        checked: list[Frame] = []
        for f in frames:
            try:
                if f.X is not None:
                    self._check_instances(f.X.shape[0])
                checked.append(f)
            except LimitExceeded as exc:
                checked.append(Frame(f.seq, error=exc))

        async def digests_of(sent_again: Sequence[Frame]) -> list[bytes]:
            # Frames sent again: their digests decide which are retries (all of them
            # at once: a resumed connection resends many).
            def digests() -> list[bytes]:
                return [prepared(f)[1] for f in sent_again]

            return await offload.run(sum(content_bytes(f.X, f.y) for f in sent_again), digests)

        async def stored(seq: int) -> bytes | None:
            return await self.store.stored_response(stream_id, producer, seq)

        async def apply(
            live: Live, fresh: Sequence[Frame], version: int
        ) -> tuple[Outcome | None, list[Reply]]:
            budget = self.settings.request_time_budget
            work = FramesWork(stream_id, fresh, producer, budget, iso(self._clock()))
            replies, outcome = await self.compute.apply(stream_id, live, work, version)
            assert isinstance(replies, list)
            return outcome, replies

        async def attempt(live: Live) -> Attempt[FramesResult]:
            return await attempt_frames(
                stream_id, live, checked, producer, digests_of, stored, apply, log=log
            )

        return await self._transact(stream_id, "instances", producer, attempt, log=log)

    async def next_seq(self, stream_id: str, producer: str) -> int:
        """The seq the producer's next request must carry."""
        async with self.cache.locked(stream_id):
            self.cache.drop(stream_id)
            live = await self._live(stream_id)
            return live.producers.get(producer, 0) + 1

    # ------------------------------------------------------------------ machinery

    @staticmethod
    async def _digest(seq: int | None, kind: str, *parts: Any) -> bytes:
        """The digest stored with a write's seq (see ``idempotency.py``); none without a seq."""
        if seq is None:
            return b""
        return await offload.run(content_bytes(*parts), partial(content_digest, kind, *parts))

    def _check_instances(self, m: int) -> None:
        limit = self.settings.max_instances_per_request
        if m > limit:
            raise LimitExceeded(
                f"{m} instances in one batch; at most {limit} are accepted (send smaller "
                "batches or frames).",
                limit="max_instances_per_request",
                maximum=limit,
            )


__all__ = ["StreamEngine", "new_stream_id", "utcnow"]
