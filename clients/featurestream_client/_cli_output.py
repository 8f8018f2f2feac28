"""How the client commands print: tables, selections, a progress bar, JSON.

Human output is plain text tables (``-`` for a missing value); ``--json``
output is indented JSON without NaN.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from typing import Any, TextIO

from featurestream_client.models import Algorithm, Selection, StreamInfo


class Progress:
    """A plain-text progress bar on stderr (no dependency)."""

    def __init__(self, total: int, unit: str, stream: TextIO, enabled: bool) -> None:
        self.total = max(total, 1)
        self.unit = unit
        self.stream = stream
        self.enabled = enabled
        self._shown = False
        self._started = time.monotonic()

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        frac = min(1.0, done / self.total)
        bar = "#" * int(30 * frac)
        rate = done / max(time.monotonic() - self._started, 1e-9)
        self.stream.write(
            f"\rreplay {int(100 * frac):3d}% [{bar:<30}] {done}/{self.total} {self.unit} "
            f"({rate:,.0f}/s)"
        )
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[format_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def format_cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def selection_json(selection: Selection) -> list[dict[str, Any]]:
    return [{"name": f.name, "score": f.score, "group": f.group} for f in selection.features]


def _score_header(algorithm: Algorithm | None, params: dict[str, Any] | None) -> str:
    """The score column's title: what the score means and which end is best."""
    kind = None if algorithm is None else algorithm.score_kind_for(params)
    if algorithm is None or kind is None:
        return "score"
    if algorithm.score_by_magnitude:
        return f"score ({kind}, largest |score| first)"
    return f"score ({kind}, {'highest' if algorithm.higher_is_better else 'lowest'} first)"


def selection_table(
    selection: Selection, algorithm: Algorithm | None = None, params: dict[str, Any] | None = None
) -> str:
    """The selection, best score first (as the algorithm ranks its scores), numbered."""
    features = list(selection.features) if algorithm is None else algorithm.rank(selection.features)
    groups = any(f.group is not None for f in features)
    headers = ["#", "name", _score_header(algorithm, params)] + (["group"] if groups else [])
    rows = [
        [i, f.name, f.score] + ([f.group] if groups else [])
        for i, f in enumerate(features, start=1)
    ]
    return format_table(headers, rows)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, allow_nan=False))


def stream_size(s: StreamInfo) -> str:
    """What a stream holds, with its unit: the rows of a feature stream's columns, or the
    features of an instance stream's rows."""
    if s.kind == "features":
        return "-" if s.n_instances is None else f"{s.n_instances} rows"
    return "-" if s.n_features is None else f"{s.n_features} features"
