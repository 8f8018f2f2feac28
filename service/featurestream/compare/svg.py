"""The comparison's plots as SVG, written by hand (no plotting library).

* ``cd.svg``: the critical-difference diagram of Demsar (2006). An axis of
  average ranks (1, the best, on the left); each method hangs from its
  average rank; a bar of length CD sits above the axis; a thick line joins
  each group of methods whose ranks differ by less than CD (no significant
  difference between them, Nemenyi).
* ``scores.svg``: one panel per data set, score against the number of
  selected features (logarithmic axis, 0 at its left end), one point per
  method with a bar of plus or minus one standard deviation.
"""

from __future__ import annotations

import math
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from featurestream.compare.results import ALL_FEATURES, DatasetResult, Ranking
from featurestream.compare.results import ComparisonData as Comparison

__all__ = ["cd_diagram", "score_panels", "write_plots"]

FONT = 'font-family="sans-serif" font-size="12"'
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _svg(width: float, height: float, body: list[str], title: str) -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" {FONT}>\n'
        f"<title>{escape(title)}</title>\n"
        f'<rect x="0" y="0" width="{width:.0f}" height="{height:.0f}" fill="white"/>\n'
        + "\n".join(body)
        + "\n</svg>\n"
    )


def _text(x: float, y: float, s: str, anchor: str = "start", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(s)}</text>'


def _line(
    x1: float, y1: float, x2: float, y2: float, width: float = 1.0, colour: str = "black"
) -> str:
    return (
        f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
        f'stroke={quoteattr(colour)} stroke-width="{width:g}"/>'
    )


def cd_diagram(r: Ranking, alpha: float) -> str:
    """The critical-difference diagram of a ranking, as an SVG document."""
    k = len(r.methods)
    ranks = r.friedman.average_ranks
    cd = r.nemenyi.critical_difference
    label_w = 8.0 * max(len(m) for m in r.methods) + 70
    axis_w = 60.0 * max(k - 1, 1) + 120
    width = 2 * label_w + axis_w
    left, right = label_w, label_w + axis_w
    top = 70.0
    step = 22.0
    half = math.ceil(k / 2)
    n_groups = len(r.groups)
    height = top + 40 + step * (half + 1) + 8 * n_groups + 30

    def x(rank: float) -> float:
        return left + (rank - 1) / max(k - 1, 1) * axis_w

    body = [
        _text(
            width / 2,
            18,
            f"Critical difference diagram: {k} methods, {len(r.datasets)} data sets "
            f"(Nemenyi, alpha {alpha:g})",
            "middle",
            ' font-weight="bold"',
        ),
        # The CD bar, from rank 1.
        _line(x(1), 38, x(1 + cd), 38, 2),
        _line(x(1), 33, x(1), 43),
        _line(x(1 + cd), 33, x(1 + cd), 43),
        _text((x(1) + x(1 + cd)) / 2, 30, f"CD = {cd:.2f}", "middle"),
        _line(left, top, right, top, 1.5),
    ]
    for i in range(1, k + 1):
        body.append(_line(x(i), top - 6, x(i), top))
        body.append(_text(x(i), top - 9, str(i), "middle"))
    order = sorted(range(k), key=lambda i: (ranks[i], i))
    # The better half hangs to the left, the other half to the right, as Demsar draws it.
    groups_y = top + 14
    for g, members in enumerate(r.groups):
        lo, hi = ranks[members[0]], ranks[members[-1]]
        y = groups_y + 8 * g
        body.append(
            f'<line x1="{x(lo) - 3:.1f}" y1="{y:.1f}" x2="{x(hi) + 3:.1f}" y2="{y:.1f}" '
            f'stroke="black" stroke-width="4" stroke-linecap="round"><title>'
            f"{escape(', '.join(r.methods[i] for i in members))}: no significant difference"
            "</title></line>"
        )
    base = groups_y + 8 * n_groups + 14
    for pos, i in enumerate(order):
        name = f"{r.methods[i]} ({ranks[i]:.2f})"
        if pos < half:
            y = base + step * pos
            body.append(
                f'<polyline points="{x(ranks[i]):.1f},{top:.1f} {x(ranks[i]):.1f},{y:.1f} '
                f'{left - 10:.1f},{y:.1f}" fill="none" stroke="black"/>'
            )
            body.append(_text(left - 14, y + 4, name, "end"))
        else:
            y = base + step * (k - 1 - pos)
            body.append(
                f'<polyline points="{x(ranks[i]):.1f},{top:.1f} {x(ranks[i]):.1f},{y:.1f} '
                f'{right + 10:.1f},{y:.1f}" fill="none" stroke="black"/>'
            )
            body.append(_text(right + 14, y + 4, name))
    title = f"Critical difference diagram of {', '.join(r.methods)}"
    return _svg(width, height, body, title)


