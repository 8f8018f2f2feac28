"""The asynchronous client: :class:`AsyncClient` and its :class:`AsyncStream` handles.

The same operations as :mod:`featurestream_client.client`, awaited.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from featurestream_client import _core, _data, ws
from featurestream_client._core import Call, Op, Producer, Reply, StreamCore
from featurestream_client.client import (
    _DROPPED,
    DEFAULT_URL,
    RETRYABLE_TRANSPORT_ERRORS,
    SubscribeMode,
    _Base,
)
from featurestream_client.errors import ConnectionFailed, FeatureStreamError
from featurestream_client.models import (
    Algorithm,
    Event,
    EventPage,
    FeaturesResult,
    InstancesResult,
    Selection,
    StreamInfo,
)
from featurestream_client.retry import RetryPolicy, retry_after_seconds

T = TypeVar("T")


class AsyncClient(_Base):
    """The asynchronous twin of :class:`~featurestream_client.Client` (same parameters).

    ``transport`` may be an ``httpx.ASGITransport(app)`` to talk to an app in
    the same process.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 30.0,
        retry: RetryPolicy | None = None,
        chunk_columns: int = 2000,
        chunk_bytes: int = 8 * 1024 * 1024,
        max_header_bytes: int = 8 * 1024,
        window: int = 16,
        trust_env: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(
            url,
            api_key=api_key,
            timeout=timeout,
            retry=retry,
            chunk_columns=chunk_columns,
            chunk_bytes=chunk_bytes,
            max_header_bytes=max_header_bytes,
            window=window,
            trust_env=trust_env,
        )
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(
            base_url=self.url, timeout=timeout, transport=transport, trust_env=trust_env
        )

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncClient({self.url!r})"

    # ------------------------------------------------------------ transport

    async def _send(self, call: Call) -> Reply:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    json=call.json,
                    content=call.content,
                    headers={**self._headers, **call.headers},
                    params=dict(call.params) or None,
                )
            except RETRYABLE_TRANSPORT_ERRORS as exc:
                error: FeatureStreamError = self._connection_failed(call, exc, attempt)
                if not self.retry.should_retry(error, attempt):
                    raise error from exc
                await asyncio.sleep(self.retry.delay(attempt))
                continue
            if response.status_code < 300 or response.status_code in call.accept:
                return self._reply(response, attempt)
            error = self._error(response, attempt)
            if not self.retry.should_retry(error, attempt):
                raise error
            wait = retry_after_seconds(response.headers.get("retry-after"))
            await asyncio.sleep(self.retry.delay(attempt, wait))

    async def _run(self, op: Op[T]) -> T:
        try:
            call = next(op)
            while True:
                try:
                    reply = await self._send(call)
                except FeatureStreamError as exc:
                    call = op.throw(exc)
                else:
                    call = op.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result

    # ------------------------------------------------------------ server

    async def health(self) -> bool:
        try:
            return (await self._http.get("/healthz")).status_code == 200
        except httpx.HTTPError:
            return False

    async def ready(self) -> bool:
        try:
            return (await self._http.get("/readyz")).status_code == 200
        except httpx.HTTPError:
            return False

    async def algorithms(self) -> list[Algorithm]:
        return await self._run(_core.algorithms_op())

    async def streams(self) -> list[StreamInfo]:
        return await self._run(_core.list_streams_op())

    async def create_stream(
        self,
        algorithm: str,
        *,
        target: Any = None,
        feature_names: Sequence[str] | None = None,
        params: Mapping[str, Any] | None = None,
        id: str | None = None,
        producer: str | None = None,
    ) -> AsyncStream:
        """See :meth:`featurestream_client.Client.create_stream`."""
        info = await self._run(
            _core.create_op(
                algorithm, target=target, feature_names=feature_names, params=params, stream_id=id
            )
        )
        handle = self.stream(info.id, producer=producer, next_seq=1 if producer else None)
        handle._core.info = info
        return handle

    def stream(
        self, stream_id: str, *, producer: str | None = None, next_seq: int | None = None
    ) -> AsyncStream:
        """See :meth:`featurestream_client.Client.stream`."""
        name = producer or _core.new_producer_name()
        start: int | None = 1 if producer is None else next_seq
        if start is not None and start < 1:
            raise ValueError(f"next_seq must be >= 1; got {start}.")
        return AsyncStream(self, StreamCore(stream_id, Producer(name, start), self.chunking))

    async def get_stream(self, stream_id: str, *, producer: str | None = None) -> AsyncStream:
        handle = self.stream(stream_id, producer=producer)
        await handle.refresh()
        return handle

    async def delete_stream(self, stream_id: str) -> None:
        await self._run(_core.delete_op(stream_id))

    async def _ws_connect(self, path: str, query: Mapping[str, Any]) -> Any:
        try:
            from websockets.asyncio.client import connect
            from websockets.exceptions import InvalidHandshake, InvalidStatus
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise ws.WebSocketUnavailable("The 'websockets' package is not installed.") from exc
        url = ws.ws_url(self.url, path, query)
        try:
            return await connect(url, **self._ws_options())
        except InvalidStatus as exc:
            raise ws.handshake_error(exc.response.status_code, str(exc)) from exc
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            raise ConnectionFailed(f"WebSocket connection to {url} failed: {exc}") from exc


