"""The synchronous client: :class:`Client` and its :class:`Stream` handles."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from featurestream_client import _core, ws
from featurestream_client._base import (
    DEFAULT_URL,
    SubscribeMode,
    _Base,
    _StreamBase,
    create_core_op,
    handle_core,
    probe_op,
    ws_handshake,
)
from featurestream_client._history import (
    Evaluation,
    History,
    Stability,
    evaluation_op,
    history_op,
    selected_at_op,
    stability_op,
)
from featurestream_client._steps import (
    Close,
    Connect,
    Emit,
    Flow,
    Poll,
    Recv,
    Request,
    Runner,
    Send,
    Sleep,
)
from featurestream_client._streaming import selection_op
from featurestream_client.models import (
    Algorithm,
    Event,
    EventPage,
    FeaturesResult,
    InstancesResult,
    Selection,
    StreamInfo,
)

T = TypeVar("T")


class Client(_Base[httpx.Client, httpx.BaseTransport]):
    """A featurestream server, seen from Python.

    Parameters
    ----------
    url : str
        Base URL of the server, e.g. ``http://localhost:8000``.
    api_key : str, optional
        Sent as ``Authorization: Bearer <key>`` when the server requires keys.
    timeout : float or httpx.Timeout
        Seconds to wait for the server (connect, read, write); default 60, more
        than the server's default time budget of a request (30 s), so that a
        request over the budget gets its answer (413, split) rather than a timeout.
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

    # ------------------------------------------------------------ lifecycle

    def _open_http(self, transport: httpx.BaseTransport | None) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, timeout=self.timeout, transport=transport, trust_env=self.trust_env
        )

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

    # ------------------------------------------------------------ the driver

    def _run(self, op: Flow[T]) -> T:
        """Run an operation to its result, blocking on each step."""
        run = self._runner(op)
        for _ in self._drive(run):
            pass  # an operation run for its result emits nothing
        return run.result

    def _drive(self, run: Runner[Any]) -> Iterator[Any]:
        """Do each step of ``run`` and report its outcome; pass on what the flow emits."""
        try:
            for step in run:
                if isinstance(step, Emit):
                    yield step.value
                    continue
                try:
                    run.reply(self._do(step))
                except BaseException as exc:
                    run.fail(exc)
        finally:
            run.close()
            for conn in run.open:
                conn.close()

    def _do(self, step: Any) -> Any:
        match step:
            case Request():
                return self._http.request(**step.kwargs())
            case Sleep(seconds):
                time.sleep(seconds)
            case Connect(path, query):
                return self._ws_connect(path, query)
            case Send(conn, data):
                conn.send(data)
            case Recv(conn, timeout):
                return conn.recv(timeout=timeout)
            case Poll(conn):
                return conn.recv(timeout=0)
            case Close(conn):
                conn.close()
        return None

    def _ws_connect(self, path: str, query: Mapping[str, Any]) -> Any:
        """Open a WebSocket; refusals become typed errors."""
        url = ws.ws_url(self.url, path, query)
        with ws_handshake(url):
            from websockets.sync.client import connect

            conn = connect(url, **self._ws_options())
        # The driver closes the connection itself (on every path), as the context
        # manager would; entering it marks the connection as managed.
        conn.__enter__()
        return conn

    # ------------------------------------------------------------ server

    def health(self) -> bool:
        """True when the server process answers ``/healthz``."""
        return self._run(probe_op("/healthz"))

    def ready(self) -> bool:
        """True when the server's state store answers (``/readyz``)."""
        return self._run(probe_op("/readyz"))

    def algorithms(self) -> list[Algorithm]:
        """The algorithms the server hosts, with their parameter schemas and defaults."""
        return self._run(self._catalogue.load_op())

    def streams(self, labels: Mapping[str, str] | None = None) -> list[StreamInfo]:
        """Every stream on the server; with ``labels``, those that carry all of them."""
        return self._run(_core.list_streams_op(labels))

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
        target_type: str | None = None,
        labels: Mapping[str, str] | None = None,
        ttl_seconds: float | None = None,
    ) -> Stream:
        """Create a stream and return its handle.

        Parameters
        ----------
        algorithm : str
            A name from :meth:`algorithms` (``"saola"``, ``"ofs"``, ...).
        target : array-like, optional
            Feature-stream algorithms: the target vector y (length n): numbers,
            or class labels (``"yes"``/``"no"``, class names), sent as strings.
        feature_names : sequence of str, optional
            Instance-stream algorithms: the fixed feature space.
        params : mapping, optional
            Algorithm parameters; defaults fill the rest.
        id : str, optional
            The stream id; generated when absent.
        producer : str, optional
            This handle's producer name (see :meth:`stream`).
        target_type : str, optional
            ``"auto"`` (the server's default), ``"continuous"``, ``"binary"`` or
            ``"multiclass"``: how the server reads the target or the labels
            (docs/algorithms.md, "Targets"); the stream shows the resolved type.
        labels : mapping of str to str, optional
            Bookkeeping labels of the stream (``{"team": "risk"}``), listed by
            :meth:`streams` with ``label="team:risk"``.
        ttl_seconds : number, optional
            The stream and all its keys expire after that long without a write.
        """
        core = self._run(
            create_core_op(
                algorithm,
                target,
                feature_names,
                params,
                id,
                producer,
                self.chunking,
                options={"target_type": target_type, "labels": labels, "ttl_seconds": ttl_seconds},
            )
        )
        return Stream(self, core)

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
        return Stream(self, handle_core(stream_id, producer, next_seq, self.chunking))

    def get_stream(self, stream_id: str, *, producer: str | None = None) -> Stream:
        """A handle on an existing stream, after reading its resource (404 if absent)."""
        handle = self.stream(stream_id, producer=producer)
        handle.refresh()
        return handle

    def delete_stream(self, stream_id: str) -> None:
        """Delete a stream and everything it holds."""
        self._run(_core.delete_op(stream_id))


