"""A small Prometheus text exposition of request and engine counters."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

# Upper bounds (seconds) of the request latency histogram buckets; +Inf is implied.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


ENGINE_COUNTERS = {
    "commits": "State changes committed to the store.",
    "commit_conflicts": "Commits lost to a concurrent writer and re-applied.",
    "store_errors": "Store calls of writes, creates and deletes that failed because the "
    "store was unavailable, hung (store_timeout) or full.",
    "store_full": "Of those, the ones Redis refused for want of memory (maxmemory).",
    "features_processed": "Feature columns applied.",
    "instances_processed": "Instances applied.",
    "drifts": "Drifts detected by the streams' drift watches (drift events committed).",
}


@dataclass
class Metrics:
    """This process's counters (each uvicorn worker keeps its own)."""

    requests: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    seconds: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    buckets: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    engine: Any = None
    ws: Any = None
    # Whether the compiled kernels warmed at start-up are loaded (warm_kernels): None
    # when the warm-up is off, False while it runs or after it failed.
    kernels_warm: bool | None = None
    # True while the warm-up runs: /readyz is not ready meanwhile.
    warming: bool = False

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests[(route, method, status)] += 1
        self.seconds[(route, method)] += seconds
        for i, bound in enumerate(BUCKETS):
            if seconds <= bound:
                self.buckets[(route, method, i)] += 1
                break
        else:
            self.buckets[(route, method, len(BUCKETS))] += 1


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
        "# HELP featurestream_http_request_duration_seconds Request latency by route and method.",
        "# TYPE featurestream_http_request_duration_seconds histogram",
    ]
    for route, method in sorted(metrics.seconds):
        cumulative = 0
        for i, bound in enumerate((*BUCKETS, float("inf"))):
            cumulative += metrics.buckets[(route, method, i)]
            le = "+Inf" if bound == float("inf") else repr(bound)
            labels = _labels(route=route, method=method, le=le)
            lines.append(f"featurestream_http_request_duration_seconds_bucket{labels} {cumulative}")
        labels = _labels(route=route, method=method)
        lines.append(
            f"featurestream_http_request_duration_seconds_sum{labels} "
            f"{metrics.seconds[(route, method)]:.6f}"
        )
        lines.append(f"featurestream_http_request_duration_seconds_count{labels} {cumulative}")
    if metrics.engine is not None:
        counters = metrics.engine.counters
        for name, help_text in ENGINE_COUNTERS.items():
            lines += [
                f"# HELP featurestream_{name}_total {help_text}",
                f"# TYPE featurestream_{name}_total counter",
                f"featurestream_{name}_total {counters[name]}",
            ]
        lines += [
            "# HELP featurestream_decisions_total Feature decisions committed, by type.",
            "# TYPE featurestream_decisions_total counter",
        ]
        for kind in ("accepted", "rejected", "evicted"):
            labels = _labels(type=kind)
            lines.append(f"featurestream_decisions_total{labels} {counters['decisions_' + kind]}")
        cache = metrics.engine.cache
        lines += [
            "# HELP featurestream_cache_streams Streams this process holds decoded.",
            "# TYPE featurestream_cache_streams gauge",
            f"featurestream_cache_streams {len(cache)}",
            "# HELP featurestream_cache_bytes Memory their decoded states take (measured).",
            "# TYPE featurestream_cache_bytes gauge",
            f"featurestream_cache_bytes {cache.bytes}",
            "# HELP featurestream_stream_locks Per-stream locks held, awaited or of a "
            "cached stream.",
            "# TYPE featurestream_stream_locks gauge",
            f"featurestream_stream_locks {cache.locks()}",
        ]
    if metrics.kernels_warm is not None:
        lines += [
            "# HELP featurestream_kernels_warm 1 once the compiled kernels warmed at "
            "start-up are loaded (0 while they load).",
            "# TYPE featurestream_kernels_warm gauge",
            f"featurestream_kernels_warm {int(metrics.kernels_warm)}",
        ]
    if metrics.ws is not None:
        stats = metrics.ws.stats
        lines += [
            "# HELP featurestream_ws_connections WebSocket connections open now.",
            "# TYPE featurestream_ws_connections gauge",
            f"featurestream_ws_connections {len(metrics.ws)}",
            "# HELP featurestream_ws_frames_total WebSocket frames answered.",
            "# TYPE featurestream_ws_frames_total counter",
            f"featurestream_ws_frames_total {stats.frames}",
            "# HELP featurestream_ws_groups_total Group commits of WebSocket frames.",
            "# TYPE featurestream_ws_groups_total counter",
            f"featurestream_ws_groups_total {stats.groups}",
        ]
    return "\n".join(lines) + "\n"


__all__ = ["Metrics", "render"]
