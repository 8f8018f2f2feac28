"""The synchronous client: :class:`Client` and its :class:`Stream` handles."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar

import httpx

from featurestream_client import _core, _data, ws
from featurestream_client._core import Call, Chunking, Op, Producer, Reply, StreamCore
from featurestream_client.errors import (
    ConnectionFailed,
    FeatureStreamError,
    error_from_problem,
)
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
DEFAULT_URL = "http://127.0.0.1:8000"
SubscribeMode = Literal["auto", "websocket", "poll"]
# Failures after which the request may be sent again (writes carry their seq).
RETRYABLE_TRANSPORT_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


class _Base:
    """Options shared by :class:`Client` and :class:`~featurestream_client.AsyncClient`."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None,
        timeout: float | httpx.Timeout,
        retry: RetryPolicy | None,
        chunk_columns: int,
        chunk_bytes: int,
        max_header_bytes: int,
        window: int,
        trust_env: bool,
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
        err = ConnectionFailed(
            f"{call.method} {self.url}{call.path} failed after {attempt} attempt(s): "
            f"{type(exc).__name__}: {exc}".rstrip(": ")
        )
        err.attempts = attempt
        return err


class Client(_Base):
    """A featurestream server, seen from Python.

    Parameters
    ----------
    url : str
        Base URL of the server, e.g. ``http://localhost:8000``.
    api_key : str, optional
        Sent as ``Authorization: Bearer <key>`` when the server requires keys.
    timeout : float or httpx.Timeout
        Seconds to wait for the server (connect, read, write).
    retry : RetryPolicy, optional
        Attempts and backoff for timeouts, connection errors, 503 (honouring
        ``Retry-After``) and ``409 concurrent-update``. Retrying is always
        safe: writes carry their ``seq``.
    chunk_columns, chunk_bytes : int
        Largest request: columns per request, and body bytes per request.
    max_header_bytes : int
        Budget of the ``X-Feature-Names`` header of a binary request.
    window : int
        WebSocket frames in flight without an acknowledgement.
    transport : httpx.BaseTransport, optional
        A custom httpx transport (tests, proxies, mocks).
    http_client : httpx.Client, optional
        An httpx client to use as is (its base URL must be the server's).

    Examples
    --------
    >>> with Client("http://localhost:8000") as c:  # doctest: +SKIP
    ...     s = c.create_stream("saola", target=y, params={"alpha": 0.01}, id="churn")
    ...     s.add_features(X, names=names).accepted
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
        transport: httpx.BaseTransport | None = None,
        http_client: httpx.Client | None = None,
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
        self._http = http_client or httpx.Client(
            base_url=self.url, timeout=timeout, transport=transport, trust_env=trust_env
        )

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the connection pool (if the client created it)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # ------------------------------------------------------------ transport

    def _send(self, call: Call) -> Reply:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(
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
                time.sleep(self.retry.delay(attempt))
                continue
            if response.status_code < 300 or response.status_code in call.accept:
                return self._reply(response, attempt)
            error = self._error(response, attempt)
            if not self.retry.should_retry(error, attempt):
                raise error
            wait = retry_after_seconds(response.headers.get("retry-after"))
            time.sleep(self.retry.delay(attempt, wait))

    def _run(self, op: Op[T]) -> T:
        """Drive an operation: send each call it yields, hand back replies or errors."""
        try:
            call = next(op)
            while True:
                try:
                    reply = self._send(call)
                except FeatureStreamError as exc:
                    call = op.throw(exc)
                else:
                    call = op.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result

    # ------------------------------------------------------------ server

    def health(self) -> bool:
        """True when the server process answers ``/healthz``."""
        try:
            return self._http.get("/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def ready(self) -> bool:
        """True when the server's state store answers (``/readyz``)."""
        try:
            return self._http.get("/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    def algorithms(self) -> list[Algorithm]:
        """The algorithms the server hosts, with their parameter schemas and defaults."""
        return self._run(_core.algorithms_op())

    def streams(self) -> list[StreamInfo]:
        """Every stream on the server."""
        return self._run(_core.list_streams_op())

    # ------------------------------------------------------------ streams

    def create_stream(
        self,
        algorithm: str,
        *,
        target: Any = None,
        feature_names: Sequence[str] | None = None,
        params: Mapping[str, Any] | None = None,
        id: str | None = None,
        producer: str | None = None,
    ) -> Stream:
        """Create a stream and return its handle.

        Parameters
        ----------
        algorithm : str
            A name from :meth:`algorithms` (``"saola"``, ``"ofs"``, ...).
        target : array-like, optional
            Feature-stream algorithms: the target vector y (length n). Labels
            that are not numbers (``"yes"``/``"no"``) become codes in sorted order.
        feature_names : sequence of str, optional
            Instance-stream algorithms: the fixed feature space.
        params : mapping, optional
            Algorithm parameters; defaults fill the rest.
        id : str, optional
            The stream id; generated when absent.
        producer : str, optional
            This handle's producer name (see :meth:`stream`).
        """
        info = self._run(
            _core.create_op(
                algorithm, target=target, feature_names=feature_names, params=params, stream_id=id
            )
        )
        handle = self.stream(info.id, producer=producer, next_seq=1 if producer else None)
        handle._core.info = info
        return handle

    def stream(
        self, stream_id: str, *, producer: str | None = None, next_seq: int | None = None
    ) -> Stream:
        """A handle on an existing stream (no request is sent).

        Writes through the handle are numbered per producer. Without
        ``producer`` the handle makes up a producer name of its own and starts
        at seq 1. With a ``producer`` that wrote before, the handle asks the
        server for its next seq before the first write, unless ``next_seq`` is
        given. Nothing is persisted on the client.
        """
        name = producer or _core.new_producer_name()
        if producer is None:
            start: int | None = 1
        else:
            start = next_seq
        if start is not None and start < 1:
            raise ValueError(f"next_seq must be >= 1; got {start}.")
        return Stream(self, StreamCore(stream_id, Producer(name, start), self.chunking))

    def get_stream(self, stream_id: str, *, producer: str | None = None) -> Stream:
        """A handle on an existing stream, after reading its resource (404 if absent)."""
        handle = self.stream(stream_id, producer=producer)
        handle.refresh()
        return handle

    def delete_stream(self, stream_id: str) -> None:
        """Delete a stream and everything it holds."""
        self._run(_core.delete_op(stream_id))

    # ------------------------------------------------------------ WebSockets

    def _ws_connect(self, path: str, query: Mapping[str, Any]) -> Any:
        """Open a WebSocket; refusals become typed errors."""
        try:
            from websockets.exceptions import InvalidHandshake, InvalidStatus
            from websockets.sync.client import connect
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise ws.WebSocketUnavailable("The 'websockets' package is not installed.") from exc
        url = ws.ws_url(self.url, path, query)
        try:
            conn = connect(url, **self._ws_options())
        except InvalidStatus as exc:
            status = exc.response.status_code
            raise ws.handshake_error(status, str(exc)) from exc
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            raise ConnectionFailed(f"WebSocket connection to {url} failed: {exc}") from exc
        # The handle closes the connection itself (on every path), as the context
        # manager would; entering it marks the connection as managed.
        conn.__enter__()
        return conn


class Stream:
    """A handle on one stream: write columns, groups or instances; read the selection.

    Obtained from :meth:`Client.create_stream`, :meth:`Client.stream` or
    :meth:`Client.get_stream`.
    """

    def __init__(self, client: Client, core: StreamCore) -> None:
        self.client = client
        self._core = core

    def __repr__(self) -> str:
        return f"Stream({self.id!r}, producer={self.producer!r})"

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

    def refresh(self) -> StreamInfo:
        """Read the stream resource again."""
        self._core.info = self.client._run(_core.get_info_op(self.id))
        return self._core.info

    # ------------------------------------------------------------ writes

    def add_features(
        self,
        data: Any,
        names: Sequence[str] | None = None,
        *,
        chunk_columns: int | None = None,
        chunk_bytes: int | None = None,
    ) -> FeaturesResult:
        """Append feature columns, in order; each gets a decision.

        Parameters
        ----------
        data : array-like (n, b), pandas DataFrame or scipy.sparse matrix
            One column per feature, one row per instance of the stream.
        names : sequence of str, optional
            Column names (default: the DataFrame's columns; for arrays the
            server's ``<seq>:<i>``).
        chunk_columns, chunk_bytes : int, optional
            Override the client's request size for this call.

        Returns
        -------
        FeaturesResult
            The decisions of every column and the selection afterwards. The
            data is checked whole before anything is sent; if a later request
            fails, the error's ``partial`` holds what was applied.
        """
        return self.client._run(
            self._core.add_features_op(
                data, names, chunk_columns=chunk_columns, chunk_bytes=chunk_bytes
            )
        )

    def add_groups(
        self,
        groups: Mapping[str, Any] | Sequence[tuple[str, Any]],
        *,
        chunk_columns: int | None = None,
        chunk_bytes: int | None = None,
    ) -> FeaturesResult:
        """Append whole groups of features (group-SAOLA): ``{"g1": df1, ...}`` or pairs.

        Each group's data is an array, DataFrame or sparse matrix, or a pair
        ``(data, names)``. A group is never split across requests. Columns of
        an array without names are called ``<group>:<i>``.
        """
        return self.client._run(
            self._core.add_groups_op(groups, chunk_columns=chunk_columns, chunk_bytes=chunk_bytes)
        )

    def add_instances(
        self,
        X: Any,
        y: Any = None,
        *,
        batch_size: int | None = None,
    ) -> InstancesResult:
        """Apply instances over HTTP, ``batch_size`` rows per request (default: as few as fit)."""
        return self.client._run(self._core.add_instances_op(X, y, batch_size=batch_size))

    def stream_instances(
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
        """Stream instances over the WebSocket, pipelined, resuming after a dropped connection.

        Parameters
        ----------
        data : array-like (m, d) or iterable
            An array (labels in ``y``), or an iterable of rows ``x``, pairs
            ``(x, y)`` or batches ``(X, y)``.
        batch_size : int
            Instances per frame.
        window : int, optional
            Frames sent and not yet acknowledged, at most (default: the client's).
        on_error : {"raise", "skip"}
            What a refused frame does (it changes nothing on the server either way).
        on_selected : callable, optional
            Called with each selection change the server announces.
        binary : bool
            Send labelled frames as binary .npy (labels in the last column)
            rather than JSON; frames without labels are always JSON.
        """
        self._core._check_kind("instances")
        if self._core.producer.next_seq is None:
            self.client._run(self._core.resync_op())
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
            self._run_feed(feed)
        finally:
            # Frames without an answer may or may not have been applied: learn the
            # next seq from the server before the next write.
            self._core.producer.next_seq = None if feed.pending else feed.next_seq
        if feed.failure is not None:
            feed.failure.partial = feed.result()
            raise feed.failure
        return feed.result()

    def _run_feed(self, feed: ws.InstanceFeed) -> None:
        from websockets.exceptions import ConnectionClosed

        path = _core.stream_path(self.id, "/ws")
        conn = None
        failures = 0
        try:
            while not feed.done:
                if conn is None:
                    query = {"producer": self.producer, "seq": feed.resume_seq()}
                    try:
                        conn = self.client._ws_connect(path, query)
                    except ConnectionFailed as exc:
                        failures += 1
                        if not self.client.retry.should_retry(exc, failures):
                            raise
                        time.sleep(self.client.retry.delay(failures))
                        continue
                    for frame in feed.unanswered():
                        conn.send(frame.data)
                try:
                    for frame in feed.take():
                        conn.send(frame.data)
                    if feed.pending:
                        feed.receive(conn.recv(timeout=self.client._recv_timeout))
                        failures = 0
                except (ConnectionClosed, TimeoutError) as exc:
                    code = exc.rcvd.code if isinstance(exc, ConnectionClosed) and exc.rcvd else None
                    reason = (
                        exc.rcvd.reason if isinstance(exc, ConnectionClosed) and exc.rcvd else ""
                    )
                    # What the server said before closing (acks, or why it closed) first.
                    for message in _drain(conn):
                        feed.receive(message)
                    conn.close()
                    conn = None
                    failures += 1
                    if code not in ws.RESUMABLE_CLOSE_CODES:
                        raise ws.close_error(code, reason) from exc
                    if failures >= self.client.retry.attempts:
                        raise ConnectionFailed(
                            f"The WebSocket of stream {self.id!r} dropped {failures} times "
                            f"(last close code {code})."
                        ) from exc
                    time.sleep(self.client.retry.delay(failures, 1.0 if code == 1013 else None))
        finally:
            if conn is not None:
                conn.close()
        selection = self.selected()
        feed.selection = selection

    # ------------------------------------------------------------ reads

    def selected(self) -> Selection:
        """The current selection, in the selector's own order."""
        selection, _ = self.client._run(_core.selected_op(self.id))
        assert selection is not None
        return selection

    def events(self, after: str | None = None, limit: int = 100) -> EventPage:
        """One page of the decision log after the event id ``after``."""
        return self.client._run(_core.events_op(self.id, after, limit))

    def iter_events(
        self,
        after: str | None = None,
        *,
        page_size: int = 1000,
        follow: bool = False,
        poll_interval: float = 1.0,
    ) -> Iterator[Event]:
        """Every event after ``after``, page by page; with ``follow``, wait for new ones."""
        while True:
            page = self.events(after, page_size)
            yield from page.events
            after = page.next
            if len(page.events) < page_size:
                if not follow:
                    return
                time.sleep(poll_interval)

    def status(self) -> dict[str, Any]:
        """The selector's counters (features seen/accepted/rejected, instances, ...)."""
        return self.client._run(_core.status_op(self.id))

    def delete(self) -> None:
        """Delete the stream and everything it holds."""
        self.client._run(_core.delete_op(self.id))

    def subscribe(
        self,
        *,
        mode: SubscribeMode = "auto",
        poll_interval: float = 1.0,
        timeout: float | None = None,
    ) -> Iterator[Selection]:
        """Selection changes: the current selection first, then each change.

        Parameters
        ----------
        mode : {"auto", "websocket", "poll"}
            ``websocket`` listens on the stream's WebSocket; ``poll`` asks
            ``/selected`` every ``poll_interval`` seconds with ``If-None-Match``
            (cheap 304s when nothing changed); ``auto`` uses the WebSocket and
            falls back to polling when the server offers none.
        timeout : float, optional
            Stop when no change arrives for this many seconds (default: never).
        """
        if mode not in ("auto", "websocket", "poll"):
            raise ValueError(f"mode must be 'auto', 'websocket' or 'poll'; got {mode!r}.")
        return self._subscribe(mode, poll_interval, timeout)

    def _subscribe(
        self, mode: SubscribeMode, poll_interval: float, timeout: float | None
    ) -> Iterator[Selection]:
        path = _core.stream_path(self.id, "/ws")
        conn = None
        if mode != "poll":
            try:
                conn = self.client._ws_connect(path, {})
            except ws.WebSocketUnavailable:
                if mode == "websocket":
                    raise
        try:
            current, etag = self.client._run(_core.selected_op(self.id))
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
                    time.sleep(
                        poll_interval if remaining is None else min(poll_interval, remaining)
                    )
                    new, etag = self.client._run(_core.selected_op(self.id, etag))
                else:
                    new = self._listen(conn, remaining)
                    if new is _DROPPED:
                        conn.close()
                        conn = self._reconnect(path)
                        new, etag = self.client._run(_core.selected_op(self.id))
                if isinstance(new, Selection) and new.version > last.version:
                    if new.names != last.names:
                        yield new
                        deadline = None if timeout is None else time.monotonic() + timeout
                    last = new
        finally:
            if conn is not None:
                conn.close()

    def _reconnect(self, path: str) -> Any:
        """Open the listener's WebSocket again, with the client's retry policy."""
        failures = 0
        while True:
            try:
                return self.client._ws_connect(path, {})
            except ConnectionFailed as exc:
                failures += 1
                if not self.client.retry.should_retry(exc, failures):
                    raise
                time.sleep(self.client.retry.delay(failures))

    def _listen(self, conn: Any, timeout: float | None) -> Selection | object | None:
        from websockets.exceptions import ConnectionClosed

        try:
            message = conn.recv(timeout=timeout)
        except TimeoutError:
            return None
        except ConnectionClosed as exc:
            for pending in _drain(conn):
                ws.selection_message(pending)  # raises the server's reason for closing, if any
            code = exc.rcvd.code if exc.rcvd else None
            if code not in ws.RESUMABLE_CLOSE_CODES:
                raise ws.close_error(code, exc.rcvd.reason if exc.rcvd else "") from exc
            return _DROPPED
        return ws.selection_message(message)


_DROPPED = object()


def _drain(conn: Any) -> list[str | bytes]:
    """Messages received before the connection closed and not yet read."""
    out: list[str | bytes] = []
    while True:
        try:
            out.append(conn.recv(timeout=0))
        except Exception:  # closed and empty (ConnectionClosed), or nothing more (TimeoutError)
            return out


__all__ = ["DEFAULT_URL", "Client", "Stream"]
