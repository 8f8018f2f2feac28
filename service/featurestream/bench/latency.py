"""Read latency under write load: ``featurestream bench latency``.

A writer process (``writers.py``) streams an OFS instance stream (dense frames
of 100 instances, d = 1,000), at ``--write-rate`` instances per second or,
with 0, as fast as the server acknowledges (a saturated server), by the path
``--writer`` names (raw binary frames, the SDK, JSON requests, or a plain
``websockets`` client); or, with ``--ingest features``, ingests dorothea-like
feature columns into SAOLA (the SDK, raw .npz or JSON requests) as fast as
the server answers. Meanwhile this process reads
``GET /v1/streams/{id}/selected`` of the same stream on a fixed schedule
(``--rate`` requests per second, open loop). Each read's latency is measured
from the moment it was *scheduled*, so a slow answer also counts against the
reads that had to wait behind it (no coordinated omission);
the p99 from the moment each read was actually sent is reported beside it, as
the reader itself may wake late on a busy machine.
Reported: the percentiles of the read latency, the reads per second achieved,
and the writer's instances (or columns) per second over the same interval.
Then, once the writer has stopped (and half a second later), the same reads
run on the same stream for ``--idle-seconds`` more (by default ``--seconds``,
at most 3 s): their p50 and p99 are the floor the machine and the server set
without the load (on a virtual machine, waking an idle CPU alone can take
milliseconds), beside which the figures under load are read.

The writer runs in its own process so that its sending does not compete with
the reader for this interpreter's lock.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event

import numpy as np

from featurestream.bench.writers import DIM


@dataclass
class LatencyResult:
    store: str
    rate: float
    seconds: float
    reads: int
    reads_per_second: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p99_from_send_ms: float  # the reader's own lateness left out
    max_ms: float
    not_ok: int
    write_rate: float  # asked for (0: as fast as the server acknowledges)
    writer_instances_per_second: float
    writer: str = "raw"  # how the writer sends (raw, sdk, json, websockets)
    ingest: str = "instances"  # what it writes: OFS instances or SAOLA feature columns
    # Share of the machine's CPU time the hypervisor gave to other guests during the
    # reads (Linux /proc/stat "steal"; None elsewhere): tails grow with it.
    steal_percent: float | None = None
    # The same reads once the writer has stopped: none with --idle-seconds 0, or when
    # the writer would not stop or the reads could not connect (percentiles None).
    idle_seconds: float = 0.0  # asked for
    idle_reads: int = 0
    idle_not_ok: int = 0
    idle_p50_ms: float | None = None
    idle_p99_ms: float | None = None


def cpu_times() -> tuple[int, int] | None:
    """(steal, total) clock ticks of all CPUs since boot, from /proc/stat; None without it."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    # user nice system idle iowait irq softirq steal [guest guest_nice, inside user]
    ticks = [int(v) for v in fields[1:9]]
    return ticks[7], sum(ticks)


def steal_percent(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The steal share of the CPU time between two :func:`cpu_times` readings.

    >>> steal_percent((10, 1000), (60, 2000))
    5.0
    """
    if before is None or after is None or after[1] <= before[1]:
        return None
    return 100.0 * (after[0] - before[0]) / (after[1] - before[1])


_KEEPALIVE_SECONDS = 2.0  # a keep-alive connection unused this long is not reused
_SETTLE_SECONDS = 0.5  # after the writer has stopped, before the idle reads
_IDLE_SECONDS_MAX = 3.0  # the idle reads' default length at most


class _Connection:
    """One keep-alive HTTP/1.1 connection that sends a GET and reads its whole response.

    The reader is a load generator: it must cost the machine far less than the
    server it measures (an HTTP client library costs about a millisecond of CPU
    a request, as much as the server's answer), so it speaks the little HTTP/1.1
    a GET needs itself: a request line, and a response with Content-Length.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reusable = True  # until the server says it closes the connection
        self.used = time.perf_counter()

    @classmethod
    async def open(cls, host: str, port: int) -> _Connection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def get(self, request: bytes) -> int:
        """Send ``request`` (a whole GET); the response's status, its body read and dropped."""
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = 0 if status in (204, 304) else None
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                self.reusable = False
        if length is None:
            raise ConnectionError("a response without Content-Length")
        await self.reader.readexactly(length)
        return status

    def close(self) -> None:
        self.writer.close()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (uvicorn[standard] brings it): the
    reader's own overhead per read is then lower still."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _read(
    url: str, path: str, rate: float, seconds: float
) -> tuple[list[float], list[float], int]:
    """GET ``path`` at ``rate`` per second (each on schedule, however slow the others).

    Each read takes an idle keep-alive connection, or opens one when all are busy.
    """
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme != "http":
        raise ValueError(f"The latency reader speaks plain HTTP to the server; got {url!r}.")
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    request = f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode()
    latencies: list[float] = []
    service: list[float] = []  # from the moment the read was actually sent
    not_ok = [0]
    idle: list[_Connection] = []
    opened: list[_Connection] = []

    async def connection() -> _Connection:
        # Most recently used first; one idle for a while may have been closed by the
        # server (uvicorn keeps an idle connection 5 s): let it go, open a new one.
        while idle:
            conn = idle.pop()
            if time.perf_counter() - conn.used < _KEEPALIVE_SECONDS:
                return conn
            conn.close()
        conn = await _Connection.open(host, port)
        opened.append(conn)
        return conn

    async def one(due: float) -> None:
        conn = await connection()
        sent = time.perf_counter()
        try:
            status = await conn.get(request)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            status = 0
            conn.close()
        else:
            conn.used = time.perf_counter()
            if conn.reusable:
                idle.append(conn)
            else:
                conn.close()
        done = time.perf_counter()
        latencies.append(done - due)
        service.append(done - sent)
        not_ok[0] += status != 200

    start = time.perf_counter()
    tasks = []
    k = 0
    try:
        while k / rate < seconds:
            due = start + k / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(due)))
            k += 1
        await asyncio.gather(*tasks)
    finally:
        for conn in opened:
            conn.close()
    return latencies, service, not_ok[0]


