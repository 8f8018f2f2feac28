"""What :class:`~featurestream_client.Client` and :class:`~featurestream_client.AsyncClient` share.

The options and their defaults, the steps of one HTTP call (tries, and the
waits between them) and the stream handle's read-only properties, written
once; each client adds only how it does a step (see :mod:`._steps`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

import httpx

from featurestream_client import _core, ws
from featurestream_client._core import Call, Reply
from featurestream_client._steps import Flow, Request, Runner, Sleep
from featurestream_client._streaming import (
    SubscribeMode,
    iter_events_op,
    stream_instances_op,
    subscribe_op,
)
from featurestream_client._writes import Chunking, Producer, StreamCore, new_producer_name
from featurestream_client.errors import (
    ConnectionFailed,
    FeatureStreamError,
    error_from_problem,
)
from featurestream_client.models import InstancesResult, Selection, StreamInfo
from featurestream_client.retry import RetryPolicy, retry_after_seconds

DEFAULT_URL = "http://127.0.0.1:8000"
# Failures after which the request may be sent again (writes carry their seq).
RETRYABLE_TRANSPORT_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)

HttpT = TypeVar("HttpT", httpx.Client, httpx.AsyncClient)
TransportT = TypeVar("TransportT", httpx.BaseTransport, httpx.AsyncBaseTransport)
ClientT = TypeVar("ClientT", bound="_Base[Any, Any]")
T = TypeVar("T")


class _Base(Generic[HttpT, TransportT]):
    """Options shared by :class:`Client` and :class:`~featurestream_client.AsyncClient`.

    The parameters are described on :class:`~featurestream_client.Client`.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 60.0,
        retry: RetryPolicy | None = None,
        chunk_columns: int = 20_000,
        chunk_bytes: int = 8 * 1024 * 1024,
        max_header_bytes: int = 8 * 1024,
        window: int = 16,
        trust_env: bool = True,
        transport: TransportT | None = None,
        http_client: HttpT | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self.chunking = Chunking(chunk_columns, chunk_bytes, max_header_bytes)
        self.window = window
        self.timeout = timeout
        self.trust_env = trust_env
        self._headers = {"Accept": "application/json, application/problem+json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # The algorithms, read once: whether a stream's algorithm is supervised
        # decides how stream_instances sends instances without labels.
        self._catalogue = _core.Catalogue()
        self._owns_http = http_client is None
        self._http: HttpT = http_client or self._open_http(transport)

    def _runner(self, op: Flow[T]) -> Runner[T]:
        """``op`` ready to be driven, its HTTP calls made with this client's retries."""
        return Runner(op, self._attempts)

    def _open_http(self, transport: TransportT | None) -> HttpT:
        """The connection pool of a client given none."""
        raise NotImplementedError

    @property
    def _recv_timeout(self) -> float | None:
        t = self.timeout
        return t.read if isinstance(t, httpx.Timeout) else float(t)

    def _ws_options(self) -> dict[str, Any]:
        auth = {k: v for k, v in self._headers.items() if k == "Authorization"}
        return {
            "additional_headers": auth or None,
            "open_timeout": self._recv_timeout,
            "max_size": 64 * 1024 * 1024,
            # No permessage-deflate: frames are binary floats, which zlib barely
            # shrinks at a cost of most of the time a frame takes end to end.
            "compression": None,
            "proxy": True if self.trust_env else None,
        }

    def _error(self, response: httpx.Response, attempt: int) -> FeatureStreamError:
        problem = _core.parse_problem(response.status_code, response.content)
        err = error_from_problem(response.status_code, problem)
        err.attempts = attempt
        return err

    def _reply(self, response: httpx.Response, attempt: int) -> Reply:
        return Reply(
            response.status_code,
            {k.lower(): v for k, v in response.headers.items()},
            response.content,
            attempt,
        )

    def _connection_failed(self, call: Call, exc: Exception, attempt: int) -> ConnectionFailed:
        why = f"{type(exc).__name__}: {exc}".rstrip(": ")
        if isinstance(exc, httpx.TimeoutException):
            # The server may still be working on it: say how long the client waited.
            t = self._recv_timeout
            within = "in time" if t is None else f"within the client's timeout of {t:g} s"
            why = f"no answer {within} ({why})"
        err = ConnectionFailed(
            f"{call.method} {self.url}{call.path} failed after {attempt} attempt(s): {why}"
        )
        err.attempts = attempt
        return err

    def _attempts(self, call: Call) -> Flow[Reply]:
        """The steps of one call: send it, and again after a wait while the policy allows."""
        attempt = 0
        while True:
            attempt += 1
            request = Request(
                call.method,
                call.path,
                json=call.json,
                content=call.content,
                headers={**self._headers, **call.headers},
                params=dict(call.params) or None,
            )
            try:
                response: httpx.Response = yield request
            except RETRYABLE_TRANSPORT_ERRORS as exc:
                error: FeatureStreamError = self._connection_failed(call, exc, attempt)
                if not self.retry.should_retry(error, attempt):
                    raise error from exc
                yield Sleep(self.retry.delay(attempt))
                continue
            if response.status_code < 300 or response.status_code in call.accept:
                return self._reply(response, attempt)
            error = self._error(response, attempt)
            if not self.retry.should_retry(error, attempt):
                raise error
            wait = retry_after_seconds(response.headers.get("retry-after"))
            yield Sleep(self.retry.delay(attempt, wait))


def probe_op(path: str) -> Flow[bool]:
    """Whether the server answers ``path`` with 200: one plain GET, never retried."""
    try:
        response: httpx.Response = yield Request("GET", path)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


@contextmanager
def ws_handshake(url: str) -> Iterator[None]:
    """Turn the refusals of a WebSocket handshake to ``url`` into typed errors."""
    try:
        from websockets.exceptions import InvalidHandshake, InvalidStatus
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ws.WebSocketUnavailable("The 'websockets' package is not installed.") from exc
    try:
        yield
    except ImportError as exc:  # pragma: no cover - the client half of a declared dependency
        raise ws.WebSocketUnavailable("The 'websockets' package is not installed.") from exc
    except InvalidStatus as exc:
        raise ws.handshake_error(exc.response.status_code, str(exc)) from exc
    except (OSError, TimeoutError, InvalidHandshake) as exc:
        raise ConnectionFailed(f"WebSocket connection to {url} failed: {exc}") from exc


def handle_core(
    stream_id: str, producer: str | None, next_seq: int | None, chunking: Chunking
) -> StreamCore:
    """What a new handle on ``stream_id`` knows (the rules of ``Client.stream``)."""
    name = producer or new_producer_name()
    start = 1 if producer is None else next_seq
    if start is not None and start < 1:
        raise ValueError(f"next_seq must be >= 1; got {start}.")
    return StreamCore(stream_id, Producer(name, start), chunking)


def create_core_op(
    algorithm: str,
    target: Any,
    feature_names: Sequence[str] | None,
    params: Mapping[str, Any] | None,
    stream_id: str | None,
    producer: str | None,
    chunking: Chunking,
    options: Mapping[str, Any] | None = None,
) -> Flow[StreamCore]:
    """Create a stream; what a handle on it knows (its writes numbered from 1).

    ``options`` are further fields of the create request (``target_type``,
    ``labels``, ``ttl_seconds``); those that are None are not sent.
    """
    info = yield from _core.create_op(
        algorithm,
        target=target,
        feature_names=feature_names,
        params=params,
        stream_id=stream_id,
        options=options,
    )
    core = handle_core(info.id, producer, 1, chunking)
    core.info = info
    return core


class _StreamBase(Generic[ClientT]):
    """What a stream handle knows, the same for :class:`Stream` and :class:`AsyncStream`."""

    def __init__(self, client: ClientT, core: StreamCore) -> None:
        self.client = client
        self._core = core

    @property
    def id(self) -> str:
        return self._core.id

    @property
    def producer(self) -> str:
        """The producer name this handle numbers its writes under."""
        return self._core.producer.name

    @property
    def next_seq(self) -> int | None:
        """The seq of this handle's next write (None: to be learnt from the server)."""
        return self._core.producer.next_seq

    @property
    def info(self) -> StreamInfo | None:
        """The stream resource as last read (None before any read)."""
        return self._core.info

    def _stream_instances_op(
        self,
        data: Any,
        y: Any,
        batch_size: int,
        window: int | None,
        on_error: ws.OnError,
        on_selected: Callable[[Selection], None] | None,
        binary: bool,
    ) -> Flow[InstancesResult]:
        return stream_instances_op(
            self._core,
            data,
            y,
            batch_size=batch_size,
            window=window or self.client.window,
            on_error=on_error,
            on_selected=on_selected,
            binary=binary,
            catalogue=self.client._catalogue,
            retry=self.client.retry,
            recv_timeout=self.client._recv_timeout,
        )

    def _subscription(
        self, mode: SubscribeMode, poll_interval: float, timeout: float | None
    ) -> Runner[None]:
        # Checked now, not when the iteration starts.
        if mode not in ("auto", "websocket", "poll"):
            raise ValueError(f"mode must be 'auto', 'websocket' or 'poll'; got {mode!r}.")
        return self.client._runner(
            subscribe_op(self.id, mode, poll_interval, timeout, self.client.retry)
        )

    def _event_pages(
        self, after: str | None, page_size: int, follow: bool, poll_interval: float
    ) -> Runner[None]:
        return self.client._runner(iter_events_op(self.id, after, page_size, follow, poll_interval))


__all__ = [
    "DEFAULT_URL",
    "RETRYABLE_TRANSPORT_ERRORS",
    "SubscribeMode",
    "create_core_op",
    "handle_core",
    "probe_op",
    "ws_handshake",
]
