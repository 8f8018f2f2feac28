"""The I/O steps a flow asks for, and the bookkeeping of running a flow.

A *flow* is a generator holding the logic of one client operation, written
once: it yields the I/O it needs (an HTTP :class:`~featurestream_client._core.Call`,
or one of the steps below), is sent back each step's outcome or has its error
thrown in, and returns the operation's result. A flow may also hand values to
its caller on the way (:class:`Emit`), which is how ``subscribe`` and
``iter_events`` produce their items. The sync and async clients each have a
small driver that does the steps, one blocking and one with asyncio; what to do
and in which order is decided here, never in a driver.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from featurestream_client._core import Call, Reply

T = TypeVar("T")

#: A client operation: yields steps (and calls), receives their outcomes, returns a T.
Flow = Generator[Any, Any, T]


@dataclass(frozen=True)
class Request:
    """Send one HTTP request as is; the outcome is the ``httpx.Response``."""

    method: str
    path: str
    json: Any = None
    content: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] | None = None

    def kwargs(self) -> dict[str, Any]:
        """The arguments of ``httpx.Client.request`` (and of its async twin)."""
        return {
            "method": self.method,
            "url": self.path,
            "json": self.json,
            "content": self.content,
            "headers": self.headers,
            "params": self.params,
        }


@dataclass(frozen=True)
class Sleep:
    """Wait this many seconds."""

    seconds: float


@dataclass(frozen=True)
class Connect:
    """Open a WebSocket on the server; the outcome is the connection.

    Refusals arrive as typed errors (``ConnectionFailed``, ``WebSocketUnavailable``, ...).
    """

    path: str
    query: Mapping[str, Any]


@dataclass(frozen=True)
class Send:
    """Send one message on a connection."""

    conn: Any
    data: str | bytes | bytearray


@dataclass(frozen=True)
class Recv:
    """The next message of a connection, waiting ``timeout`` seconds at most (None: no limit).

    Raises ``TimeoutError``, or the ``websockets`` ``ConnectionClosed`` once closed.
    """

    conn: Any
    timeout: float | None


@dataclass(frozen=True)
class Poll:
    """A message the connection already received and nobody read yet.

    Raises ``TimeoutError`` when there is none, ``ConnectionClosed`` once closed and empty.
    """

    conn: Any


@dataclass(frozen=True)
class Close:
    """Close a connection."""

    conn: Any


@dataclass(frozen=True)
class Emit:
    """Not I/O: a value for the flow's caller (an item of ``subscribe`` or ``iter_events``)."""

    value: Any


Step = Request | Sleep | Connect | Send | Recv | Poll | Close


class Runner(Generic[T]):
    """A flow being run: the steps still to do, the connections it left open, its result.

    Iterating gives the next step (a :class:`Step` or an :class:`Emit`); the driver
    does it and reports with :meth:`reply` or :meth:`fail` before asking for the
    next one. Each HTTP call the flow yields becomes the steps of ``attempts``
    (its tries and the waits between them). When iteration ends, :attr:`result`
    holds what the flow returned; an error the flow does not handle leaves it.

    Parameters
    ----------
    flow : Flow
        The operation.
    attempts : callable
        The steps that make one HTTP call, retries included.
    """

    def __init__(self, flow: Flow[T], attempts: Callable[[Call], Flow[Reply]]) -> None:
        self._flow = _calls_made_by(flow, attempts)
        self._step: Any = None
        self._outcome: Any = None
        self._error: BaseException | None = None
        #: Connections the flow opened and did not close: the driver closes them at the end.
        self.open: list[Any] = []
        self.result: T

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        outcome, error = self._outcome, self._error
        self._outcome = self._error = None
        if isinstance(self._step, Connect) and error is None:
            self.open.append(outcome)
        try:
            step = self._flow.send(outcome) if error is None else self._flow.throw(error)
        except StopIteration as stop:
            self.result = stop.value
            raise StopIteration from None
        if isinstance(step, Close) and step.conn in self.open:
            self.open.remove(step.conn)
        self._step = step
        return step

    def reply(self, outcome: Any) -> None:
        """The step just done gave ``outcome``."""
        self._outcome = outcome

    def fail(self, error: BaseException) -> None:
        """The step just done raised ``error``: it goes back into the flow."""
        self._error = error

    def close(self) -> None:
        """Abandon the flow (its caller stopped iterating, or an error left it)."""
        self._flow.close()


def _calls_made_by(flow: Flow[T], attempts: Callable[[Call], Flow[Reply]]) -> Flow[T]:
    """``flow``, with each :class:`Call` it yields replaced by the steps of ``attempts``."""
    outcome: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = flow.send(outcome) if error is None else flow.throw(error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        outcome, error = None, None
        try:
            if isinstance(step, Call):
                outcome = yield from attempts(step)
            else:
                outcome = yield step
        except BaseException as exc:
            # Everything goes back into the flow, as ``yield from`` would pass it:
            # errors of a step, and GeneratorExit when the flow is abandoned.
            error = exc


__all__ = [
    "Close",
    "Connect",
    "Emit",
    "Flow",
    "Poll",
    "Recv",
    "Request",
    "Runner",
    "Send",
    "Sleep",
    "Step",
]
