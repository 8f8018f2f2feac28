"""A consumer's ``/metrics``: what it settled, and its group's lag per partition.

``featurestream consume --metrics-port PORT`` serves Prometheus text (and
``/healthz``) from the consumer process, with uvicorn, beside the
consumption. The counters are this consumer's since it started; the lag is
the group's, read from the log at each scrape (``lag.py``), so any member
of a group shows the whole group's.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from starlette.types import Receive, Scope, Send

from featurestream.ingest.lag import group_lag
from featurestream.ingest.stats import ConsumerStats

log = logging.getLogger("featurestream.ingest")

COUNTERS = {
    "applied": "Messages this consumer applied.",
    "replayed": "Messages delivered again and found applied already (not applied twice).",
    "dead": "Messages refused and sent to the dead letters.",
    "claimed": "Entries taken over from consumers that left them pending (Redis).",
    "pauses": "Rounds that found the store or the log not answering.",
}


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


async def render(source: str, stats: ConsumerStats) -> str:
    """The Prometheus text of ``stats`` and of the group's lag."""
    counts = stats.document()
    lines = []
    for name, text in COUNTERS.items():
        lines += [
            f"# HELP featurestream_consumer_{name}_total {text}",
            f"# TYPE featurestream_consumer_{name}_total counter",
            f"featurestream_consumer_{name}_total {counts[name]}",
        ]
    try:
        parts = await group_lag(source)
        up = 1
    except Exception as exc:  # the log does not answer: the counters still do
        log.warning("consumer lag not read: %s", exc)
        parts, up = [], 0
    lines += [
        "# HELP featurestream_consumer_lag_up 1 when the group's lag was read from the log.",
        "# TYPE featurestream_consumer_lag_up gauge",
        f"featurestream_consumer_lag_up {up}",
        "# HELP featurestream_consumer_lag Messages of a partition not yet given to the group.",
        "# TYPE featurestream_consumer_lag gauge",
    ]
    lines += [
        f'featurestream_consumer_lag{{partition="{_label(p.partition)}"}} {p.lag}'
        for p in parts
        if p.lag is not None
    ]
    lines += [
        "# HELP featurestream_consumer_pending Messages of a partition given to the group "
        "and not yet acknowledged.",
        "# TYPE featurestream_consumer_pending gauge",
    ]
    lines += [
        f'featurestream_consumer_pending{{partition="{_label(p.partition)}"}} {p.pending}'
        for p in parts
        if p.pending is not None
    ]
    return "\n".join(lines) + "\n"


def app(source: str, stats: ConsumerStats) -> Any:
    """The ASGI app of a consumer's metrics."""

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/metrics":
            status, body = 200, (await render(source, stats)).encode()
            kind = b"text/plain; version=0.0.4; charset=utf-8"
        elif scope["path"] == "/healthz":
            status, body, kind = 200, b'{"status":"ok"}', b"application/json"
        else:
            status, body, kind = 404, b"not found\n", b"text/plain"
        headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return serve


class MetricsServer:
    """The metrics served by uvicorn in a thread of their own (uvicorn then leaves the
    process's signals to the consumer); :meth:`stop` ends it."""

    def __init__(self, source: str, stats: ConsumerStats, host: str, port: int) -> None:
        import uvicorn

        config = uvicorn.Config(
            app(source, stats),
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="off",
            loop="asyncio",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="metrics", daemon=True)
        self.where = f"{host}:{port}"

    def start(self, timeout: float = 10.0) -> None:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise OSError(f"cannot serve the consumer's metrics on {self.where}")
            time.sleep(0.02)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)


__all__ = ["COUNTERS", "MetricsServer", "app", "render"]
