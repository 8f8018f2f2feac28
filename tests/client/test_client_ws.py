"""Instances over the WebSocket (pipelined, resumed after a cut) and selection subscriptions."""

from __future__ import annotations

import asyncio
import io
import itertools
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

import featurestream_client as fc
from featurestream.config import Settings
from featurestream_client import AsyncClient, Client, RetryPolicy, Selection, ws
from featurestream_client.client import SubscribeMode
from tests import support
from tests.client.live import WS_MISSING, LiveServer, TcpProxy, has_websocket_route

needs_ws = pytest.mark.skipif(not has_websocket_route(), reason=WS_MISSING)
FAST = RetryPolicy(attempts=5, backoff=0.01, max_backoff=0.1)
OFS = support.expected()["instance_streams"]["ofs"]
X, Y = support.instances()
FEATURES = support.names(100, "x")


def http_reference(client: Client, batch: int) -> fc.InstancesResult:
    s = client.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])
    return s.add_instances(X, Y, batch_size=batch)


@needs_ws
def test_streamed_instances_equal_http_batches(client: Client) -> None:
    s = client.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])
    seen: list[Selection] = []
    result = s.stream_instances(X, Y, batch_size=400, window=2, on_selected=seen.append)
    assert result.instances_seen == 2000 and result.seqs == (1, 2, 3, 4, 5)
    assert list(result.selected) == [f"x{i}" for i in OFS["selected"]]
    assert result.selected == http_reference(client, 400).selected
    assert seen and seen[-1].version <= result.version
    assert s.next_seq == 6
    # HTTP writes of the same handle continue the numbering.
    assert s.add_instances(X[:10], Y[:10]).seqs == (6,)
    batches = [e for e in s.iter_events() if e.type == "batch"]
    assert [e.seq for e in batches] == [1, 2, 3, 4, 5, 6]


@needs_ws
def test_sparse_instances_travel_sparse_and_decide_like_dense(client: Client) -> None:
    import scipy.sparse as sp

    Xs = np.where(np.abs(X) > 1.0, X, 0.0)  # about two thirds zeros
    dense = client.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])
    over_ws = client.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])
    over_http = client.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])
    ref = dense.add_instances(Xs, Y, batch_size=250)
    got_ws = over_ws.stream_instances(sp.csr_matrix(Xs), Y, batch_size=250)
    got_http = over_http.add_instances(sp.csc_matrix(Xs), Y, batch_size=250)
    assert got_ws.instances_seen == got_http.instances_seen == 2000
    assert got_ws.selected == got_http.selected == ref.selected
    weights = [[f.score for f in s.selected().features] for s in (dense, over_ws, over_http)]
    assert weights[0] == weights[1] == weights[2]


@needs_ws
def test_iterables_of_rows_and_pairs(client: Client) -> None:
    a = client.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])
    b = client.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])
    ra = a.stream_instances(zip(X, Y, strict=True), batch_size=250)
    # Labelled frames travel as binary .npy by default; as JSON on request: same result.
    batches = ((X[i : i + 250], Y[i : i + 250]) for i in range(0, 2000, 250))
    rb = b.stream_instances(batches, binary=False)
    assert ra.selected == rb.selected == http_reference(client, 250).selected
    assert len(ra.seqs) == 8 and ra.instances_seen == rb.instances_seen == 2000


@needs_ws
def test_a_refused_frame_uses_its_seq_and_changes_nothing(client: Client) -> None:
    s = client.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])
    rows = [(X[i], Y[i]) for i in range(20)]
    rows[7] = (np.ones(99), 1.0)  # a frame of one instance with 99 features: refused

    skipped = s.stream_instances(iter(rows), batch_size=1, on_error="skip")
    assert len(skipped.errors) == 1 and isinstance(skipped.errors[0], fc.InvalidInput)
    assert skipped.errors[0].seq == 8 and skipped.instances_seen == 19
    assert s.next_seq == 21

    strict = client.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])
    with pytest.raises(fc.InvalidInput) as exc:
        strict.stream_instances(iter(rows), batch_size=1, window=4, on_error="raise")
    assert exc.value.seq == 8 and exc.value.status == 422
    partial = exc.value.partial
    # Nothing new is sent after the refusal; the frames in flight are answered.
    assert 7 <= len(partial.seqs) <= 10 and 8 not in partial.seqs
    assert strict.next_seq == max(partial.seqs) + 1
    assert strict.add_instances(X[:5], Y[:5]).seqs == (strict.next_seq - 1,)


