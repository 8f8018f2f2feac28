"""The asynchronous client: :class:`AsyncClient` and its :class:`AsyncStream` handles.

The same operations as :mod:`featurestream_client.client`, awaited.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from featurestream_client import _core, ws
from featurestream_client._base import (
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


class AsyncClient(_Base[httpx.AsyncClient, httpx.AsyncBaseTransport]):
    """The asynchronous twin of :class:`~featurestream_client.Client` (same parameters).

    ``transport`` may be an ``httpx.ASGITransport(app)`` to talk to an app in
    the same process.
    """

    def _open_http(self, transport: httpx.AsyncBaseTransport | None) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url, timeout=self.timeout, transport=transport, trust_env=self.trust_env
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

    # ------------------------------------------------------------ the driver

    async def _run(self, op: Flow[T]) -> T:
        """Run an operation to its result, awaiting each step."""
        run = self._runner(op)
        async for _ in self._drive(run):
            pass  # an operation run for its result emits nothing
        return run.result

    async def _drive(self, run: Runner[Any]) -> AsyncIterator[Any]:
        """Do each step of ``run`` and report its outcome; pass on what the flow emits."""
        try:
            for step in run:
                if isinstance(step, Emit):
                    yield step.value
                    continue
                try:
                    run.reply(await self._do(step))
                except BaseException as exc:
                    run.fail(exc)
        finally:
            run.close()
            for conn in run.open:
                await conn.close()

    async def _do(self, step: Any) -> Any:
        match step:
            case Request():
                return await self._http.request(**step.kwargs())
            case Sleep(seconds):
                await asyncio.sleep(seconds)
            case Connect(path, query):
                return await self._ws_connect(path, query)
            case Send(conn, data):
                await conn.send(data)
            case Recv(conn, timeout):
                return await asyncio.wait_for(conn.recv(), timeout)
            case Poll(conn):
                # A moment for the event loop to hand over what has arrived.
                return await asyncio.wait_for(conn.recv(), 0.05)
            case Close(conn):
                await conn.close()
        return None

    async def _ws_connect(self, path: str, query: Mapping[str, Any]) -> Any:
        url = ws.ws_url(self.url, path, query)
        with ws_handshake(url):
            from websockets.asyncio.client import connect

            return await connect(url, **self._ws_options())

    # ------------------------------------------------------------ server

    async def health(self) -> bool:
        return await self._run(probe_op("/healthz"))

    async def ready(self) -> bool:
        return await self._run(probe_op("/readyz"))

    async def algorithms(self) -> list[Algorithm]:
        return await self._run(self._catalogue.load_op())

    async def streams(self, labels: Mapping[str, str] | None = None) -> list[StreamInfo]:
        return await self._run(_core.list_streams_op(labels))

    async def create_stream(
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
    ) -> AsyncStream:
        """See :meth:`featurestream_client.Client.create_stream`."""
        core = await self._run(
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
        return AsyncStream(self, core)

    def stream(
        self, stream_id: str, *, producer: str | None = None, next_seq: int | None = None
    ) -> AsyncStream:
        """See :meth:`featurestream_client.Client.stream`."""
        return AsyncStream(self, handle_core(stream_id, producer, next_seq, self.chunking))

    async def get_stream(self, stream_id: str, *, producer: str | None = None) -> AsyncStream:
        handle = self.stream(stream_id, producer=producer)
        await handle.refresh()
        return handle

    async def delete_stream(self, stream_id: str) -> None:
        await self._run(_core.delete_op(stream_id))


class AsyncStream(_StreamBase[AsyncClient]):
    """The asynchronous twin of :class:`~featurestream_client.Stream`."""

    def __repr__(self) -> str:
        return f"AsyncStream({self.id!r}, producer={self.producer!r})"

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
        return await self.client._run(
            self._stream_instances_op(data, y, batch_size, window, on_error, on_selected, binary)
        )

    async def selected(self, version: int | None = None) -> Selection:
        if version is not None:
            return await self.client._run(selected_at_op(self.id, version))
        return await self.client._run(selection_op(self.id))

    async def history(self, after_version: int | None = None, limit: int | None = None) -> History:
        return await self.client._run(history_op(self.id, after_version, limit))

    async def evaluation(
        self, model: str = "knn", *, folds: int = 5, repeats: int = 1
    ) -> Evaluation:
        return await self.client._run(evaluation_op(self.id, model, folds, repeats))

    async def stability(self, last: int = 20) -> Stability:
        return await self.client._run(stability_op(self.id, last))

    async def events(self, after: str | None = None, limit: int = 100) -> EventPage:
        return await self.client._run(_core.events_op(self.id, after, limit))

    def iter_events(
        self,
        after: str | None = None,
        *,
        page_size: int = 1000,
        follow: bool = False,
        poll_interval: float = 1.0,
    ) -> AsyncIterator[Event]:
        return self.client._drive(self._event_pages(after, page_size, follow, poll_interval))

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
        return self.client._drive(self._subscription(mode, poll_interval, timeout))


__all__ = ["AsyncClient", "AsyncStream"]
