"""The server's commands of the ``featurestream`` command line: ``serve``, ``bench``, ``compare``,
``consume``.

``serve`` runs the server, ``bench`` measures it, ``compare`` judges
feature-stream selectors on data sets through it (:mod:`featurestream.compare`)
and ``consume`` applies a log's messages to streams (:mod:`featurestream.ingest`).
The client commands (``replay``, ``selected``, ``events``, ``streams``, ``status``) belong to the
client package; the entry point (:mod:`featurestream._entry`) adds them to
this parser, so that one ``featurestream`` command offers all.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from featurestream import __version__

_log = logging.getLogger("featurestream.cli")


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from featurestream.config import Settings
    from featurestream.logs import configure_logging, logging_config

    overrides = {
        "host": args.host,
        "port": args.port,
        "store_url": args.store,
        "workers": args.workers,
        "compute_workers": args.compute_workers,
        "log_level": args.log_level,
        "ws_compression": args.ws_compression,
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        # A log line like every other of the server's (JSON), naming the setting.
        configure_logging()
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "settings"
            _log.error("featurestream serve: %s: %s", field, err["msg"], extra={"setting": field})
        return 2
    # JSON lines from here on, an exception nothing catches included (logs.py).
    configure_logging(settings.log_level)
    # Worker processes build their app from the environment: hand the options down.
    for key, value in overrides.items():
        os.environ[f"FEATURESTREAM_{key.upper()}"] = str(value)
    uvicorn.run(
        "featurestream.api.app:app_from_env",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        log_level=settings.log_level,
        # Every line as JSON, uvicorn's own too (start-up, shutdown, errors, tracebacks).
        log_config=logging_config(settings.log_level),
        # The app writes its own access lines, as JSON with request ids (logs.py).
        access_log=False,
        timeout_graceful_shutdown=10,
        ws_ping_interval=settings.ws_ping_interval,
        ws_ping_timeout=settings.ws_ping_timeout,
        # Off: clients that offer permessage-deflate (most do by default) get plain frames.
        ws_per_message_deflate=settings.ws_compression,
        # uvicorn's own sans-I/O WebSocket protocol (over the websockets library).
        ws="websockets-sansio",
    )
    return 0


def build_parser(*more_commands: Callable[[Any], None]) -> argparse.ArgumentParser:
    """The parser of ``serve``, ``bench``, ``compare`` and the commands ``more_commands`` add.

    Each of ``more_commands`` is called with the subparsers, after ``compare``.
    """
    parser = argparse.ArgumentParser(
        prog="featurestream", description="Streaming feature selection service."
    )
    parser.add_argument("--version", action="version", version=f"featurestream {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve",
        help="Run the HTTP/WebSocket server.",
        description="Run the server. Every option can also be set in the environment as "
        "FEATURESTREAM_<OPTION> (e.g. FEATURESTREAM_STORE_URL).",
    )
    serve.add_argument("--host", help="Bind address (default 127.0.0.1).")
    serve.add_argument("--port", type=int, help="Port (default 8000).")
    serve.add_argument("--store", help="memory:// (default, embedded) or redis://host:port/db.")
    serve.add_argument(
        "--workers", type=int, help="Serving processes (uvicorn workers; Redis store only)."
    )
    serve.add_argument(
        "--compute-workers",
        type=int,
        help="Compute worker processes per serving process (default: the number of cores; "
        "0: compute in the serving process, for debugging).",
    )
    serve.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"])
    serve.add_argument(
        "--ws-compression",
        action=argparse.BooleanOptionalAction,
        help="Negotiate permessage-deflate with WebSocket clients that offer it (default off).",
    )
    serve.set_defaults(func=_serve)
    # Listed for --help; its own parser (featurestream.bench) reads its options.
    sub.add_parser("bench", help="Benchmark a selector in process and through the service.")
    # Its options are parsed here; the heavy imports wait until it runs.
    from featurestream.compare.command import add_parser as add_compare

    add_compare(sub)
    from featurestream.ingest.command import add_parser as add_consume

    add_consume(sub)
    for add_commands in more_commands:
        add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None, *more_commands: Callable[[Any], None]) -> int:
    """Run ``featurestream`` with ``argv``; ``more_commands`` as for :func:`build_parser`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:
        from featurestream.bench import main as bench_main

        return bench_main(argv[1:])
    args = build_parser(*more_commands).parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