@needs_ws
def test_a_cut_connection_resumes_without_loss_or_double_apply(live: LiveServer) -> None:
    proxy = TcpProxy(live.port)
    try:
        with Client(proxy.url, retry=FAST) as c:
            s = c.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])

            def frames() -> Iterator[tuple[np.ndarray, np.ndarray]]:
                for k, i in enumerate(range(0, 2000, 100)):
                    if k in (5, 13):
                        time.sleep(0.05)  # let some frames be applied, then cut
                        proxy.cut()
                    yield X[i : i + 100], Y[i : i + 100]

            result = s.stream_instances(frames(), window=4)
            assert proxy.accepted >= 3  # the first connection and two resumptions
            assert result.instances_seen == 2000
            batches = [e for e in s.iter_events() if e.type == "batch"]
            assert [e.seq for e in batches] == list(range(1, 21))
            reference = http_reference(c, 100)
            assert result.selected == reference.selected
            assert s.status()["instances_seen"] == 2000
    finally:
        proxy.close()


def watch(
    client: Client, mode: SubscribeMode, poll_interval: float = 0.05
) -> tuple[list[Selection], list[str]]:
    """Subscribe, write four batches from another handle, stop at the final selection."""
    final = list(http_reference(client, 500).selected)
    s = client.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])
    got: list[Selection] = []
    ready = threading.Event()

    def listen() -> None:
        for sel in s.subscribe(mode=mode, poll_interval=poll_interval, timeout=10):
            got.append(sel)
            ready.set()
            if sel.names == final:
                return

    t = threading.Thread(target=listen)
    t.start()
    assert ready.wait(10)
    writer = client.stream(s.id)
    for i in range(0, 2000, 500):
        writer.add_instances(X[i : i + 500], Y[i : i + 500])
        time.sleep(0.05)
    t.join(20)
    return got, final


@needs_ws
def test_subscribe_over_the_websocket(client: Client) -> None:
    got, final = watch(client, "websocket")
    assert got[0].version == 0 and got[0].names == []
    assert got[-1].names == final
    assert [g.version for g in got] == sorted({g.version for g in got})
    assert all(a.names != b.names for a, b in itertools.pairwise(got))


def test_subscribe_polls_with_etags(client: Client) -> None:
    got, final = watch(client, "poll")
    assert len(got) >= 2 and got[-1].names == final
    assert all(g.features[0].score is not None for g in got[1:])


@pytest.fixture
def server_without_ws() -> Iterator[LiveServer]:
    server = LiveServer(Settings(store_url="memory://"), websockets=False).start()
    yield server
    server.stop()


def test_subscribe_falls_back_to_polling_without_websockets(
    server_without_ws: LiveServer,
) -> None:
    with Client(server_without_ws.url) as c:
        s = c.create_stream("saola", target=np.arange(10.0), target_type="continuous")
        with pytest.raises(fc.WebSocketUnavailable):
            next(s.subscribe(mode="websocket"))
        changes = s.subscribe(mode="auto", poll_interval=0.05, timeout=1)
        assert next(changes).version == 0
        s.add_features(np.arange(10.0)[:, None] ** 2, names=["sq"])
        assert next(changes).names == ["sq"]
        changes.close()
        inst = c.create_stream("ofs", feature_names=["a", "b"], params={"num_features": 1})
        with pytest.raises(fc.WebSocketUnavailable):
            inst.stream_instances(np.ones((2, 2)), np.ones(2))
        assert inst.next_seq == 1  # nothing was sent


