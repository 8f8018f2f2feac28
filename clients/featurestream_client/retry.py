"""How the client retries: attempts, exponential backoff, which failures."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from featurestream_client.errors import ConcurrentUpdate, ConnectionFailed, FeatureStreamError


@dataclass(frozen=True)
class RetryPolicy:
    """When and how often a request is sent again.

    Every request the client sends may be retried safely: writes carry the
    producer's ``seq``, so a retry of a write the server already applied is
    answered from its stored response instead of being applied twice.

    Parameters
    ----------
    attempts : int
        Total tries per request (1 = never retry).
    backoff : float
        Seconds before the first retry; doubles on each further retry, with
        jitter, up to ``max_backoff``.
    max_backoff : float
        Cap of the computed wait.
    statuses : frozenset of int
        HTTP statuses retried (503 honours its ``Retry-After`` header).
    concurrent_update : bool
        Retry ``409 concurrent-update`` (another writer kept winning).
    connection_errors : bool
        Retry timeouts and connection failures.
    max_retry_after : float
        Cap of a server-given ``Retry-After``.
    """

    attempts: int = 5
    backoff: float = 0.1
    max_backoff: float = 5.0
    statuses: frozenset[int] = field(default_factory=lambda: frozenset({502, 503, 504}))
    concurrent_update: bool = True
    connection_errors: bool = True
    max_retry_after: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be >= 1; got {self.attempts}.")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ValueError("backoff and max_backoff must be >= 0.")

    @classmethod
    def never(cls) -> RetryPolicy:
        """Send each request once."""
        return cls(attempts=1)

    def should_retry(self, error: FeatureStreamError, attempt: int) -> bool:
        """Whether to try again after ``error`` on try number ``attempt`` (from 1)."""
        if attempt >= self.attempts:
            return False
        if isinstance(error, ConnectionFailed):
            return self.connection_errors
        if isinstance(error, ConcurrentUpdate):
            return self.concurrent_update
        return error.status is not None and error.status in self.statuses

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after try number ``attempt`` failed."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_retry_after)
        base = min(self.max_backoff, self.backoff * 2.0 ** (attempt - 1))
        return float(base * (0.5 + random.random() / 2))


def retry_after_seconds(value: str | None) -> float | None:
    """The seconds of a ``Retry-After`` header (delta form; HTTP dates are ignored)."""
    if value is None:
        return None
    try:
        return max(0.0, float(value.strip()))
    except ValueError:
        return None


__all__ = ["RetryPolicy", "retry_after_seconds"]