def measure(
    url: str,
    store: str,
    rate: float,
    seconds: float,
    write_rate: float = 0.0,
    warmup: float = 1.0,
    writer: str = "raw",
    ingest: str = "instances",
    chunk: int = 20_000,
    quick: bool = False,
    idle_seconds: float | None = None,
) -> LatencyResult:
    """Run the writer and the scheduled reads against a server at ``url``, then the
    same reads for ``idle_seconds`` (None: ``seconds``, at most 3; 0: none) once the
    writer has stopped."""
    if idle_seconds is None:
        idle_seconds = min(seconds, _IDLE_SECONDS_MAX)
    import httpx

    from featurestream.bench import writers

    sid = f"bench-latency-{uuid.uuid4().hex[:8]}"
    names = [f"x{j}" for j in range(DIM)]
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    counter = ctx.Value("q", 0)
    with httpx.Client(base_url=url, timeout=30) as c:
        if ingest == "instances":
            r = c.post(
                "/v1/streams",
                json={
                    "id": sid,
                    "algorithm": "ofs",
                    "params": {"num_features": 50},
                    "feature_names": names,
                },
            )
            r.raise_for_status()
        # A feature-stream writer creates its stream itself (it holds the target).
        process = ctx.Process(
            target=writers.run,
            args=(writer, ingest, url, sid, stop, counter, write_rate, chunk, quick),
            daemon=True,
        )
        process.start()
        try:
            # Wait until the writer is streaming, then a little longer.
            deadline = time.monotonic() + 60
            while counter.value == 0:
                if not process.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError("the writer did not start streaming")
                time.sleep(0.01)
            time.sleep(warmup)
            written0 = counter.value
            ticks = cpu_times()
            start = time.perf_counter()
            with asyncio.Runner(loop_factory=_loop_factory()) as runner:
                latencies, service, not_ok = runner.run(
                    _read(url, f"/v1/streams/{sid}/selected", rate, seconds)
                )
            elapsed = time.perf_counter() - start
            stolen = steal_percent(ticks, cpu_times())
            written = counter.value - written0
            _stop_writer(process, stop)
            idle, idle_not_ok = _idle_reads(
                process, url, f"/v1/streams/{sid}/selected", rate, idle_seconds
            )
        finally:
            _stop_writer(process, stop)
            c.delete(f"/v1/streams/{sid}")
    ms = np.array(latencies) * 1000.0
    idle_ms = np.array(idle) * 1000.0
    return LatencyResult(
        store=store,
        rate=rate,
        seconds=elapsed,
        reads=len(latencies),
        reads_per_second=len(latencies) / elapsed,
        p50_ms=float(np.percentile(ms, 50)),
        p90_ms=float(np.percentile(ms, 90)),
        p99_ms=float(np.percentile(ms, 99)),
        p99_from_send_ms=float(np.percentile(np.array(service) * 1000.0, 99)),
        max_ms=float(ms.max()),
        not_ok=not_ok,
        write_rate=write_rate,
        writer_instances_per_second=written / elapsed,
        writer=writer,
        ingest=ingest,
        steal_percent=stolen,
        idle_seconds=idle_seconds,
        idle_reads=len(idle),
        idle_not_ok=idle_not_ok,
        idle_p50_ms=float(np.percentile(idle_ms, 50)) if idle else None,
        idle_p99_ms=float(np.percentile(idle_ms, 99)) if idle else None,
    )


