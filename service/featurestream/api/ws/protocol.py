"""The server's WebSocket protocol: uvicorn's sans-I/O one, reading large frames in one copy.

uvicorn's ``websockets-sansio`` protocol parses frames with the websockets
library's sans-I/O parser, which appends every piece the socket gives to one
growing buffer and then slices each frame's payload out of it: two copies of
every byte, and more when the growing buffer is moved as it grows. A frame of
100 instances of 1,000 features is 800 KB; at 500 frames a second those copies
took about a quarter of the event loop thread's CPU (measured with ``perf``),
time during which a read of the selection waits.

:class:`FrameReader` keeps the pieces of a large payload aside as they come and
joins them once, when the payload is complete: one copy (pieces of a few bytes,
from a client that trickles its payload, are gathered into buffers of its own,
so that they cost what the library's reader would). Everything else
(the opening handshake, headers, small frames, the end of the stream, what
follows a payload in the last piece) goes through the library's own reader
unchanged. :class:`WebSocketProtocol` is uvicorn's protocol with this reader
in place of the library's; ``featurestream serve`` runs it.

The parser's reader is not a documented part of the library. Its
``read_exact``, ``feed_data``, ``discard``, ``buffer`` and ``eof`` are the same in
websockets 13 to 17, the releases in :data:`CHECKED_MAJORS`; the tests compare
the two readers byte for byte on the installed release. Under any other
release, or where the parser keeps a reader of another type or layout, the
connection keeps the library's own reader and works exactly as before, only
slower; the log says so once.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any

from uvicorn import __version__ as uvicorn_version
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.streams import StreamReader
from websockets.version import version as websockets_version

# Reads of at least this many bytes collect pieces (a payload); shorter ones (headers,
# small frames) take the library's path, where a copy costs nothing worth saving.
LARGE_READ = 64 * 1024
# Pieces shorter than this are gathered into one buffer: a client that sends a payload
# a few bytes at a time costs the reader about the payload's size, as the library's does.
SMALL_PIECE = 4096
# The major releases of websockets whose StreamReader this module was compared with.
CHECKED_MAJORS = range(13, 18)

log = logging.getLogger("featurestream.api.ws")


class FrameReader(StreamReader):
    """websockets' ``StreamReader``, with one copy for large reads.

    A ``read_exact(n)`` of at least :data:`LARGE_READ` bytes that the buffer
    cannot serve yet takes the buffer as its first piece and collects what
    :meth:`feed_data` is given after it, up to ``n`` bytes (the rest of a
    piece goes back to the buffer), then joins the pieces once. The bytes
    returned are those the library's reader returns (as ``bytes``, where it
    gives a ``bytearray``; the parser only reads them).

    >>> reader = FrameReader()
    >>> read = reader.read_exact(LARGE_READ + 2)
    >>> reader.feed_data(b"a" * LARGE_READ)
    >>> next(read)
    >>> reader.feed_data(b"bcde")
    >>> try:
    ...     next(read)
    ... except StopIteration as done:
    ...     payload = done.value
    >>> len(payload), payload[-3:], bytes(reader.buffer)
    (65538, b'abc', b'de')
    """

    # The payload being collected (None: none), its length so far and in all. Class
    # defaults, so that a library reader turned into a FrameReader starts with none.
    _pieces: list[Any] | None = None
    _have = 0
    _want = 0

    def read_exact(self, n: int) -> Generator[None, None, Any]:
        if n < LARGE_READ or len(self.buffer) >= n:
            return (yield from super().read_exact(n))
        # The buffer holds the start of the payload: it becomes the first piece.
        self._pieces = [self.buffer] if self.buffer else []
        self._have = len(self.buffer)
        self._want = n
        self.buffer = bytearray()
        try:
            while self._have < n:
                if self.eof:
                    raise EOFError(f"stream ends after {self._have} bytes, expected {n} bytes")
                yield
            return b"".join(self._pieces)
        finally:
            # Also when the parser is dropped mid-payload (the connection failed).
            self._pieces = None

    def feed_data(self, data: bytes | bytearray) -> None:
        pieces = self._pieces
        if pieces is None:
            super().feed_data(data)
            return
        if self.eof:
            raise EOFError("stream ended")
        view = memoryview(data)
        part, rest = view[: self._want - self._have], view[self._want - self._have :]
        if len(part) >= SMALL_PIECE and type(data) is bytes:
            # The transport hands over a new bytes object per read: kept as it is.
            pieces.append(part)
        elif pieces and type(pieces[-1]) is bytearray and len(pieces[-1]) < LARGE_READ:
            # Small pieces go into buffers of this reader's own, of up to LARGE_READ bytes
            # (an entry per piece of a few bytes would cost more than the bytes), and so
            # does what another owner could reuse.
            pieces[-1] += part
        else:
            pieces.append(bytearray(part))
        self._have += len(part)
        if rest:
            self.buffer += rest

    def discard(self) -> None:
        self._pieces = None
        super().discard()

    @classmethod
    def installed_on(cls, protocol: Any) -> bool:
        """Make a sans-I/O protocol's reader a ``FrameReader``; False where it is not the library's.

        The reader becomes one in place (the same object, its buffer and state
        kept), because the protocol's parser holds the reader's methods as
        bound when it started; so it can be done at any point of a connection.
        A read in progress finishes as the library's (a ``FrameReader`` hands
        its data to the library's code while it collects no payload); the
        next ones are this class's. Where the protocol has no reader, or one
        of another type or layout, or the library is a release outside
        :data:`CHECKED_MAJORS`, it is left as it is.
        """
        reader = getattr(protocol, "reader", None)
        if type(reader) is not StreamReader or not _checked(websockets_version):
            return False
        try:
            reader.__class__ = cls
        except TypeError:  # a reader with __slots__: another layout than this class's
            return False
        return True


def _checked(version: str) -> bool:
    """Whether a websockets version string is of a release in :data:`CHECKED_MAJORS`."""
    major = version.split(".", 1)[0]
    return major.isdigit() and int(major) in CHECKED_MAJORS


class WebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's ``websockets-sansio`` protocol, parsing with a :class:`FrameReader`.

    Where the library's parser has no reader this module knows, the connection
    keeps the library's, and the first such connection says so in the log.
    """

    _said = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        parser = getattr(self, "conn", None)  # uvicorn's name for the sans-I/O protocol
        if not FrameReader.installed_on(parser) and not WebSocketProtocol._said:
            WebSocketProtocol._said = True
            log.warning(
                "WebSocket frames are read with the websockets library's own reader: this "
                "release of the library (%s, under uvicorn %s) is not one whose parser's "
                "reader this server was checked against, so each frame is copied once more "
                "on the event loop",
                websockets_version,
                uvicorn_version,
            )


# What ``uvicorn.run(ws=...)`` is given (an import string: worker processes import it).
UVICORN_WS = f"{__name__}:WebSocketProtocol"

__all__ = [
    "CHECKED_MAJORS",
    "LARGE_READ",
    "SMALL_PIECE",
    "UVICORN_WS",
    "FrameReader",
    "WebSocketProtocol",
]
