"""``featurestream bench tenants``: create and list latency in a small tenant among many streams.

A server is started on ``--store`` (a Redis, or a Redis Cluster with
``redis+cluster://``) with API keys for ``--tenants`` other tenants and one
more. The others get ``--others`` streams between them, created over HTTP by
``--workers`` threads.
A tenant holding one stream creates a stream and lists its streams,
``--samples`` times each (each created stream is deleted again before the next
sample, so the tenant holds one or two streams throughout), once before the
other streams exist ("alone") and once after ("among"), and the latency of
each call is reported: p50, p99 and the largest. With per-tenant indexes and
no global key, neither call depends on the other tenants' streams. Every
stream is deleted at the end (the keys are under a fresh prefix too).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from featurestream.bench.server import spawn_server

DEFAULT_STORE = "redis://127.0.0.1:6379/0"
SOLO = "solo"


@dataclass(frozen=True)
class Figures:
    """Milliseconds of one kind of call, over its samples."""

    samples: int
    p50: float
    p99: float
    max: float


@dataclass(frozen=True)
class TenantsResult:
    store: str
    other_streams: int
    other_tenants: int
    seed_seconds: float
    create: Figures  # among the other tenants' streams
    list: Figures
    create_alone: Figures  # the same tenant, before the other streams were created
    list_alone: Figures


def _figures(ms: list[float]) -> Figures:
    ordered = sorted(ms)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return Figures(len(ms), statistics.median(ordered), p99, ordered[-1])


def _key(tenant: str) -> str:
    return f"bench-key-{tenant}"


def _body(sid: str) -> dict[str, object]:
    return {
        "id": sid,
        "algorithm": "ofs",
        "params": {"num_features": 2},
        "feature_names": ["a", "b", "c"],
    }


def measure(store: str, *, others: int, tenants: int, samples: int, workers: int) -> TenantsResult:
    names = [f"t{i}" for i in range(tenants)] + [SOLO]
    with tempfile.TemporaryDirectory(prefix="fsbench-keys-") as tmp:
        keys = Path(tmp) / "keys"
        keys.write_text(
            "".join(f"{t}:{hashlib.sha256(_key(t).encode()).hexdigest()}\n" for t in names)
        )
        env = {"FEATURESTREAM_API_KEYS_FILE": str(keys)}
        with spawn_server(store, env=env) as server:
            clients = {
                t: httpx.Client(
                    base_url=server.url,
                    timeout=60,
                    headers={"Authorization": f"Bearer {_key(t)}"},
                )
                for t in names
            }
            owned = [(f"t{i % tenants}", f"s{i}") for i in range(others)]
            solo = clients[SOLO]
            try:
                _expect(solo.post("/v1/streams", json=_body("one")), 201)
                # The same calls before the other streams exist: the baseline.
                alone = _sample(solo, samples, "a")
                started = time.perf_counter()
                _each(
                    workers, owned, lambda t, s: clients[t].post("/v1/streams", json=_body(s)), 201
                )
                seeded = time.perf_counter() - started
                among = _sample(solo, samples, "b")
                _expect(solo.delete("/v1/streams/one"), 204)
            finally:
                _each(workers, owned, lambda t, s: clients[t].delete(f"/v1/streams/{s}"), None)
                for c in clients.values():
                    c.close()
    return TenantsResult(
        store,
        others,
        tenants,
        round(seeded, 1),
        _figures(among[0]),
        _figures(among[1]),
        _figures(alone[0]),
        _figures(alone[1]),
    )


def _sample(solo: httpx.Client, samples: int, tag: str) -> tuple[list[float], list[float]]:
    """Milliseconds of ``samples`` creates and listings by the tenant that holds one stream;
    each created stream is deleted before the next sample."""
    creates: list[float] = []
    lists: list[float] = []
    for i in range(samples):
        t0 = time.perf_counter()
        r = solo.post("/v1/streams", json=_body(f"new-{tag}{i}"))
        creates.append((time.perf_counter() - t0) * 1000)
        _expect(r, 201)
        t0 = time.perf_counter()
        r = solo.get("/v1/streams")
        lists.append((time.perf_counter() - t0) * 1000)
        _expect(r, 200)
        if len(r.json()["streams"]) != 2:
            raise RuntimeError(f"the tenant lists {r.text[:300]}, not its two streams")
        _expect(solo.delete(f"/v1/streams/new-{tag}{i}"), 204)
    return creates, lists


def _expect(r: httpx.Response, status: int | None) -> None:
    if status is not None and r.status_code != status:
        raise RuntimeError(f"{r.request.method} {r.request.url}: {r.status_code} {r.text[:300]}")


def _each(workers: int, pairs: Sequence[tuple[str, str]], call: object, status: int | None) -> None:
    def one(pair: tuple[str, str]) -> None:
        _expect(call(*pair), status)  # type: ignore[operator]

    with ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(one, pairs):
            pass


def report(result: TenantsResult, as_json: bool) -> str:
    if as_json:
        return json.dumps(asdict(result), indent=2)
    lines = [
        f"store {result.store}: {result.other_streams} streams of {result.other_tenants} "
        f"other tenants (created in {result.seed_seconds} s); tenant {SOLO!r} holds one",
        f"{'call':<8}{'':<7}{'samples':>9}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}",
    ]
    rows = (
        ("create", "alone", result.create_alone),
        ("create", "among", result.create),
        ("list", "alone", result.list_alone),
        ("list", "among", result.list),
    )
    for name, when, f in rows:
        lines.append(f"{name:<8}{when:<7}{f.samples:>9}{f.p50:>10.2f}{f.p99:>10.2f}{f.max:>10.2f}")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="featurestream bench tenants",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    p.add_argument("--store", default=DEFAULT_STORE, help=f"store URL (default {DEFAULT_STORE})")
    p.add_argument("--others", type=int, default=10_000, help="streams of the other tenants")
    p.add_argument("--tenants", type=int, default=100, help="how many other tenants")
    p.add_argument("--samples", type=int, default=200, help="creates and listings measured")
    p.add_argument("--workers", type=int, default=8, help="threads creating the other streams")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(list(argv))
    for name in ("others", "tenants", "samples", "workers"):
        if getattr(args, name) < (0 if name == "others" else 1):
            p.error(f"--{name} is too small")
    result = measure(
        args.store,
        others=args.others,
        tenants=args.tenants,
        samples=args.samples,
        workers=args.workers,
    )
    print(report(result, args.json))
    return 0


__all__ = ["Figures", "TenantsResult", "main", "measure", "report"]