class AsyncStream:
    """The asynchronous twin of :class:`~featurestream_client.Stream`."""

    def __init__(self, client: AsyncClient, core: StreamCore) -> None:
        self.client = client
        self._core = core

    def __repr__(self) -> str:
        return f"AsyncStream({self.id!r}, producer={self.producer!r})"

    @property
    def id(self) -> str:
        return self._core.id

    @property
    def producer(self) -> str:
        return self._core.producer.name

    @property
    def next_seq(self) -> int | None:
        return self._core.producer.next_seq

    @property
    def info(self) -> StreamInfo | None:
        return self._core.info

    async def refresh(self) -> StreamInfo:
        self._core.info = await self.client._run(_core.get_info_op(self.id))
        return self._core.info

    async def add_features(
        self,
        data: Any,
        names: Sequence[str] | None = None,
        *,
        chunk_columns: int | None = None,
        chunk_bytes: int | None = None,
    ) -> FeaturesResult:
        return await self.client._run(
            self._core.add_features_op(
                data, names, chunk_columns=chunk_columns, chunk_bytes=chunk_bytes
            )
        )

    async def add_groups(
        self,
        groups: Mapping[str, Any] | Sequence[tuple[str, Any]],
        *,
        chunk_columns: int | None = None,
        chunk_bytes: int | None = None,
    ) -> FeaturesResult:
        return await self.client._run(
            self._core.add_groups_op(groups, chunk_columns=chunk_columns, chunk_bytes=chunk_bytes)
        )

    async def add_instances(
        self,
        X: Any,
        y: Any = None,
        *,
        batch_size: int | None = None,
    ) -> InstancesResult:
        return await self.client._run(self._core.add_instances_op(X, y, batch_size=batch_size))

    async def stream_instances(
        self,
        data: Any,
        y: Any = None,
        *,
        batch_size: int = 100,
        window: int | None = None,
        on_error: ws.OnError = "raise",
        on_selected: Callable[[Selection], None] | None = None,
        binary: bool = True,
    ) -> InstancesResult:
        """See :meth:`featurestream_client.Stream.stream_instances`."""
        self._core._check_kind("instances")
        if self._core.producer.next_seq is None:
            await self.client._run(self._core.resync_op())
        first = self._core.producer.next_seq
        assert first is not None
        feed = ws.InstanceFeed(
            _data.iter_frames(data, y, batch_size),
            first,
            window or self.client.window,
            on_error,
            on_selected,
            binary,
        )
        try:
            await self._run_feed(feed)
        finally:
            self._core.producer.next_seq = None if feed.pending else feed.next_seq
        if feed.failure is not None:
            feed.failure.partial = feed.result()
            raise feed.failure
        return feed.result()

    async def _run_feed(self, feed: ws.InstanceFeed) -> None:
        from websockets.exceptions import ConnectionClosed

        path = _core.stream_path(self.id, "/ws")
        conn = None
        failures = 0
        try:
            while not feed.done:
                if conn is None:
                    query = {"producer": self.producer, "seq": feed.resume_seq()}
                    try:
                        conn = await self.client._ws_connect(path, query)
                    except ConnectionFailed as exc:
                        failures += 1
                        if not self.client.retry.should_retry(exc, failures):
                            raise
                        await asyncio.sleep(self.client.retry.delay(failures))
                        continue
                    for frame in feed.unanswered():
                        await conn.send(frame.data)
                try:
                    for frame in feed.take():
                        await conn.send(frame.data)
                    if feed.pending:
                        message = await asyncio.wait_for(conn.recv(), self.client._recv_timeout)
                        feed.receive(message)
                        failures = 0
                except (ConnectionClosed, TimeoutError) as exc:
                    closed = isinstance(exc, ConnectionClosed) and exc.rcvd is not None
                    code = exc.rcvd.code if closed else None  # type: ignore[union-attr]
                    reason = exc.rcvd.reason if closed else ""  # type: ignore[union-attr]
                    # What the server said before closing (acks, or why it closed) first.
                    for pending in await _drain(conn):
                        feed.receive(pending)
                    await conn.close()
                    conn = None
                    failures += 1
                    if code not in ws.RESUMABLE_CLOSE_CODES:
                        raise ws.close_error(code, reason) from exc
                    if failures >= self.client.retry.attempts:
                        raise ConnectionFailed(
                            f"The WebSocket of stream {self.id!r} dropped {failures} times "
                            f"(last close code {code})."
                        ) from exc
                    await asyncio.sleep(
                        self.client.retry.delay(failures, 1.0 if code == 1013 else None)
                    )
        finally:
            if conn is not None:
                await conn.close()
        feed.selection = await self.selected()

    async def selected(self) -> Selection:
        selection, _ = await self.client._run(_core.selected_op(self.id))
        assert selection is not None
        return selection

    async def events(self, after: str | None = None, limit: int = 100) -> EventPage:
        return await self.client._run(_core.events_op(self.id, after, limit))

    async def iter_events(
        self,
        after: str | None = None,
        *,
        page_size: int = 1000,
        follow: bool = False,
        poll_interval: float = 1.0,
    ) -> AsyncIterator[Event]:
        while True:
            page = await self.events(after, page_size)
            for event in page.events:
                yield event
            after = page.next
            if len(page.events) < page_size:
                if not follow:
                    return
                await asyncio.sleep(poll_interval)

    async def status(self) -> dict[str, Any]:
        return await self.client._run(_core.status_op(self.id))

    async def delete(self) -> None:
        await self.client._run(_core.delete_op(self.id))

    def subscribe(
        self,
        *,
        mode: SubscribeMode = "auto",
        poll_interval: float = 1.0,
        timeout: float | None = None,
    ) -> AsyncIterator[Selection]:
        """See :meth:`featurestream_client.Stream.subscribe`."""
        if mode not in ("auto", "websocket", "poll"):
            raise ValueError(f"mode must be 'auto', 'websocket' or 'poll'; got {mode!r}.")
        return self._subscribe(mode, poll_interval, timeout)

    async def _subscribe(
        self, mode: SubscribeMode, poll_interval: float, timeout: float | None
    ) -> AsyncIterator[Selection]:
        path = _core.stream_path(self.id, "/ws")
        conn = None
        if mode != "poll":
            try:
                conn = await self.client._ws_connect(path, {})
            except ws.WebSocketUnavailable:
                if mode == "websocket":
                    raise
        try:
            current, etag = await self.client._run(_core.selected_op(self.id))
            assert current is not None
            yield current
            last = current
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return
                new: Selection | object | None
                if conn is None:
                    wait = poll_interval if remaining is None else min(poll_interval, remaining)
                    await asyncio.sleep(wait)
                    new, etag = await self.client._run(_core.selected_op(self.id, etag))
                else:
                    new = await self._listen(conn, remaining)
                    if new is _DROPPED:
                        await conn.close()
                        conn = await self._reconnect(path)
                        new, etag = await self.client._run(_core.selected_op(self.id))
                if isinstance(new, Selection) and new.version > last.version:
                    if new.names != last.names:
                        yield new
                        deadline = None if timeout is None else time.monotonic() + timeout
                    last = new
        finally:
            if conn is not None:
                await conn.close()

    async def _reconnect(self, path: str) -> Any:
        """Open the listener's WebSocket again, with the client's retry policy."""
        failures = 0
        while True:
            try:
                return await self.client._ws_connect(path, {})
            except ConnectionFailed as exc:
                failures += 1
                if not self.client.retry.should_retry(exc, failures):
                    raise
                await asyncio.sleep(self.client.retry.delay(failures))

    async def _listen(self, conn: Any, timeout: float | None) -> Selection | object | None:
        from websockets.exceptions import ConnectionClosed

        try:
            message = await asyncio.wait_for(conn.recv(), timeout)
        except TimeoutError:
            return None
        except ConnectionClosed as exc:
            for pending in await _drain(conn):
                ws.selection_message(pending)  # raises the server's reason for closing, if any
            code = exc.rcvd.code if exc.rcvd else None
            if code not in ws.RESUMABLE_CLOSE_CODES:
                raise ws.close_error(code, exc.rcvd.reason if exc.rcvd else "") from exc
            return _DROPPED
        return ws.selection_message(message)


async def _drain(conn: Any) -> list[str | bytes]:
    """Messages received before the connection closed and not yet read."""
    out: list[str | bytes] = []
    while True:
        try:
            out.append(await asyncio.wait_for(conn.recv(), 0.05))
        except Exception:  # closed and empty (ConnectionClosed), or nothing more (TimeoutError)
            return out


__all__ = ["AsyncClient", "AsyncStream"]
