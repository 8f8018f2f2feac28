"""The server's WebSocket reader (api/ws/protocol.py) parses exactly as the library's own.

Two sans-I/O server protocols, one with the library's reader and one with a
``FrameReader``, are fed the same masked client frames (binary, text,
fragmented, pings, a close, payloads on both sides of ``LARGE_READ``) cut into
the same arbitrary pieces; after every piece both have the same events, the
same bytes to send back, the same parser error and the same state.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.frames import Close, Frame, Opcode
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.streams import StreamReader

from featurestream.api.ws.protocol import (
    CHECKED_MAJORS,
    LARGE_READ,
    SMALL_PIECE,
    UVICORN_WS,
    FrameReader,
    WebSocketProtocol,
)

SIZES = [0, 1, 125, 126, 65_535, LARGE_READ - 1, LARGE_READ, LARGE_READ + 1, 200_003]


def _frame(kind: str, size: int, seed: int) -> list[Frame]:
    """One message as the frames a client sends (two for a fragmented one)."""
    payload = os.urandom(size) if kind != "text" else b"t" * size
    if kind == "binary":
        return [Frame(Opcode.BINARY, payload)]
    if kind == "text":
        return [Frame(Opcode.TEXT, payload)]
    if kind == "ping":
        return [Frame(Opcode.PING, payload[:125])]
    if kind == "close":
        return [Frame(Opcode.CLOSE, Close(1000, "bye").serialize())]
    cut = seed % (size + 1)
    return [
        Frame(Opcode.BINARY, payload[:cut], fin=False),
        Frame(Opcode.CONT, payload[cut:]),
    ]


def _wire(messages: list[tuple[str, int, int]]) -> bytes:
    out = bytearray()
    for kind, size, seed in messages:
        for f in _frame(kind, size, seed):
            out += f.serialize(mask=True, extensions=[])
    return bytes(out)


def _pair(max_size: int | None) -> tuple[ServerProtocol, ServerProtocol]:
    stock = ServerProtocol(state=State.OPEN, max_size=max_size)
    ours = ServerProtocol(state=State.OPEN, max_size=max_size)
    assert FrameReader.installed_on(ours)
    assert type(stock.reader) is StreamReader and type(ours.reader) is FrameReader
    return stock, ours


def _seen(p: ServerProtocol) -> tuple[Any, ...]:
    events = [(e.opcode, bytes(e.data), e.fin) for e in p.events_received()]  # type: ignore[union-attr]
    exc = p.parser_exc
    return events, b"".join(p.data_to_send()), repr(exc) if exc else None, p.state


messages = st.lists(
    st.tuples(
        st.sampled_from(["binary", "binary", "text", "fragmented", "ping", "close"]),
        st.one_of(st.sampled_from(SIZES), st.integers(0, 300_000)),
        st.integers(0, 2**31),
    ),
    min_size=1,
    max_size=5,
)


@given(
    messages=messages,
    cuts=st.lists(st.integers(1, 150_000), min_size=1, max_size=12),
    max_size=st.sampled_from([None, 150_000]),
    end=st.sampled_from(["all", "eof", "truncated"]),
)
def test_a_frame_reader_parses_exactly_as_the_librarys_reader(
    messages: list[tuple[str, int, int]], cuts: list[int], max_size: int | None, end: str
) -> None:
    data = _wire(messages)
    if end == "truncated":
        data = data[: len(data) * 2 // 3]
    stock, ours = _pair(max_size)
    at, i = 0, 0
    while at < len(data):
        piece = data[at : at + cuts[i % len(cuts)]]
        at += len(piece)
        i += 1
        for p in (stock, ours):
            if not p.reader.eof:
                p.receive_data(piece)
        assert _seen(ours) == _seen(stock)
    if end != "all":
        stock.receive_eof()
        ours.receive_eof()
        assert _seen(ours) == _seen(stock)


def test_a_large_payload_is_joined_from_the_pieces_as_they_came() -> None:
    """The bytes after the payload in its last piece stay buffered for the next read."""
    _, ours = _pair(None)
    payload = os.urandom(3 * LARGE_READ + 5)
    data = _wire([("binary", 0, 0)])  # an empty frame first: the reader's small path
    data += Frame(Opcode.BINARY, payload).serialize(mask=True, extensions=[])
    data += Frame(Opcode.TEXT, b"after").serialize(mask=True, extensions=[])
    for at in range(0, len(data), 50_000):
        ours.receive_data(data[at : at + 50_000])
    events = ours.events_received()
    assert [bytes(e.data) for e in events] == [b"", payload, b"after"]  # type: ignore[union-attr]
    assert not ours.reader.buffer


def test_the_end_of_the_stream_inside_a_large_payload_fails_the_parser_as_before() -> None:
    stock, ours = _pair(None)
    data = Frame(Opcode.BINARY, os.urandom(LARGE_READ * 2)).serialize(mask=True, extensions=[])
    for p in (stock, ours):
        p.receive_data(data[:100_000])
        p.receive_eof()
    assert isinstance(ours.parser_exc, EOFError)
    assert _seen(ours) == _seen(stock)


def test_it_is_installed_on_the_librarys_reader_only() -> None:
    fresh = ServerProtocol()  # in the opening handshake, as uvicorn makes it
    assert FrameReader.installed_on(fresh) and type(fresh.reader) is FrameReader
    assert not FrameReader.installed_on(fresh)  # already ours

    class Elsewhere:  # a release whose protocol keeps its reader under another name
        _reader = StreamReader()

    elsewhere = Elsewhere()
    assert not FrameReader.installed_on(elsewhere)
    assert type(elsewhere._reader) is StreamReader
    assert not FrameReader.installed_on(None)  # a uvicorn without ``conn``


def test_uvicorn_loads_the_servers_protocol_from_its_import_string() -> None:
    import uvicorn

    from featurestream.api import create_app
    from featurestream.config import Settings

    config = uvicorn.Config(create_app(Settings(store_url="memory://")), ws=UVICORN_WS)
    config.load()
    assert config.ws_protocol_class is WebSocketProtocol


@pytest.mark.parametrize("installed_after", ["nothing", "part of the handshake", "part of a frame"])
def test_a_handshake_and_frames_go_through_the_installed_reader(installed_after: str) -> None:
    """From a protocol as uvicorn builds it, or one that has already read part of the
    handshake or of a large frame: the handshake, then every frame, as sent."""
    p = ServerProtocol()
    handshake = (
        b"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    payloads = [os.urandom(LARGE_READ * 4), b"small", os.urandom(LARGE_READ + 7)]
    frames = b"".join(Frame(Opcode.BINARY, x).serialize(mask=True, extensions=[]) for x in payloads)
    if installed_after == "nothing":
        assert FrameReader.installed_on(p)
    p.receive_data(handshake[:40])
    if installed_after == "part of the handshake":
        assert FrameReader.installed_on(p)
    p.receive_data(handshake[40:])
    [request] = p.events_received()
    p.send_response(p.accept(request))  # type: ignore[arg-type]
    assert p.state is State.OPEN
    p.receive_data(frames[:10_000])  # a large payload's read has begun
    if installed_after == "part of a frame":
        assert FrameReader.installed_on(p)
    for at in range(10_000, len(frames), 70_000):
        p.receive_data(frames[at : at + 70_000])
    assert [bytes(f.data) for f in p.events_received()] == payloads  # type: ignore[union-attr]
    assert type(p.reader) is FrameReader


@pytest.mark.parametrize("size", [LARGE_READ - 1, LARGE_READ])
def test_reads_below_the_threshold_take_the_librarys_path(size: int) -> None:
    reader = FrameReader()
    reader.feed_data(b"x" * (size - 1))
    read = reader.read_exact(size)
    next(read)
    assert (reader._pieces is None) == (size < LARGE_READ)


def test_a_payload_sent_a_few_bytes_at_a_time_costs_about_its_size() -> None:
    """A client trickling a payload (pieces of 1 to 3 bytes) does not make the reader
    keep an object per piece: they are gathered into buffers of up to LARGE_READ."""
    _, ours = _pair(None)
    payload = os.urandom(4 * LARGE_READ)
    data = Frame(Opcode.BINARY, payload).serialize(mask=True, extensions=[])
    at, step = 0, 1
    reader = ours.reader
    assert isinstance(reader, FrameReader)
    most = 0
    while at < len(data):
        ours.receive_data(data[at : at + step])
        at += step
        step = step % 3 + 1
        most = max(most, len(reader._pieces or ()))
    assert most <= 5  # the buffered start, then buffers of LARGE_READ
    [frame] = ours.events_received()
    assert bytes(frame.data) == payload  # type: ignore[union-attr]


def test_a_protocol_without_the_known_reader_keeps_its_own_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import asyncio

    import uvicorn
    from uvicorn.server import ServerState

    from featurestream.api import create_app
    from featurestream.config import Settings

    monkeypatch.setattr(WebSocketProtocol, "_said", False)
    config = uvicorn.Config(create_app(Settings(store_url="memory://")), ws=UVICORN_WS)
    config.load()
    loop = asyncio.new_event_loop()

    def made(count: int) -> list[WebSocketProtocol]:
        return [
            WebSocketProtocol(config=config, server_state=ServerState(), app_state={}, _loop=loop)
            for _ in range(count)
        ]

    try:
        with caplog.at_level("WARNING", logger="featurestream.api.ws"):
            installed = made(2)
            # A release of the library this module was not compared with.
            monkeypatch.setattr("featurestream.api.ws.protocol.websockets_version", "18.0")
            kept = made(3)
    finally:
        loop.close()
    assert all(type(p.conn.reader) is FrameReader for p in installed)
    assert all(type(p.conn.reader) is StreamReader for p in kept)
    said = [r for r in caplog.records if "library's own reader" in r.getMessage()]
    assert len(said) == 1 and "18.0" in said[0].getMessage()


@pytest.mark.parametrize(
    ("version", "checked"),
    [
        ("13.0", True),
        ("17.4", True),
        ("17.5.dev0", True),
        ("12.1", False),
        ("18.0", False),
        ("", False),
        ("x.1", False),
    ],
)
def test_only_the_releases_compared_with_get_the_reader(version: str, checked: bool) -> None:
    from featurestream.api.ws.protocol import _checked

    assert _checked(version) is checked


def test_the_installed_release_is_one_the_reader_was_compared_with() -> None:
    """Else the server would quietly run the library's reader: the tests above compare
    the two readers on this release, so a new one is added to CHECKED_MAJORS after them."""
    from websockets.version import version

    assert int(version.split(".")[0]) in CHECKED_MAJORS


def test_pieces_handed_over_in_a_buffer_the_caller_reuses_are_copied() -> None:
    """A caller may refill the bytearray it fed: the payload is what was fed at the time."""
    stock, ours = _pair(None)
    data = _wire([("binary", 3 * LARGE_READ, 0), ("text", 10, 0), ("binary", LARGE_READ + 9, 0)])
    buffer = bytearray()
    for at in range(0, len(data), 20_000):
        for p in (stock, ours):
            buffer[:] = data[at : at + 20_000]
            p.receive_data(buffer)
            buffer[:] = b"\0" * len(buffer)  # reused by its owner
        assert _seen(ours) == _seen(stock)
    for cut in (SMALL_PIECE, SMALL_PIECE - 1):  # pieces the reader keeps, or gathers
        stock, ours = _pair(None)
        for at in range(0, len(data), cut):
            for p in (stock, ours):
                piece = memoryview(bytearray(data[at : at + cut]))
                p.receive_data(piece)  # type: ignore[arg-type]
                piece[:] = b"\0" * len(piece)
        assert _seen(ours) == _seen(stock)


def test_a_connection_failed_inside_a_large_payload_drops_its_pieces() -> None:
    """uvicorn fails a connection (a keepalive timeout, say) with a payload half read:
    the pieces go at once, and what comes after is discarded as by the library."""
    stock, ours = _pair(None)
    data = Frame(Opcode.BINARY, os.urandom(4 * LARGE_READ)).serialize(mask=True, extensions=[])
    for p in (stock, ours):
        p.receive_data(data[:150_000])
    reader = ours.reader
    assert isinstance(reader, FrameReader) and reader._pieces
    for p in (stock, ours):
        p.fail(1011, "keepalive ping timeout")
    assert reader._pieces is None
    assert _seen(ours) == _seen(stock)
    for p in (stock, ours):
        p.receive_data(data[150_000:])
    assert reader._pieces is None and not reader.buffer
    assert _seen(ours) == _seen(stock)


def test_a_reader_of_another_layout_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """A release whose reader has __slots__ cannot become a FrameReader: it stays."""

    class Slotted:
        __slots__ = ("buffer", "eof")

    protocol = ServerProtocol()
    slotted = Slotted()
    monkeypatch.setattr("featurestream.api.ws.protocol.StreamReader", Slotted)
    protocol.reader = slotted  # type: ignore[assignment]
    assert not FrameReader.installed_on(protocol)
    assert type(protocol.reader) is Slotted
