"""The table, the JSON and the plots of ``featurestream bench drift``.

One row per configuration (selector, parameters, target): the mean over seeds
and switches of the F1 some instances after a switch, the largest number of
instances until F1 >= 0.9 ("never" when a switch's segment ends first), the
stationary F1 (mean over seeds), the drift events of a configuration with a
detector (totals over seeds; "-" without one): on the stationary stream its
false alarms, on the switching streams its detections (over every switch
kind), and the cost per instance over every run of the configuration.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from featurestream.bench.drift_runs import RunResult

OFFSETS = (5_000, 10_000)


def _mean(values: Sequence[float | None]) -> float | None:
    """Mean of the values; None when any is None (a run that does not reach it)."""
    if not values or any(v is None for v in values):
        return None
    return float(sum(v for v in values if v is not None) / len(values))


def summarise(results: Sequence[RunResult]) -> list[dict[str, Any]]:
    """One summary per configuration, in the order the configurations first ran."""
    keys: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        keys.setdefault((r.target, r.label), []).append(r)
    rows = []
    for (target, label), runs in keys.items():
        moving = [r for r in runs if r.switches]
        still = [r for r in runs if not r.switches]
        recs = [rec for r in moving for rec in r.recoveries]
        delays = [rec.to_recovered for rec in recs]
        reached = [d for d in delays if d is not None]
        alarms = [r.drift_events for r in still if r.drift_events is not None]
        detections = [r.drift_events for r in moving if r.drift_events is not None]
        rows.append(
            {
                "target": target,
                "configuration": label,
                "switch": sorted({r.switch for r in moving}),
                "f1_after": {o: _mean([rec.at[o] for rec in recs]) for o in OFFSETS},
                "to_recovered": max(reached) if recs and len(reached) == len(delays) else None,
                "recovered_every_switch": bool(recs) and None not in delays,
                "stationary_f1": _mean([r.stationary_f1 for r in still]) if still else None,
                "false_alarms": sum(alarms) if alarms else None,
                "detections": sum(detections) if detections else None,
                "us_per_instance": 1e6
                * sum(r.seconds for r in runs)
                / max(1, sum(r.instances for r in runs)),
            }
        )
    return rows


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return (
        "-"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else fmt.format(value)
    )


def render(rows: Sequence[dict[str, Any]], header: str) -> str:
    """The markdown table of the summaries."""
    lines = [
        header,
        "",
        "| target | configuration | F1 +5,000 | F1 +10,000 | instances to F1 >= 0.9 "
        "| stationary F1 | false alarms | detections | us / instance |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        delay = row["to_recovered"]
        moved = bool(row["switch"])
        lines.append(
            f"| {row['target']} | {row['configuration']} "
            f"| {_num(row['f1_after'][5_000])} | {_num(row['f1_after'][10_000])} "
            f"| {(f'{delay:,}' if delay is not None else 'never') if moved else '-'} "
            f"| {_num(row['stationary_f1'])} | {_num(row['false_alarms'], '{:d}')} "
            f"| {_num(row['detections'], '{:d}')} "
            f"| {row['us_per_instance']:.1f} |"
        )
    return "\n".join(lines)


def to_json(
    results: Sequence[RunResult], rows: Sequence[dict[str, Any]], **meta: Any
) -> dict[str, Any]:
    """Everything: the options, the summaries and every run with its curves."""
    runs = []
    for r in results:
        item = asdict(r)
        item["us_per_instance"] = r.us_per_instance
        runs.append(item)
    return {**meta, "summary": list(rows), "runs": runs}


def plot(results: Sequence[RunResult], directory: Path) -> list[Path]:
    """F1 over time per target and switch kind, switches dashed; [] without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    directory.mkdir(parents=True, exist_ok=True)
    panels: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        panels.setdefault((r.target, r.switch), []).append(r)
    written = []
    for (target, switch), runs in panels.items():
        fig, ax = plt.subplots(figsize=(9, 4.2), constrained_layout=True)
        colours: dict[str, str] = {}
        for r in runs:
            colour = colours.setdefault(r.label, f"C{len(colours) % 10}")
            t = [p[0] for p in r.curve]
            v = [p[1] for p in r.curve]
            first = r.seed == min(q.seed for q in runs if q.label == r.label)
            ax.plot(t, v, color=colour, lw=1.2, label=r.label if first else None)
        for s in runs[0].switches:
            ax.axvline(s, color="grey", ls="--", lw=1)
        ax.axhline(0.9, color="grey", ls=":", lw=0.8)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("instances")
        ax.set_ylabel("selection F1 (groups)")
        ax.set_title(f"{target}, {switch}")
        ax.legend(fontsize=8, loc="lower right")
        path = directory / f"drift-{target}-{switch}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


__all__ = ["OFFSETS", "plot", "render", "summarise", "to_json"]