class Stream(_StreamBase[Client]):
    """A handle on one stream: write columns, groups or instances; read the selection.

    Obtained from :meth:`Client.create_stream`, :meth:`Client.stream` or
    :meth:`Client.get_stream`.
    """

    def __repr__(self) -> str:
        return f"Stream({self.id!r}, producer={self.producer!r})"

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
            server's ``<producer>:<seq>:<i>``).
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
            Send frames as binary .npy (labels in the last column) rather than
            JSON. Frames without labels travel as .npy to a stream whose
            algorithm is unsupervised, and as JSON to a supervised one (which
            refuses them: labels are missing).
        """
        return self.client._run(
            self._stream_instances_op(data, y, batch_size, window, on_error, on_selected, binary)
        )

    # ------------------------------------------------------------ reads

    def selected(self, version: int | None = None) -> Selection:
        """The current selection, in the selector's own order.

        With ``version``, the selection as it was after that version (names in
        alphabetical order; scores only for the current version). Raises
        ``VersionNotFound`` beyond the current version and ``HistoryTrimmed`` when
        the server no longer keeps that part of the history.
        """
        if version is not None:
            return self.client._run(selected_at_op(self.id, version))
        return self.client._run(selection_op(self.id))

    def history(self, after_version: int | None = None, limit: int | None = None) -> History:
        """The changes of the selected set (after ``after_version``; at most ``limit``),
        oldest first, as a list of ``Change`` records; ``.to_frame()`` makes a pandas
        DataFrame of them."""
        return self.client._run(history_op(self.id, after_version, limit))

    def evaluation(self, model: str = "knn", *, folds: int = 5, repeats: int = 1) -> Evaluation:
        """How good the current selection is: for a feature stream, the cross-validated
        score of ``model`` (``knn``, ``logistic``, ``naive_bayes``, ``linear``) on the
        selected columns; for a supervised instance stream, the prequential accuracy."""
        return self.client._run(evaluation_op(self.id, model, folds, repeats))

    def stability(self, last: int = 20) -> Stability:
        """Jaccard between consecutive selections and Nogueira's stability over the
        selections after the last ``last`` changes."""
        return self.client._run(stability_op(self.id, last))

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
        return self.client._drive(self._event_pages(after, page_size, follow, poll_interval))

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
        return self.client._drive(self._subscription(mode, poll_interval, timeout))


__all__ = ["DEFAULT_URL", "Client", "Stream"]
