"""The latency bench's own HTTP/1.1 reader, against a scripted server."""

from __future__ import annotations

import asyncio
import time

import pytest

from featurestream.bench.latency import _Connection, _read

pytestmark = pytest.mark.anyio


async def scripted(responses: list[bytes]) -> tuple[asyncio.Server, int, list[bytes]]:
    """A server answering each request with the next response; it records the requests."""
    seen: list[bytes] = []
    queue = list(responses)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # A handler still waiting when the test's loop ends is cancelled: it closes
        # its writer then too, so no writer outlives the loop unclosed.
        try:
            while queue:
                try:
                    seen.append(await reader.readuntil(b"\r\n\r\n"))
                except asyncio.IncompleteReadError:
                    break
                writer.write(queue.pop(0))
                await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, port, seen


async def test_responses_are_read_whole_on_one_keep_alive_connection() -> None:
    server, port, seen = await scripted(
        [
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
            b'HTTP/1.1 304 Not Modified\r\netag: "1"\r\n\r\n',
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ]
    )
    async with server:
        conn = await _Connection.open("127.0.0.1", port)
        request = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n"
        assert [await conn.get(request) for _ in range(3)] == [200, 304, 404]
        assert conn.reusable
        assert await conn.get(request) == 200 and not conn.reusable
        conn.close()
    assert seen == [request] * 4


async def test_a_response_without_a_length_is_refused() -> None:
    server, port, _ = await scripted([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"])
    async with server:
        conn = await _Connection.open("127.0.0.1", port)
        with pytest.raises(ConnectionError, match="Content-Length"):
            await conn.get(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        conn.close()


async def test_only_plain_http_is_read() -> None:
    with pytest.raises(ValueError, match="plain HTTP"):
        await _read("https://127.0.0.1:1", "/p", 10, 0.1)


async def test_scheduled_reads_count_what_is_not_ok() -> None:
    ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"
    bad = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n"
    server, port, seen = await scripted([ok, bad, ok, ok])
    async with server:
        latencies, service, not_ok = await _read(f"http://127.0.0.1:{port}", "/p", 40, 0.1)
    assert len(latencies) == len(service) == 4 and not_ok == 1
    assert all(s <= lat for s, lat in zip(service, latencies, strict=True))
    assert all(r.startswith(b"GET /p HTTP/1.1\r\nHost: 127.0.0.1:") for r in seen)


def test_cpu_times_and_the_steal_share() -> None:
    from featurestream.bench.latency import cpu_times, steal_percent

    first = cpu_times()
    if first is None:  # no /proc/stat (not Linux): the share is reported as None
        assert steal_percent(None, None) is None
        return
    time.sleep(0.05)
    second = cpu_times()
    assert second is not None and 0 <= first[0] <= first[1] <= second[1]
    share = steal_percent(first, second)
    assert share is None or 0.0 <= share <= 100.0
    assert steal_percent(second, first) is None  # readings out of order give no share