@pytest.fixture
def server_of_notices() -> Iterator[LiveServer]:
    """A server whose selection messages list at most 2 features."""
    settings = Settings(store_url="memory://", ws_selection_max_features=2)
    server = LiveServer(settings).start()
    yield server
    server.stop()


@needs_ws
def test_selections_announced_by_a_notice_are_read(server_of_notices: LiveServer) -> None:
    """A selection of more features than a message lists comes as a notice of its
    version: subscribe and on_selected read it with GET /selected."""
    with Client(server_of_notices.url, timeout=30) as c:
        final = list(http_reference(c, 500).selected)
        assert len(final) > 2
        got, final = watch(c, "websocket")
        assert got[0].names == [] and got[-1].names == final
        assert all(g.features[0].score is not None for g in got[1:])  # as read, in full
        s = c.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])
        seen: list[Selection] = []
        result = s.stream_instances(X, Y, batch_size=500, on_selected=seen.append)
        assert seen and seen[-1].names == list(result.selected) == final


# ---------------------------------------------------------------- async


@needs_ws
def test_async_streaming_and_subscription(live: LiveServer) -> None:
    async def main() -> tuple[fc.InstancesResult, list[Selection], list[str]]:
        async with AsyncClient(live.url) as c:
            s = await c.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])
            got: list[Selection] = []

            async def listen() -> None:
                async for sel in s.subscribe(timeout=10):
                    got.append(sel)
                    if sel.names == [f"x{i}" for i in OFS["selected"]]:
                        return

            task = asyncio.create_task(listen())
            await asyncio.sleep(0.2)
            result = await s.stream_instances(X, Y, batch_size=400)
            await task
            return result, got, (await s.selected()).names

    result, got, final = asyncio.run(main())
    assert result.instances_seen == 2000 and list(result.selected) == final
    assert final == [f"x{i}" for i in OFS["selected"]]
    assert got[-1].names == final


@needs_ws
def test_a_subscription_survives_a_cut_connection(live: LiveServer) -> None:
    proxy = TcpProxy(live.port)
    try:
        with Client(proxy.url, retry=FAST) as c, Client(live.url) as direct:
            final = list(http_reference(direct, 500).selected)
            s = direct.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])
            got: list[Selection] = []
            ready = threading.Event()

            def listen() -> None:
                for sel in c.stream(s.id).subscribe(mode="websocket", timeout=10):
                    got.append(sel)
                    ready.set()
                    if sel.names == final:
                        return

            t = threading.Thread(target=listen)
            t.start()
            assert ready.wait(10)
            proxy.cut()
            for i in range(0, 2000, 500):
                s.add_instances(X[i : i + 500], Y[i : i + 500])
            t.join(20)
            assert got[-1].names == final and proxy.accepted >= 2
    finally:
        proxy.close()


def test_instances_are_not_streamed_to_a_feature_stream(client: Client) -> None:
    s = client.create_stream("saola", target=np.arange(5.0))
    with pytest.raises(fc.WrongStreamKind):
        s.stream_instances(np.ones((5, 2)))
    assert s.next_seq == 1


class _Recorder:
    """A client connection that records what is sent on it (everything else passes through)."""

    def __init__(
        self, conn: object, sent: list[str | bytes | bytearray], opened: list[object]
    ) -> None:
        self._conn = conn
        self._sent = sent
        opened.append(conn)

    def send(self, data: str | bytes | bytearray) -> None:
        self._sent.append(data)
        self._conn.send(data)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


def _recording(client: Client, monkeypatch: pytest.MonkeyPatch) -> tuple[list, list]:
    sent: list[str | bytes | bytearray] = []
    opened: list[object] = []
    connect = client._ws_connect
    monkeypatch.setattr(
        client, "_ws_connect", lambda path, query: _Recorder(connect(path, query), sent, opened)
    )
    return sent, opened


