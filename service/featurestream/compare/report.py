"""A comparison as text (the table ``featurestream compare`` prints) and as JSON."""

from __future__ import annotations

import math
from typing import Any

from featurestream.compare.results import ComparisonData as Comparison
from featurestream.compare.results import DatasetResult, MethodResult

__all__ = ["render_table", "to_dict"]


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _stat(v: float) -> str:
    return ("+inf" if v > 0 else "-inf") if math.isinf(v) else f"{v:.2f}"


def _method_line(m: MethodResult, width: int) -> str:
    if not m.applicable:
        return f"  {m.name:<{width}}  not applicable: {m.reason}"
    lo, hi = m.n_features_range
    size = f"{m.n_features:g}" if lo == hi else f"{m.n_features:.1f} ({lo}-{hi})"
    seconds = "-" if m.seconds is None else f"{m.seconds:.2f}"
    stability = "-" if m.stability is None else f"{m.stability:.2f}"
    return (
        f"  {m.name:<{width}}  {m.score_mean:6.3f}  {m.score_std:6.3f}  {size:>12}  "
        f"{seconds:>7}  {stability:>9}"
    )


def _dataset(ds: DatasetResult, alpha: float) -> list[str]:
    width = max(len(m.name) for m in ds.methods)
    lines = [
        f"{ds.name}: {ds.description} ({ds.source})",
        f"  {'method':<{width}}  {'score':>6}  {'sd':>6}  {'features':>12}  "
        f"{'time s':>7}  {'stability':>9}",
    ]
    lines += [_method_line(m, width) for m in ds.methods]
    for m in ds.methods:
        lines += [f"  note: {m.name} {n}" for n in m.notes]
    if ds.planted:
        planted = set(ds.planted)
        found = ", ".join(
            f"{m.name} {sum(len(planted & set(r.selected)) for r in m.runs) / len(m.runs):.1f}"
            for m in ds.methods
            if m.applicable and m.runs
        )
        lines.append(f"  planted columns selected (of {len(planted)}, mean over orders): {found}")
    if ds.pairs:
        pw = max(max(len(p.a), len(p.b)) for p in ds.pairs)
        lines.append(
            f"  5x2cv tests, A - B ({ds.score_name}); t: Dietterich's paired t, "
            f"F: Alpaydin's combined F; verdict at alpha {alpha:g} from F"
        )
        lines.append(
            f"    {'A':<{pw}}  {'B':<{pw}}  {'A - B':>7}  {'t':>6}  {'p(t)':>6}  "
            f"{'F':>7}  {'p(F)':>6}  verdict"
        )
        for p in ds.pairs:
            verdict = {"a": f"{p.a} better", "b": f"{p.b} better", "=": "no difference shown"}
            lines.append(
                f"    {p.a:<{pw}}  {p.b:<{pw}}  {p.difference:+7.3f}  {_stat(p.t.statistic):>6}  "
                f"{_p(p.t.p_value):>6}  {_stat(p.f.statistic):>7}  {_p(p.f.p_value):>6}  "
                f"{verdict[p.verdict]}"
            )
    return lines


def render_table(c: Comparison) -> str:
    """The human-readable report: per data set, then the ranking over data sets."""
    orders = "the data set's column order" + (
        f" and {c.shuffles} shuffled order(s)" if c.shuffles else ""
    )
    budget = "no budget" if c.budget is None else f"budget {c.budget:g} s per stream"
    lines = [
        f"featurestream compare: {', '.join(c.algorithms)}; model {c.model}; 5x2cv folds "
        f"(seed {c.seed}); {orders}; {budget}",
        "score: mean over the 10 folds (and orders); sd: their sample standard deviation; "
        "features: selected count (mean, range over orders); time: replay seconds; "
        "stability: Nogueira's Phi over the orders' selections",
        "",
    ]
    for ds in c.datasets:
        lines += [*_dataset(ds, c.alpha), ""]
    r = c.ranking
    if r is None:
        lines.append(f"Across data sets: no ranking ({c.ranking_note}).")
    else:
        fr, ne = r.friedman, r.nemenyi
        lines.append(
            f"Across {fr.n_datasets} data sets, {fr.n_methods} methods (rank 1 = best score):"
        )
        width = max(len(n) for n in r.methods)
        for rank, name in sorted(zip(fr.average_ranks, r.methods, strict=True)):
            lines.append(f"  {name:<{width}}  average rank {rank:.2f}")
        lines.append(
            f"  Friedman chi2_F = {fr.chi2:.3f} "
            f"(df {fr.n_methods - 1}, p = {_p(fr.chi2_p_value)}); "
            f"Iman-Davenport F_F = {_stat(fr.f)} (df {fr.n_methods - 1}, "
            f"{(fr.n_methods - 1) * (fr.n_datasets - 1)}, p = {_p(fr.f_p_value)})"
        )
        lines.append(
            f"  Nemenyi critical difference at alpha {c.alpha:g}: "
            f"CD = {ne.critical_difference:.3f} "
            f"(q = {ne.q_alpha:.3f})"
        )
        if ne.different:
            pairs = "; ".join(f"{r.methods[i]} vs {r.methods[j]}" for i, j in ne.different)
            lines.append(f"  pairs whose average ranks differ by at least CD: {pairs}")
        else:
            lines.append(
                "  no two average ranks differ by CD or more: no pair differs significantly"
            )
    for name, why in c.excluded.items():
        lines.append(f"  left out of the ranking: {name} ({why})")
    lines.append(f"Server: {c.server}; total {c.seconds:.1f} s.")
    return "\n".join(lines) + "\n"


