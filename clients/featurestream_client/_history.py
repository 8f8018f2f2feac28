"""A stream's past and its judgement: history, stability, evaluation (flows and records).

The flows are written once for both clients (see ``_steps.py``). ``History``
is a list of :class:`Change` records; ``History.to_frame()`` turns it into a
pandas DataFrame when pandas is installed (it is imported only then).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from featurestream_client._core import Call, stream_path
from featurestream_client._steps import Flow
from featurestream_client.models import Selection

#: Changes asked for per page by ``history()`` (the server's most).
HISTORY_PAGE = 1000


@dataclass(frozen=True)
class Change:
    """One change of the selected set: what version ``version`` added and removed."""

    version: int
    at: str | None  # commit time (RFC 3339 UTC)
    added: tuple[str, ...]
    removed: tuple[str, ...]
    size: int  # features selected after the change
    # The drifts the stream's drift watch detected in this version (``detector``,
    # ``instances_seen``, ``statistic``, ``moved``, ``reset``); a version with a
    # drift is a change even when nothing was added or removed.
    drifts: tuple[dict[str, Any], ...] = ()

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Change:
        at = d.get("at")
        return cls(
            version=int(d["version"]),
            at=None if at is None else str(at),
            added=tuple(str(n) for n in d.get("added") or ()),
            removed=tuple(str(n) for n in d.get("removed") or ()),
            size=int(d["size"]),
            drifts=tuple(dict(x) for x in d.get("drifts") or ()),
        )


class History(list[Change]):
    """The changes of a stream's selection, oldest first.

    ``version`` is the stream's version when read; ``next`` the ``after_version``
    that reads on (None once the history reached ``version``).
    """

    def __init__(self, changes: Any = (), *, version: int = 0, next: int | None = None) -> None:
        super().__init__(changes)
        self.version = version
        self.next = next

    def to_frame(self) -> Any:
        """A pandas DataFrame, one row per change: version, at (UTC timestamps), added,
        removed, size, drifts (how many were detected). Needs pandas."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("History.to_frame() needs pandas: pip install pandas") from exc
        frame = pd.DataFrame(
            {
                "version": [c.version for c in self],
                "at": pd.to_datetime([c.at for c in self], utc=True, format="ISO8601"),
                "added": [list(c.added) for c in self],
                "removed": [list(c.removed) for c in self],
                "size": [c.size for c in self],
                "drifts": [len(c.drifts) for c in self],
            }
        )
        return frame


@dataclass(frozen=True)
class Stability:
    """Stability of the selections after the last changes of a stream (oldest first)."""

    versions: tuple[int, ...]
    sizes: tuple[int, ...]
    jaccard: tuple[float, ...]  # each selection with the next
    nogueira: float | None  # None with fewer than two selections
    features: int  # the features the stream had seen (Nogueira's d)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Stability:
        value = d.get("nogueira")
        return cls(
            versions=tuple(int(v) for v in d.get("versions") or ()),
            sizes=tuple(int(v) for v in d.get("sizes") or ()),
            jaccard=tuple(float(v) for v in d.get("jaccard") or ()),
            nogueira=None if value is None else float(value),
            features=int(d.get("features", 0)),
            raw=dict(d),
        )


@dataclass(frozen=True)
class Evaluation:
    """How good a stream's selection is (``GET /evaluation``).

    ``kind`` is ``"cross_validation"`` (feature streams: ``score`` is the mean of
    ``fold_scores``, ``best_single`` the best single selected feature as
    ``{"name", "score", "fold_scores"}``) or ``"prequential"`` (supervised instance
    streams: ``score`` is the accuracy over every instance predicted, ``recent``
    over the last ones, ``{"window", "instances", "accuracy"}``).
    """

    version: int
    kind: str
    score_kind: str
    score: float | None
    fold_scores: tuple[float, ...] = ()
    features: int | None = None
    best_single: dict[str, Any] | None = None
    recent: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Evaluation:
        kind = str(d["kind"])
        score = d.get("score") if kind == "cross_validation" else d.get("accuracy")
        features = d.get("features")
        return cls(
            version=int(d["version"]),
            kind=kind,
            score_kind=str(d.get("score_kind", "")),
            score=None if score is None else float(score),
            fold_scores=tuple(float(v) for v in d.get("fold_scores") or ()),
            features=None if features is None else int(features),
            best_single=d.get("best_single"),
            recent=d.get("recent"),
            raw=dict(d),
        )


def selected_at_op(stream_id: str, version: int) -> Flow[Selection]:
    reply = yield Call("GET", stream_path(stream_id, "/selected"), params={"version": version})
    return Selection.from_json(reply.json())


def history_op(stream_id: str, after_version: int | None, limit: int | None) -> Flow[History]:
    """Every change after ``after_version`` (at most ``limit``), page by page."""
    out: list[Change] = []
    after = after_version
    version = 0
    while True:
        want = HISTORY_PAGE if limit is None else min(HISTORY_PAGE, limit - len(out))
        params: dict[str, Any] = {"limit": want}
        if after is not None:
            params["after_version"] = after
        reply = yield Call("GET", stream_path(stream_id, "/history"), params=params)
        page = reply.json()
        out.extend(Change.from_json(c) for c in page.get("changes") or ())
        version = int(page.get("version", 0))
        nxt = page.get("next")
        if nxt is None or (limit is not None and len(out) >= limit):
            return History(out, version=version, next=None if nxt is None else int(nxt))
        after = int(nxt)


def stability_op(stream_id: str, last: int) -> Flow[Stability]:
    reply = yield Call("GET", stream_path(stream_id, "/stability"), params={"last": last})
    return Stability.from_json(reply.json())


def evaluation_op(stream_id: str, model: str, folds: int, repeats: int) -> Flow[Evaluation]:
    params = {"model": model, "folds": folds, "repeats": repeats}
    reply = yield Call("GET", stream_path(stream_id, "/evaluation"), params=params)
    return Evaluation.from_json(reply.json())


__all__ = [
    "HISTORY_PAGE",
    "Change",
    "Evaluation",
    "History",
    "Stability",
    "evaluation_op",
    "history_op",
    "selected_at_op",
    "stability_op",
]