def _panel(
    ds: DatasetResult, x0: float, y0: float, w: float, h: float, colours: dict[str, str]
) -> list[str]:
    live = [m for m in ds.methods if m.applicable]
    top_n = max([ds.n_features, *(m.n_features for m in live)])
    xmax = math.log10(top_n + 1) * 1.08 or 1.0
    lows = [m.score_mean - m.score_std for m in live]
    highs = [m.score_mean + m.score_std for m in live]
    ylo, yhi = min(lows), max(highs)
    pad = max((yhi - ylo) * 0.1, 0.01)
    ylo, yhi = ylo - pad, yhi + pad
    if ds.score_name == "accuracy":
        ylo, yhi = max(ylo, 0.0), min(yhi, 1.0)

    def px(n: float) -> float:
        return x0 + math.log10(n + 1) / xmax * w

    def py(v: float) -> float:
        return y0 + h - (min(max(v, ylo), yhi) - ylo) / (yhi - ylo) * h

    body = [
        f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{w:.1f}" height="{h:.1f}" '
        'fill="none" stroke="#999"/>',
        _text(x0 + w / 2, y0 - 8, f"{ds.name} ({ds.description})", "middle", ' font-weight="bold"'),
        _text(x0 + w / 2, y0 + h + 32, "selected features (log scale)", "middle"),
        f'<text x="{x0 - 42:.1f}" y="{y0 + h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 {x0 - 42:.1f} {y0 + h / 2:.1f})">{escape(ds.score_name)}</text>',
    ]
    ticks = [n for n in (0, 1, 3, 10, 30, 100, 300, 1000, 3000, 10000) if n <= top_n]
    # The width of the data set (all features) too, unless a tick stands close to it.
    if all(abs(px(n) - px(ds.n_features)) > 24 for n in ticks):
        ticks.append(ds.n_features)
    for n in ticks:
        body.append(_line(px(n), y0 + h, px(n), y0 + h + 4))
        body.append(_text(px(n), y0 + h + 16, str(n), "middle"))
    for i in range(5):
        v = ylo + (yhi - ylo) * i / 4
        body.append(_line(x0 - 4, py(v), x0, py(v)))
        body.append(_text(x0 - 6, py(v) + 4, f"{v:.3f}", "end"))
    # Methods at the same number of features stand side by side instead of on top of each other.
    dodge: dict[float, list[str]] = {}
    for m in live:
        dodge.setdefault(round(px(m.n_features)), []).append(m.name)
    for m in live:
        c = colours[m.name]
        same = dodge[round(px(m.n_features))]
        shift = 8.0 * (same.index(m.name) - (len(same) - 1) / 2)
        cx, cy = px(m.n_features) + shift, py(m.score_mean)
        body.append(
            _line(cx, py(m.score_mean - m.score_std), cx, py(m.score_mean + m.score_std), 1.5, c)
        )
        shape = (
            f'<rect x="{cx - 5:.1f}" y="{cy - 5:.1f}" width="10" height="10" fill={quoteattr(c)}>'
            if m.name == ALL_FEATURES
            else f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill={quoteattr(c)}>'
        )
        end = "</rect>" if m.name == ALL_FEATURES else "</circle>"
        body.append(
            f"{shape}<title>{escape(m.name)}: {m.score_mean:.3f} +- {m.score_std:.3f}, "
            f"{m.n_features:g} features</title>{end}"
        )
    return body


def score_panels(c: Comparison) -> str:
    """Score against the number of selected features, one panel per data set."""
    names: list[str] = []
    for ds in c.datasets:
        names += [m.name for m in ds.methods if m.name not in names]
    colours = {n: COLOURS[i % len(COLOURS)] for i, n in enumerate(names)}
    cols = min(2, len(c.datasets))
    rows = math.ceil(len(c.datasets) / cols)
    pw, ph = 360.0, 220.0
    cell_w, cell_h = pw + 110, ph + 80
    legend_h = 20.0 * math.ceil(len(names) / 4) + 20
    width = cols * cell_w + 20
    height = rows * cell_h + legend_h + 20
    body: list[str] = []
    for i, ds in enumerate(c.datasets):
        x0 = 20 + (i % cols) * cell_w + 70
        y0 = 40 + (i // cols) * cell_h
        body += _panel(ds, x0, y0, pw, ph, colours)
    ly = rows * cell_h + 30
    for i, n in enumerate(names):
        lx = 30 + (i % 4) * (width - 40) / 4
        y = ly + 20 * (i // 4)
        if n == ALL_FEATURES:
            body.append(
                f'<rect x="{lx - 5:.1f}" y="{y - 9:.1f}" width="10" height="10" '
                f"fill={quoteattr(colours[n])}/>"
            )
        else:
            body.append(
                f'<circle cx="{lx:.1f}" cy="{y - 4:.1f}" r="5" fill={quoteattr(colours[n])}/>'
            )
        body.append(_text(lx + 10, y, n))
    title = f"Score ({c.model}, 5x2cv) against selected features"
    return _svg(width, height, body, title)


def write_plots(c: Comparison, directory: str) -> list[str]:
    """Write ``scores.svg`` and, when there is a ranking, ``cd.svg``; their paths."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    path = out / "scores.svg"
    path.write_text(score_panels(c), encoding="utf-8")
    written.append(str(path))
    if c.ranking is not None:
        path = out / "cd.svg"
        path.write_text(cd_diagram(c.ranking, c.alpha), encoding="utf-8")
        written.append(str(path))
    return written