def _num(v: float | None) -> float | str | None:
    """JSON has no infinities: "inf" / "-inf" as strings, NaN as null."""
    if v is None or math.isnan(v):
        return None
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _method(m: MethodResult) -> dict[str, Any]:
    if not m.applicable:
        return {"name": m.name, "applicable": False, "reason": m.reason}
    return {
        "name": m.name,
        "applicable": True,
        "score_mean": m.score_mean,
        "score_std": m.score_std,
        "fold_scores": [list(r) for r in m.fold_scores],
        "n_features": m.n_features,
        "n_features_range": list(m.n_features_range),
        "seconds": m.seconds,
        "stability": m.stability,
        "notes": list(m.notes),
        "runs": [
            {
                "order": r.order,
                "selected": list(r.selected),
                "seconds": r.seconds,
                "columns_seen": r.columns_seen,
                "stopped": r.stopped,
                "score": r.score,
                "fold_scores": [list(s) for s in r.scores],
            }
            for r in m.runs
        ],
    }


def to_dict(c: Comparison) -> dict[str, Any]:
    """Everything of ``c`` as JSON-ready values (infinities as strings)."""
    out: dict[str, Any] = {
        "algorithms": list(c.algorithms),
        "model": c.model,
        "shuffles": c.shuffles,
        "seed": c.seed,
        "alpha": c.alpha,
        "budget": c.budget,
        "design": "5x2cv",
        "server": c.server,
        "seconds": c.seconds,
        "datasets": [
            {
                "name": ds.name,
                "description": ds.description,
                "source": ds.source,
                "task": ds.task,
                "score": ds.score_name,
                "n_instances": ds.n_instances,
                "n_features": ds.n_features,
                "planted": list(ds.planted),
                "methods": [_method(m) for m in ds.methods],
                "pairs": [
                    {
                        "a": p.a,
                        "b": p.b,
                        "difference": p.difference,
                        "t": _num(p.t.statistic),
                        "t_p_value": p.t.p_value,
                        "f": _num(p.f.statistic),
                        "f_p_value": p.f.p_value,
                        "verdict": {"a": p.a, "b": p.b, "=": None}[p.verdict],
                    }
                    for p in ds.pairs
                ],
            }
            for ds in c.datasets
        ],
        "ranking": None,
        "ranking_note": c.ranking_note,
        "excluded": dict(c.excluded),
    }
    r = c.ranking
    if r is not None:
        out["ranking"] = {
            "methods": list(r.methods),
            "datasets": list(r.datasets),
            "scores": [list(row) for row in r.scores],
            "average_ranks": list(r.friedman.average_ranks),
            "friedman_chi2": r.friedman.chi2,
            "friedman_chi2_p_value": r.friedman.chi2_p_value,
            "iman_davenport_f": _num(r.friedman.f),
            "iman_davenport_p_value": r.friedman.f_p_value,
            "nemenyi_q": r.nemenyi.q_alpha,
            "critical_difference": r.nemenyi.critical_difference,
            "different": [[r.methods[i], r.methods[j]] for i, j in r.nemenyi.different],
            "groups": [[r.methods[i] for i in g] for g in r.groups],
        }
    return out
