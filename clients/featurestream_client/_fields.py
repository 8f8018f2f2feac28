"""Optional fields of the server's JSON answers, read as Python values (None stays None)."""

from __future__ import annotations

from typing import Any


def opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


__all__ = ["opt_float", "opt_int", "opt_str"]
