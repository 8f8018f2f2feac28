"""Structured JSON logs with request ids.

Every HTTP request gets an id (assigned by ``api/middleware.py``), kept in
a context variable for the duration of the request and added to every log
record emitted meanwhile, so one request's lines can be found together.
``configure_logging`` installs a JSON formatter (one object per line) on the
``featurestream`` logger.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from typing import Any

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "featurestream_request_id", default=None
)
access_log = logging.getLogger("featurestream.access")

# Attributes every LogRecord has; anything else was passed with extra= and is kept.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


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
        return json.dumps(out, default=str)


def configure_logging(level: str = "info") -> None:
    """Send featurestream's logs to stderr as JSON lines at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("featurestream")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


__all__ = ["JsonFormatter", "access_log", "configure_logging", "request_id_var"]
