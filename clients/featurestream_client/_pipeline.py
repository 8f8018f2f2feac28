"""The requests of one write call overlapped with the client's own work.

While a request is out, the next one's body is encoded (:class:`Bodies`) and
a large answer before it is parsed (:class:`Answers`), each in a thread of
the call's own, joined when the call ends.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, Self, TypeVar

from featurestream_client._core import Reply

R = TypeVar("R")
C = TypeVar("C")


class Aside:
    """Work of one call done in a thread of its own (``pool``: None, in the caller's);
    the thread is joined when the call ends."""

    def __init__(self, aside: bool, name: str) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=name) if aside else None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


class Bodies(Aside, Generic[C]):
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


# Answers at least this large are parsed beside the next request (see Answers).
BACKGROUND_BYTES = 1 << 18


class Answers(Aside, Generic[R]):
    """The answers of one call's requests, parsed in order, the large ones in a thread.

    Parsing a large answer (20,000 decisions are 2 MB) takes a while, during which
    the next request would wait and the server sit idle: with ``background``,
    an answer of ``BACKGROUND_BYTES`` or more is parsed in a thread of its own
    while the next request is encoded and sent. ``results`` waits for them all
    (an answer that does not parse raises there); before each next request,
    ``raise_failed`` waits for all but the last answer and raises if one did not
    parse, so that at most one request goes out after an answer that does not
    parse; ``parsed`` gives those that parsed, up to the first that did not.
    """

    def __init__(self, parse: Callable[[Reply], R], *, background: bool) -> None:
        super().__init__(background, "featurestream-answers")
        self._parse = parse
        self._parts: list[Future[R] | Parsed[R]] = []
        self._settled = 0  # the answers before this one are known to have parsed

    def add(self, reply: Reply) -> None:
        if self._pool is not None and len(reply.content) >= BACKGROUND_BYTES:
            try:
                self._parts.append(self._pool.submit(self._parse, reply))
                return
            except RuntimeError:  # the interpreter is shutting down: parsed here
                pass
        self._parts.append(Parsed(self._parse(reply)))

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
class Parsed(Generic[R]):
    value: R

    def result(self) -> R:
        return self.value


__all__ = ["BACKGROUND_BYTES", "Answers", "Aside", "Bodies", "Parsed"]
