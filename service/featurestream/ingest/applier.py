"""Applying a partition's messages to streams, through the engine's writes.

The applier takes the messages a source read from one partition, in the
partition's order, and applies each through the engine's public writes, as
the HTTP and WebSocket routes do: consecutive ``instances`` messages for one
stream are applied as one commit (``StreamEngine.add_instance_frames``, as
WebSocket frames are), a ``features`` or ``groups`` message as one write
(``StreamEngine.add_features``). Every write carries the partition as its
producer and the message's position as its seq, with the sequence rule of a
log (``engine/sequencing.py``): a message delivered again is a replay,
never a second application.

Each message ends :class:`Applied` or :class:`Dead` (refused with a 4xx
problem, the one an HTTP write would get); a store that does not answer
raises ``StoreUnavailable`` out of :meth:`Applier.apply`, and any other
refusal that is not the message's fault :class:`Retry`, with nothing
acknowledged: the source pauses and delivers the same messages again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass

from featurestream import offload
from featurestream.api import arrays
from featurestream.api.problems import problem_of
from featurestream.api.tenancy import scoped_id
from featurestream.api.ws.messages import FrameDecoder, not_instances
from featurestream.engine import Frame, Problem, StreamEngine
from featurestream.errors import (
    ConcurrentUpdate,
    FeatureStreamError,
    SequenceConflict,
    StoreUnavailable,
    StreamExists,
    StreamNotFound,
)
from featurestream.ingest.messages import Message, checked, columns, creation, frame_input

# Streams whose kind this process knows, at most (the oldest is forgotten first).
KNOWN_STREAMS = 4096


class Retry(Exception):
    """Not the message's fault (a 5xx problem, a commit that kept losing races): the
    messages are settled by none, to be applied again."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.detail)
        self.problem = problem


def refused(exc: FeatureStreamError) -> Dead:
    """The dead letter of a message the engine refused with ``exc``; Retry when the
    refusal is not the message's (a 5xx problem, ``ConcurrentUpdate``)."""
    problem = problem_of(exc)
    if problem.status >= 500 or isinstance(exc, ConcurrentUpdate):
        raise Retry(problem) from exc
    return Dead(problem)


@dataclass(frozen=True, slots=True)
class Applied:
    """The message is applied (``replayed``: it was already, by an earlier delivery)."""

    replayed: bool = False


@dataclass(frozen=True, slots=True)
class Dead:
    """The message is refused: it goes to the dead letters with ``problem``."""

    problem: Problem


Outcome = Applied | Dead


@dataclass(frozen=True, slots=True)
class _Stream:
    kind: str
    supervised: bool


class Applier:
    """Applies messages to the streams of one tenant (None: streams without a tenant)."""

    def __init__(self, engine: StreamEngine, tenant: str | None = None) -> None:
        self.engine = engine
        self.tenant = tenant
        self._known: OrderedDict[str, _Stream] = OrderedDict()
        self.group_max = engine.settings.ws_group_max_frames

    async def apply(self, messages: Sequence[Message]) -> list[Outcome]:
        """The outcome of each message, in order (StoreUnavailable: none is settled)."""
        outcomes: list[Outcome] = []
        i = 0
        while i < len(messages):
            m = messages[i]
            try:
                public, kind = checked(m)
                sid = scoped_id(self.tenant, public)
                stream = await self._stream(sid, m)
            except StoreUnavailable:
                raise
            except FeatureStreamError as exc:
                outcomes.append(refused(exc))
                i += 1
                continue
            if kind == "instances" and stream.kind == "instances":
                j = i + 1
                while j < len(messages) and j - i < self.group_max and _joins(messages[j], m):
                    j += 1
                outcomes += await self._frames(sid, public, stream, messages[i:j])
                i = j
            else:
                outcomes.append(await self._columns(sid, public, stream, m))
                i += 1
        return outcomes

    async def _stream(self, sid: str, m: Message) -> _Stream:
        known = self._known.get(sid)
        if known is not None:
            self._known.move_to_end(sid)
            return known
        try:
            resource = await self.engine.get(sid)
        except StreamNotFound:
            body = creation(m)
            if body is None:
                raise StreamNotFound(sid) from None
            # Created meanwhile (by another consumer): use it.
            with suppress(StreamExists):
                await self.engine.create(
                    stream_id=sid,
                    public_id=m.stream,
                    tenant=self.tenant,
                    algorithm=body.algorithm,
                    params=body.params,
                    target=body.target,
                    target_type=body.target_type,
                    feature_names=body.feature_names,
                    labels=body.labels,
                    ttl_seconds=body.ttl_seconds,
                )
            resource = await self.engine.get(sid)
        known = _Stream(resource.kind, self.engine.supervised(resource.algorithm))
        self._known[sid] = known
        if len(self._known) > KNOWN_STREAMS:
            self._known.popitem(last=False)
        return known

    def _forget(self, sid: str, exc: FeatureStreamError) -> None:
        # Deleted, or created again as another kind: look it up again next time.
        if not isinstance(exc, SequenceConflict):
            self._known.pop(sid, None)

    async def _frames(
        self, sid: str, public: str, stream: _Stream, run: Sequence[Message]
    ) -> list[Outcome]:
        decoder = FrameDecoder(
            public,
            "instances",
            supervised=stream.supervised,
            producer=run[0].partition,
            bounds=arrays.Bounds.instances(self.engine.settings),
        )
        frames: list[Frame] = []
        for m in run:
            try:
                frames.append(await decoder.read(frame_input(m), m.position))
            except FeatureStreamError as exc:
                frames.append(Frame(m.position, error=exc))
        settled: dict[int, Outcome] = {}
        while frames:
            try:
                out = await self.engine.add_instance_frames(
                    sid, frames, producer=run[0].partition, log=True
                )
            except StoreUnavailable:
                raise
            except FeatureStreamError as exc:
                self._forget(sid, exc)
                dead = refused(exc)
                settled.update((f.seq, dead) for f in frames)
                break
            for r in out.results:
                if r.fatal:
                    # At or below the partition's last position, its response no longer
                    # kept: applied long ago.
                    settled[r.seq] = Applied(replayed=True)
                elif isinstance(r.reply, Problem):
                    settled[r.seq] = Dead(r.reply)
                else:
                    settled[r.seq] = Applied(replayed=r.replayed)
            # Frames after a fatal result are not answered: apply them again.
            frames = [f for f in frames if f.seq not in settled]
        return [settled[m.position] for m in run]

    async def _columns(self, sid: str, public: str, stream: _Stream, m: Message) -> Outcome:
        try:
            if m.kind == "instances":
                raise not_instances(public, stream.kind)
            n = await self.engine.n_instances(sid)
            cols = await offload.run(len(m.body), lambda: columns(m, n, self.engine.settings))
            result = await self.engine.add_features(
                sid,
                cols.names,
                cols.X,
                groups=cols.groups,
                producer=m.partition,
                seq=m.position,
                log=True,
            )
        except StoreUnavailable:
            raise
        except SequenceConflict:
            return Applied(replayed=True)  # at or below the last position: applied long ago
        except FeatureStreamError as exc:
            self._forget(sid, exc)
            return refused(exc)
        if result.problem is not None:
            return Dead(result.problem)
        return Applied(replayed=result.replayed)


def _joins(m: Message, first: Message) -> bool:
    """Whether ``m`` is applied in the same commit as the run ``first`` starts."""
    return m.stream == first.stream and m.kind == "instances" and m.partition == first.partition


__all__ = ["KNOWN_STREAMS", "Applied", "Applier", "Dead", "Outcome", "Retry", "refused"]
