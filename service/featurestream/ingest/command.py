"""``featurestream consume SOURCE``, and :func:`consume`, the same from Python.

A consumer runs with the server's settings (store, key prefix, limits: the
``FEATURESTREAM_*`` environment, as ``featurestream serve``), as one tenant
(``--tenant``; none by default, as a server without API keys), and applies
the source's messages through the same engine as the server's writes, until
it is stopped (SIGTERM or SIGINT: it finishes the batch in hand).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import TYPE_CHECKING, Any

from featurestream.config import Settings
from featurestream.errors import InvalidInput

if TYPE_CHECKING:
    from featurestream.ingest.stats import ConsumerStats

log = logging.getLogger("featurestream.ingest")


async def consume(
    source: str,
    settings: Settings | None = None,
    *,
    tenant: str | None = None,
    name: str | None = None,
    stop: asyncio.Event | None = None,
    stats: ConsumerStats | None = None,
) -> ConsumerStats:
    """Apply the messages of ``source`` until ``stop`` is set; what was settled.

    ``source`` is ``redis-stream://host:port/db?key=K&group=G`` or
    ``nats://host:port/STREAM?consumer=C`` or ``kafka://host:port/TOPIC?group=G``
    (docs/api.md, "Consuming from a log"); ``name`` the consumer's name in its
    group (default: host and process id); ``tenant`` the tenant whose streams
    the messages name.
    """
    from featurestream.engine import StreamEngine
    from featurestream.ingest import kafka_source, nats_source, redis_source
    from featurestream.ingest.applier import Applier
    from featurestream.ingest.stats import ConsumerStats
    from featurestream.store import open_store

    settings = settings or Settings()
    if tenant is not None and (not tenant or "~" in tenant):
        raise InvalidInput(f"A tenant is a non-empty name without '~'; got {tenant!r}.")
    stop = stop or asyncio.Event()
    stats = stats or ConsumerStats()
    name = name or redis_source.default_consumer()
    scheme = source.partition("://")[0]
    if scheme == nats_source.SCHEME:
        parsed_nats = nats_source.parse(source)
    elif scheme == kafka_source.SCHEME:
        parsed_kafka = kafka_source.parse(source)
    else:
        parsed = redis_source.parse(source)
    store = open_store(settings)
    await store.open()
    try:
        applier = Applier(StreamEngine(store, settings), tenant)
        log.info("consumer %s reading %s", name, source)
        if scheme == nats_source.SCHEME:
            await nats_source.NatsConsumer(parsed_nats, applier, name=name, stats=stats).run(stop)
        elif scheme == kafka_source.SCHEME:
            kafka = kafka_source.KafkaConsumer(parsed_kafka, applier, name=name, stats=stats)
            await kafka.run(stop)
        else:
            consumer = redis_source.RedisConsumer(
                parsed, applier, name=name, prefix=settings.key_prefix, stats=stats
            )
            await consumer.run(stop)
    finally:
        await store.close()
    return stats


def _run(args: argparse.Namespace) -> int:
    from featurestream.logs import configure_logging

    overrides: dict[str, Any] = {"store_url": args.store, "log_level": args.log_level}
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    configure_logging(settings.log_level)
    if args.status:
        return _status(args.source, as_json=args.json)

    async def main() -> None:
        from featurestream.ingest.metrics import MetricsServer
        from featurestream.ingest.stats import ConsumerStats

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        stats = ConsumerStats()
        metrics = None
        if args.metrics_port is not None:
            metrics = MetricsServer(args.source, stats, args.metrics_host, args.metrics_port)
            metrics.start()
            log.info("consumer metrics on http://%s/metrics", metrics.where)
        try:
            await consume(
                args.source, settings, tenant=args.tenant, name=args.name, stop=stop, stats=stats
            )
        finally:
            if metrics is not None:
                metrics.stop()

    try:
        asyncio.run(main())
    except (InvalidInput, OSError) as exc:
        log.error("featurestream consume: %s", getattr(exc, "message", exc))
        return 2
    return 0


def _status(source: str, *, as_json: bool) -> int:
    """Print the group's lag per partition (``--status``)."""
    import json

    from featurestream.ingest.lag import group_lag

    try:
        parts = asyncio.run(group_lag(source))
    except InvalidInput as exc:
        print(f"featurestream consume --status: {exc.message}", file=sys.stderr)
        return 2
    except Exception as exc:  # the log does not answer
        print(f"featurestream consume --status: cannot read {source}: {exc}", file=sys.stderr)
        return 1
    if as_json:
        doc = [{"partition": p.partition, "lag": p.lag, "pending": p.pending} for p in parts]
        print(json.dumps({"partitions": doc}))
        return 0
    width = max([len("partition"), *(len(p.partition) for p in parts)])
    print(f"{'partition':<{width}}  {'lag':>10}  {'pending':>10}")
    for p in parts:
        lag = "-" if p.lag is None else str(p.lag)
        pending = "-" if p.pending is None else str(p.pending)
        print(f"{p.partition:<{width}}  {lag:>10}  {pending:>10}")
    return 0


def add_parser(sub: Any) -> None:
    """Add ``consume`` to the ``featurestream`` command's subparsers."""
    p = sub.add_parser(
        "consume",
        help="Apply the messages of a log (Redis Streams, NATS JetStream, Kafka) to streams.",
        description="Consume SOURCE in a consumer group and apply each message to its "
        "stream, exactly once in effect. SOURCE: redis-stream://host:port/db?key=K&group=G "
        "nats://host:port/STREAM?consumer=C or kafka://host:port[,host:port]/TOPIC?group=G "
        "(docs/api.md, Consuming from a log). The server's settings apply "
        "(FEATURESTREAM_<OPTION> in the environment).",
    )
    p.add_argument("source", help="redis-stream://host:port/db?key=K&group=G or nats://...")
    p.add_argument("--store", help="The state store (default: FEATURESTREAM_STORE_URL).")
    p.add_argument("--tenant", help="The tenant whose streams the messages name.")
    p.add_argument("--name", help="This consumer's name in its group (default: host-pid).")
    p.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument(
        "--metrics-port",
        type=int,
        help="Serve this consumer's Prometheus metrics (and its group's lag) on this port.",
    )
    p.add_argument(
        "--metrics-host", default="127.0.0.1", help="Address of the metrics (0.0.0.0 in pods)."
    )
    p.add_argument(
        "--status",
        action="store_true",
        help="Print the group's lag and pending messages per partition, and exit.",
    )
    p.add_argument("--json", action="store_true", help="With --status: one JSON document.")
    p.set_defaults(func=_run)


__all__ = ["add_parser", "consume"]