def _stop_writer(process: BaseProcess, stop: Event) -> None:
    """Ask the writer ``process`` to stop and wait for it (30 s), then end it (5 s)."""
    stop.set()
    process.join(30)
    if process.is_alive():
        process.terminate()
        process.join(5)


def _idle_reads(
    process: BaseProcess, url: str, path: str, rate: float, seconds: float
) -> tuple[list[float], int]:
    """The same reads for ``seconds`` once the writer ``process`` has stopped, after
    ``_SETTLE_SECONDS`` (what it sent last is answered meanwhile): their latencies
    and how many were not 200. No reads at all when asked for none, when the writer
    is still alive (they would not be idle), or when they cannot connect."""
    if seconds <= 0 or process.is_alive():
        return [], 0
    time.sleep(_SETTLE_SECONDS)
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            latencies, _, not_ok = runner.run(_read(url, path, rate, seconds))
    except OSError:
        return [], 0
    return latencies, not_ok


def report(result: LatencyResult, as_json: bool) -> str:
    if as_json:
        return json.dumps(asdict(result), indent=2)
    paced = f"paced at {result.write_rate:,.0f}/s" if result.write_rate else "unpaced"
    what = "SAOLA ingests" if result.ingest == "features" else "OFS ingests"
    unit = "columns/s" if result.ingest == "features" else "instances/s"
    if result.ingest == "features":
        paced = "unpaced"
    return (
        f"GET /selected at {result.rate:g}/s for {result.seconds:.1f} s while {what} "
        f"{result.writer_instances_per_second:,.0f} {unit} ({paced}; writer "
        f"{result.writer}; {result.store}):\n"
        f"  reads {result.reads} ({result.reads_per_second:.0f}/s), non-200 {result.not_ok}\n"
        f"  latency ms: p50 {result.p50_ms:.2f}  p90 {result.p90_ms:.2f}  "
        f"p99 {result.p99_ms:.2f}  max {result.max_ms:.2f}\n"
        f"  p99 from the actual send (the reader's own lateness left out): "
        f"{result.p99_from_send_ms:.2f}"
        + (
            ""
            if result.steal_percent is None
            else f"\n  CPU time stolen by the hypervisor meanwhile: {result.steal_percent:.1f}%"
        )
        + _idle_line(result)
    )


def _idle_line(result: LatencyResult) -> str:
    """The idle reads' line of ``report``: empty when none were asked for."""
    if result.idle_seconds <= 0:
        return ""
    if result.idle_p99_ms is None or result.idle_p50_ms is None:
        return (
            "\n  the same reads once the writer stopped: none (the writer did not stop, "
            "or the reads could not connect)"
        )
    return (
        f"\n  the same reads once the writer stopped ({result.idle_reads}, "
        f"non-200 {result.idle_not_ok}): "
        f"p50 {result.idle_p50_ms:.2f}  p99 {result.idle_p99_ms:.2f}"
    )


def report_runs(results: list[LatencyResult], as_json: bool) -> str:
    """One run as :func:`report`; several, each, then the spread of their p99."""
    if len(results) == 1:
        return report(results[0], as_json)
    p99 = sorted(r.p99_ms for r in results)
    median = float(np.median(p99))
    idle = sorted(r.idle_p99_ms for r in results if r.idle_p99_ms is not None)
    idle_median = float(np.median(idle)) if len(idle) == len(results) else None
    if as_json:
        doc = {
            "runs": [asdict(r) for r in results],
            "p99_ms_median": median,
            "idle_p99_ms_median": idle_median,
        }
        return json.dumps(doc, indent=2)
    lines = [f"run {i}: {report(r, False)}" for i, r in enumerate(results, start=1)]
    lines.append(
        f"p99 over {len(results)} runs: min {p99[0]:.2f}  median {median:.2f}  max {p99[-1]:.2f} ms"
    )
    if idle_median is not None:
        lines.append(
            f"p99 once the writer stopped: min {idle[0]:.2f}  "
            f"median {idle_median:.2f}  max {idle[-1]:.2f} ms"
        )
    return "\n".join(lines)


__all__ = ["LatencyResult", "measure", "report", "report_runs"]