@needs_ws
def test_unsupervised_frames_travel_binary_without_compression(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    params = support.expected()["instance_streams"]["fsds"]["params"]
    sent, opened = _recording(client, monkeypatch)
    s = client.create_stream("fsds", feature_names=FEATURES, params=params)
    got = s.stream_instances(X, batch_size=200, window=4)
    ref = client.create_stream("fsds", feature_names=FEATURES, params=params)
    want = ref.stream_instances(X, batch_size=200, binary=False)
    assert got.instances_seen == 2000 and got.seqs == tuple(range(1, 11))
    assert got.selected == want.selected
    # All FSDS frames are binary .npy, the first one too.
    binary_run = sent[:10]
    assert len(binary_run) == 10 and all(isinstance(f, (bytes, bytearray)) for f in binary_run)
    assert all(np.load(io.BytesIO(f)).shape == (200, 100) for f in binary_run)
    # The SDK offers no permessage-deflate, so none is negotiated.
    assert opened and all(conn.protocol.extensions == [] for conn in opened)  # type: ignore[attr-defined]


@needs_ws
def test_labels_given_for_an_unsupervised_stream_stay_out_of_its_binary_frames(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression: labelled batches went as .npy with the labels as a last column,
    # which an unsupervised stream reads as one more feature and refuses.
    params = support.expected()["instance_streams"]["fsds"]["params"]
    sent, _ = _recording(client, monkeypatch)
    s = client.create_stream("fsds", feature_names=FEATURES, params=params)
    labels = (np.arange(X.shape[0]) % 2).astype(np.float64)
    got = s.stream_instances(X, y=labels, batch_size=200)
    ref = client.create_stream("fsds", feature_names=FEATURES, params=params)
    want = ref.stream_instances(X, batch_size=200, binary=False)
    assert got.errors == () and got.instances_seen == 2000
    assert got.selected == want.selected
    assert all(np.load(io.BytesIO(f)).shape == (200, 100) for f in sent[:10])


@needs_ws
def test_handles_read_the_stream_and_the_client_reads_the_catalogue_once(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    params = support.expected()["instance_streams"]["fsds"]["params"]
    created = client.create_stream("fsds", feature_names=FEATURES, params=params)
    sent, _ = _recording(client, monkeypatch)
    paths: list[str] = []
    client._http.event_hooks["request"].append(lambda request: paths.append(request.url.path))
    for seen in (400, 800):
        handle = client.stream(created.id)
        assert handle.info is None
        assert handle.stream_instances(X[:400], batch_size=200).instances_seen == seen
        assert handle.info is not None and handle.info.algorithm == "fsds"
    assert len(sent) == 4 and all(isinstance(f, (bytes, bytearray)) for f in sent)
    assert paths.count("/v1/algorithms") == 1
    assert paths.count(f"/v1/streams/{created.id}") == 2


@needs_ws
def test_unlabelled_frames_to_a_supervised_stream_stay_json(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent, _ = _recording(client, monkeypatch)
    s = client.create_stream("ofs", feature_names=FEATURES, params=OFS["params"])
    result = s.stream_instances(X[:300], batch_size=100, on_error="skip")
    # A supervised selector refuses frames without labels; none is read as labelled .npy.
    assert result.instances_seen == 0 and len(result.errors) == 3
    assert sent and all(isinstance(f, str) for f in sent)
    assert s.selected().features == ()


@needs_ws
def test_async_frames_are_not_compressed(live: LiveServer) -> None:
    async def go() -> list[object]:
        async with AsyncClient(live.url, timeout=30) as c:
            url = ws.ws_url(c.url, "/v1/streams/nope/ws", {})
            from websockets.asyncio.client import connect

            conn = await connect(url, **c._ws_options())
            try:
                return list(conn.protocol.extensions)
            finally:
                await conn.close()

    assert asyncio.run(go()) == []
