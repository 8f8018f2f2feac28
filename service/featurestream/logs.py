"""Structured JSON logs with request ids.

Every HTTP request gets an id (assigned by ``api/middleware.py``), kept in
a context variable for the duration of the request and added to every log
record emitted meanwhile, so one request's lines can be found together.
``logging_config`` is the one logging configuration of a server process: every
logger (featurestream's, uvicorn's ``uvicorn.error``, and any other library's,
through the root logger) writes one JSON object per line to stderr, tracebacks
included (in ``exc``); uvicorn's access log stays off, the app writes its own.
``featurestream serve`` hands it to uvicorn (``log_config``), so uvicorn's own
start-up, shutdown and error lines are JSON too; ``configure_logging`` applies
it in a process uvicorn did not configure, and routes Python warnings and
uncaught exceptions to the same lines.
"""

from __future__ import annotations

import contextvars
import json
import logging
import logging.config
import sys
import threading
import time
from types import TracebackType
from typing import Any

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "featurestream_request_id", default=None
)
access_log = logging.getLogger("featurestream.access")
_uncaught = logging.getLogger("featurestream.uncaught")

# Attributes every LogRecord has; anything else was passed with extra= and is kept,
# but for uvicorn's terminal-coloured copy of its message.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id, extras."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        rid = request_id_var.get()
        if rid is not None:
            out["request_id"] = rid
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str)


def logging_config(level: str = "info") -> dict[str, Any]:
    """A :func:`logging.config.dictConfig` configuration: JSON lines on stderr for every logger.

    featurestream's and uvicorn's loggers log at ``level``; other libraries'
    (through the root logger) at ``warning``, or ``level`` when higher.
    """
    upper = level.upper()
    others = max(logging.WARNING, logging.getLevelNamesMapping()[upper])
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"handlers": ["stderr"], "level": logging.getLevelName(others)},
        "loggers": {
            **{
                name: {"handlers": [], "level": upper, "propagate": True}
                for name in ("featurestream", "uvicorn", "uvicorn.error")
            },
            # The app writes the access lines (featurestream.access, with request ids).
            "uvicorn.access": {"handlers": [], "level": upper, "propagate": False},
        },
    }


def configure_logging(level: str = "info") -> None:
    """Apply :func:`logging_config` at ``level``.

    Python warnings become log lines too, and so do exceptions nothing caught
    (in the main thread or another), which Python would print as a bare traceback.
    """
    logging.config.dictConfig(logging_config(level))
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    _uncaught.critical("uncaught %s: %s", kind.__name__, exc, exc_info=(kind, exc, tb))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None or issubclass(args.exc_type, SystemExit):
        return
    name = args.thread.name if args.thread is not None else "?"
    _uncaught.critical(
        "uncaught %s in thread %s: %s",
        args.exc_type.__name__,
        name,
        args.exc_value,
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )


__all__ = [
    "JsonFormatter",
    "access_log",
    "configure_logging",
    "logging_config",
    "request_id_var",
]
