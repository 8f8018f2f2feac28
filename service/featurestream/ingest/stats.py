"""Counters of one consumer: what it applied, replayed, dead-lettered, claimed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from featurestream.ingest.applier import Applied, Outcome


@dataclass
class ConsumerStats:
    """Messages settled by one consumer since it started.

    >>> s = ConsumerStats()
    >>> s.count([Applied(), Applied(replayed=True)])
    >>> s.applied, s.replayed, s.dead
    (1, 1, 0)
    """

    applied: int = 0  # applied by this consumer
    replayed: int = 0  # delivered again, found applied already
    dead: int = 0  # refused: sent to the dead letters
    claimed: int = 0  # entries taken over from consumers that left them pending
    pauses: int = 0  # rounds that found the store (or the log) not answering

    def count(self, outcomes: Iterable[Outcome]) -> None:
        for o in outcomes:
            if not isinstance(o, Applied):
                self.dead += 1
            elif o.replayed:
                self.replayed += 1
            else:
                self.applied += 1

    def document(self) -> dict[str, int]:
        return asdict(self)


__all__ = ["ConsumerStats"]
