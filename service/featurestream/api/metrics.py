"""A small Prometheus text exposition of request and engine counters."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


@dataclass
class Metrics:
    requests: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    seconds: Counter[tuple[str, str]] = field(default_factory=Counter)
    engine: Any = None


class MetricsMiddleware:
    """Counts requests by route template, method and status, and their total time."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            self.metrics.requests[(path, scope["method"], status)] += 1
            self.metrics.seconds[(path, scope["method"])] += time.perf_counter() - start


def _labels(**kv: object) -> str:
    inner = ",".join(
        f'{k}="{str(v).replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in kv.items()
    )
    return "{" + inner + "}"


def render(metrics: Metrics) -> str:
    lines = [
        "# HELP featurestream_http_requests_total HTTP requests by route, method and status.",
        "# TYPE featurestream_http_requests_total counter",
    ]
    for (path, method, status), n in sorted(metrics.requests.items()):
        labels = _labels(route=path, method=method, status=status)
        lines.append(f"featurestream_http_requests_total{labels} {n}")
    lines += [
        "# HELP featurestream_http_request_seconds_total Time spent serving requests.",
        "# TYPE featurestream_http_request_seconds_total counter",
    ]
    for (path, method), secs in sorted(metrics.seconds.items()):
        labels = _labels(route=path, method=method)
        lines.append(f"featurestream_http_request_seconds_total{labels} {secs:.6f}")
    if metrics.engine is not None:
        for name in ("commits", "commit_conflicts", "features_processed", "instances_processed"):
            lines += [
                f"# TYPE featurestream_{name}_total counter",
                f"featurestream_{name}_total {metrics.engine.counters[name]}",
            ]
    return "\n".join(lines) + "\n"


__all__ = ["Metrics", "MetricsMiddleware", "render"]
