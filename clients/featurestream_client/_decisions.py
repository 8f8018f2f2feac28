"""The decisions of a features write: one per column sent, read lazily.

A large answer's decisions stay its JSON text until first read
(:data:`UNREAD_DECISIONS`), so that an upload of a million columns does not
keep millions of small objects alive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, overload

from featurestream_client._fields import opt_float, opt_str


@dataclass(frozen=True)
class Decision:
    """What the selector decided about one arriving feature."""

    name: str
    accepted: bool
    evicted: tuple[str, ...] = ()
    reason: str | None = None
    score: float | None = None
    by: str | None = None
    group: str | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Decision:
        return cls(
            name=str(d["name"]),
            accepted=bool(d["accepted"]),
            evicted=tuple(str(e) for e in d.get("evicted") or ()),
            reason=opt_str(d.get("reason")),
            score=opt_float(d.get("score")),
            by=opt_str(d.get("by")),
            group=opt_str(d.get("group")),
        )


class _Unread:
    """The decisions of one answer, kept as the answer's JSON until they are first read.

    An answer of 20,000 columns parses into some 100,000 objects. Kept alive
    for the length of an upload of a million columns, they are walked again
    and again by the cyclic garbage collector (half a second on a news20-sized
    upload), and take several times the memory of the text they came from.
    """

    __slots__ = ("content", "count", "parse")

    def __init__(self, content: bytes, count: int, parse: Callable[[bytes], Any]) -> None:
        # ``parse``: a module-level function, so that a result still pickles.
        self.content = content
        self.count = count
        self.parse = parse

    def items(self) -> list[Any]:
        # The same bytes parse to the same ``count`` decisions as on arrival.
        return list(self.parse(self.content).get("decisions") or ())


_Segment = list[Any] | _Unread

#: Answers with at least this many decisions keep them as text until read.
UNREAD_DECISIONS = 1000


class Decisions(Sequence[Decision]):
    """The decisions of a features write, in the order sent: a read-only sequence.

    A large upload brings one decision per column (100,000 for a dorothea-sized
    matrix), most of them never looked at one by one: the decisions of a large
    answer stay its JSON text until the sequence is first read (its length
    aside), and each :class:`Decision` is built from the server's JSON when it
    is first read. It compares equal to any sequence of the same decisions (a
    tuple, a list).
    """

    __slots__ = ("_built", "_count", "_items_read", "_unread")

    def __init__(self, raw: Sequence[Any] = ()) -> None:
        # Items are the server's JSON objects, or Decisions already built; those
        # built on reading are kept by position (none at first: no step per item).
        self._items_read: list[Any] = list(raw)
        self._built: dict[int, Decision] = {}
        # Segments not read yet (None once read), and how many items they hold.
        self._unread: list[_Segment] | None = None
        self._count = len(self._items_read)

    @classmethod
    def unread(cls, content: bytes, count: int, parse: Callable[[bytes], Any]) -> Decisions:
        """The ``count`` decisions of the answer ``content``, parsed when first read."""
        return cls._joined([_Unread(content, count, parse)])

    @classmethod
    def _joined(cls, segments: Iterable[_Segment]) -> Decisions:
        parts = [s for s in segments if isinstance(s, _Unread) or s]
        if not any(isinstance(s, _Unread) for s in parts):
            return cls(list(chain.from_iterable(s for s in parts if not isinstance(s, _Unread))))
        new = cls()
        new._unread = parts
        new._count = sum(s.count if isinstance(s, _Unread) else len(s) for s in parts)
        return new

    @property
    def _raw(self) -> list[Any]:
        segments = self._unread
        if segments is not None:
            self._items_read = list(
                chain.from_iterable(s.items() if isinstance(s, _Unread) else s for s in segments)
            )
            self._unread = None
        return self._items_read

    def _segments(self) -> list[_Segment]:
        """The items as segments, for building another sequence: do not change them."""
        if self._unread is not None:
            return self._unread
        return [self._items()]

    def _at(self, i: int) -> Decision:
        d = self._built.get(i)
        if d is None:
            x = self._raw[i]
            d = self._built[i] = x if isinstance(x, Decision) else Decision.from_json(x)
        return d

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> Decision: ...

    @overload
    def __getitem__(self, i: slice) -> Decisions: ...

    def __getitem__(self, i: int | slice) -> Decision | Decisions:
        if isinstance(i, slice):
            return Decisions([self._at(k) for k in range(*i.indices(self._count))])
        return self._at(range(self._count)[i])

    def __iter__(self) -> Iterator[Decision]:
        for i in range(self._count):
            yield self._at(i)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: Sequence[Decision]) -> Decisions:
        return Decisions._joined([*self._segments(), *segments_of(other)])

    def __radd__(self, other: Sequence[Decision]) -> Decisions:
        return Decisions._joined([*segments_of(other), *self._segments()])

    def _items(self) -> list[Any]:
        """The items (JSON objects or Decisions), for building another sequence: do not change."""
        raw = self._raw
        if not self._built:
            return raw
        built = self._built
        return [built.get(i, r) for i, r in enumerate(raw)]

    def names(self, accepted: bool | None = None) -> list[str]:
        """The features' names (only the accepted, or only the rejected ones, if asked)."""
        out = []
        for r in self._raw:
            if isinstance(r, Decision):
                name, ok = r.name, r.accepted
            else:
                name, ok = str(r["name"]), bool(r["accepted"])
            if accepted is None or ok == accepted:
                out.append(name)
        return out

    def __repr__(self) -> str:
        return f"Decisions({len(self)} decisions)"


def segments_of(seq: Sequence[Decision]) -> list[_Segment]:
    return seq._segments() if isinstance(seq, Decisions) else [list(seq)]


__all__ = ["UNREAD_DECISIONS", "Decision", "Decisions", "segments_of"]
