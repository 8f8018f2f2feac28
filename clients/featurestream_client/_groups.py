"""Whole groups of feature columns (group-SAOLA): reading them, and their requests.

A group is never split across requests: it is decided as a whole. Groups
travel as JSON columns to ``/groups`` (the one body type that route takes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from featurestream_client._data import (
    JSON_NUMBER_BYTES,
    Body,
    Columns,
    as_columns,
    dumps,
    feature_json,
)
from featurestream_client.errors import InvalidInput


@dataclass
class Group:
    name: str
    cols: Columns

    @property
    def names(self) -> list[str]:
        assert self.cols.names is not None
        return self.cols.names


def as_groups(groups: Any) -> list[Group]:
    """``{"g1": data, ...}`` or ``[("g1", data), ...]`` as named, checked groups.

    ``data`` is anything :func:`as_columns` reads, or a pair ``(data, names)``.
    Columns of an array without names are called ``<group>:<i>``.
    """
    items = list(groups.items()) if hasattr(groups, "items") else list(groups)
    out: list[Group] = []
    seen: set[str] = set()
    for item in items:
        try:
            gname, data = item
        except (TypeError, ValueError):
            raise InvalidInput(
                "Groups are a mapping {name: data} or a list of (name, data) pairs."
            ) from None
        gname = str(gname)
        if gname in seen:
            raise InvalidInput(f"Group {gname!r} appears twice.")
        seen.add(gname)
        names = None
        if isinstance(data, tuple) and len(data) == 2 and isinstance(data[1], (list, tuple)):
            data, names = data
        cols = as_columns(data, names)
        if cols.names is None:
            cols.names = [f"{gname}:{i}" for i in range(cols.n_cols)]
        if cols.n_cols == 0:
            raise InvalidInput(f"Group {gname!r} has no columns.")
        out.append(Group(gname, cols))
    names = [n for g in out for n in g.names]
    if len(set(names)) != len(names):
        dup = next(n for i, n in enumerate(names) if n in names[:i])
        raise InvalidInput(f"Feature name {dup!r} appears in two groups.")
    rows = {g.cols.n_rows for g in out}
    if len(rows) > 1:
        raise InvalidInput(f"Groups have different numbers of rows: {sorted(rows)}.")
    return out


def group_bytes(group: Group) -> int:
    cols = group.cols
    if cols.dense is not None:
        return cols.n_cols * (48 + JSON_NUMBER_BYTES * cols.n_rows)
    return sum(cols.json_bytes(j) for j in range(cols.n_cols))


def plan_groups(groups: Sequence[Group], max_columns: int, max_bytes: int) -> list[list[Group]]:
    """Whole groups per request (a group is never split: it is decided as a whole)."""
    out: list[list[Group]] = []
    current: list[Group] = []
    columns = size = 0
    for g in groups:
        b = group_bytes(g)
        if current and (columns + g.cols.n_cols > max_columns or size + b > max_bytes):
            out.append(current)
            current, columns, size = [], 0, 0
        current.append(g)
        columns += g.cols.n_cols
        size += b
    if current:
        out.append(current)
    return out


def split_groups(groups: list[Group], completed: int) -> list[list[Group]]:
    """Groups the server found over its time budget, cut into requests of whole groups.

    Each request holds at most ``completed`` columns (what the server got through
    within the budget) and half of them, yet at least one group; one group
    cannot be cut (it is decided as a whole).
    """
    if len(groups) <= 1:
        return []
    total = sum(g.cols.n_cols for g in groups)
    limit = max(1, min(completed, (total + 1) // 2))
    out: list[list[Group]] = []
    current: list[Group] = []
    columns = 0
    for g in groups:
        if current and columns + g.cols.n_cols > limit:
            out.append(current)
            current, columns = [], 0
        current.append(g)
        columns += g.cols.n_cols
    out.append(current)
    return out


def groups_body(groups: Sequence[Group], producer: str, seq: int) -> Body:
    body = {
        "producer": producer,
        "seq": seq,
        "groups": [
            {
                "name": g.name,
                "features": [feature_json(g.cols, j, n) for j, n in enumerate(g.names)],
            }
            for g in groups
        ],
    }
    return Body(dumps(body), {"Content-Type": "application/json"})


__all__ = ["Group", "as_groups", "group_bytes", "groups_body", "plan_groups", "split_groups"]
