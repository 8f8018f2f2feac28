"""Aggregation, ranking, table, JSON and SVG of a comparison, from fixed fold scores.

No server here: runs with fixed 5 x 2 fold scores go through the same
summaries, tests and renderers as those of a real comparison.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from featurestream.compare.run import (
    ALL_FEATURES,
    Comparison,
    DatasetResult,
    MethodResult,
    Run,
    _pairs,
    _ranking,
    _summarise,
)

SVG = "{http://www.w3.org/2000/svg}"
NAMES = tuple(f"x{i}" for i in range(6))


def method(
    name: str, folds: list[list[float]], selected: tuple[str, ...] = ("x0",)
) -> MethodResult:
    m = MethodResult(name)
    scores = tuple((float(a), float(b)) for a, b in folds)
    m.runs.append(Run(0, selected, 0.5, len(NAMES), None, scores))
    _summarise(m, NAMES)
    return m


def refused(name: str) -> MethodResult:
    return MethodResult(name, applicable=False, reason="multi-class target")


def dataset(name: str, methods: list[MethodResult]) -> DatasetResult:
    return DatasetResult(
        name=name,
        description="10 instances x 6 features, 2 classes",
        source="test",
        task="classification",
        score_name="accuracy",
        n_instances=10,
        n_features=6,
        planted=(),
        methods=methods,
        pairs=_pairs(methods, 0.05),
    )


def constant(v: float) -> list[list[float]]:
    return [[v, v]] * 5


def varied(v: float) -> list[list[float]]:
    return [[v + 0.01, v - 0.01], [v, v], [v - 0.02, v + 0.02], [v, v], [v + 0.01, v - 0.01]]


def comparison() -> Comparison:
    # a and b tie on every data set; c is n/a on d2; all features score lowest on d1.
    d1 = dataset(
        "d1",
        [
            method("a", varied(0.8)),
            method("b", varied(0.8)),
            method("c", varied(0.7), selected=()),
            method(ALL_FEATURES, constant(0.6), selected=NAMES),
        ],
    )
    d2 = dataset(
        "d2",
        [
            method("a", varied(0.9)),
            method("b", varied(0.9)),
            refused("c"),
            method(ALL_FEATURES, varied(0.95), selected=NAMES),
        ],
    )
    d3 = dataset(
        "d3",
        [
            method("a", varied(0.5)),
            method("b", varied(0.5)),
            method("c", varied(0.4)),
            method(ALL_FEATURES, varied(0.45), selected=NAMES),
        ],
    )
    datasets = [d1, d2, d3]
    ranking, note, excluded = _ranking(datasets, ("a", "b", "c", ALL_FEATURES), 0.05)
    return Comparison(
        algorithms=("a", "b", "c"),
        model="knn",
        shuffles=0,
        seed=0,
        alpha=0.05,
        budget=60.0,
        datasets=datasets,
        ranking=ranking,
        ranking_note=note,
        excluded=excluded,
        seconds=1.0,
        server="test",
    )


def test_summary_of_runs() -> None:
    m = MethodResult("a")
    first = ((0.8, 0.6),) * 5
    second = ((0.6, 0.6),) * 5
    m.runs += [Run(0, ("x0", "x1"), 1.0, 6, None, first), Run(1, ("x0",), 3.0, 6, None, second)]
    _summarise(m, NAMES)
    assert m.fold_scores == ((0.7, 0.6),) * 5
    assert m.score_mean == pytest.approx(0.65)
    assert m.score_std == pytest.approx(np.std([0.8, 0.6] * 5 + [0.6, 0.6] * 5, ddof=1))
    assert (m.n_features, m.n_features_range, m.seconds) == (1.5, (1, 2), 2.0)
    # Nogueira by hand: d = 6, k_bar = 1.5; x0 in both (variance 0), x1 in one of two
    # (unbiased variance 2/1 * 1/2 * 1/2 = 0.5); Phi = 1 - (0.5 / 6) / (0.25 * 0.75).
    assert m.stability == pytest.approx(1 - (0.5 / 6) / (0.25 * 0.75))
    assert m.notes == []


def test_ties_refusals_and_the_ranking() -> None:
    c = comparison()
    r = c.ranking
    assert r is not None
    # c is n/a on d2: out of the ranking, with the reason.
    assert r.methods == ("a", "b", ALL_FEATURES)
    assert c.excluded == {"c": "not applicable on d2"}
    # a and b tie everywhere and share ranks: d1 (1.5, 1.5, 3), d2 (2.5, 2.5, 1), d3 (1.5, 1.5, 3).
    assert r.friedman.average_ranks == pytest.approx((11 / 6, 11 / 6, 7 / 3))
    scores = np.array(r.scores)
    expected = stats.rankdata(-scores, axis=1).mean(axis=0)
    np.testing.assert_allclose(r.friedman.average_ranks, expected)
    # Every gap is below CD (k = 3, N = 3): one group holds all three.
    assert r.nemenyi.different == ()
    assert r.groups == ((0, 1, 2),)


def test_pairwise_verdicts() -> None:
    c = comparison()
    pairs = {(p.a, p.b): p for p in c.datasets[0].pairs}
    # Identical fold scores: no difference at all (statistic 0, p = 1).
    ab = pairs[("a", "b")]
    assert (ab.t.statistic, ab.f.statistic, ab.t.p_value, ab.verdict) == (0.0, 0.0, 1.0, "=")
    # a - all features: 0.2 plus the same variation as a alone; f from the formula.
    p = np.array(varied(0.8)) - np.array(constant(0.6))
    s2 = ((p - p.mean(axis=1, keepdims=True)) ** 2).sum()
    pa = pairs[("a", ALL_FEATURES)]
    assert pa.f.statistic == pytest.approx((p**2).sum() / (2 * s2))
    assert pa.difference == pytest.approx(0.2)
    assert pa.verdict == "a"
    # The refused method is in no pair of d2.
    assert all("c" not in (q.a, q.b) for q in c.datasets[1].pairs)
    assert len(c.datasets[1].pairs) == 3


def test_table_and_json() -> None:
    c = comparison()
    table = c.table()
    assert f"  {'c':<12}  not applicable: multi-class target" in table
    assert "note: c selected nothing in 1 of 1 run(s): scored by the constant baseline" in table
    assert "left out of the ranking: c (not applicable on d2)" in table
    assert "no pair differs significantly" in table
    data = json.loads(c.to_json())
    assert data["ranking"]["methods"] == ["a", "b", ALL_FEATURES]
    assert data["ranking"]["groups"] == [["a", "b", ALL_FEATURES]]
    d2 = {m["name"]: m for m in data["datasets"][1]["methods"]}
    assert d2["c"] == {"name": "c", "applicable": False, "reason": "multi-class target"}


def test_json_writes_infinite_statistics_as_strings() -> None:
    # A constant non-zero difference: F is infinite (zero variance rule).
    d = dataset("d", [method("a", constant(0.9)), method("b", constant(0.8))])
    c = comparison()
    c.datasets = [d]
    (pair,) = json.loads(c.to_json())["datasets"][0]["pairs"]
    assert (pair["t"], pair["f"], pair["f_p_value"], pair["verdict"]) == ("inf", "inf", 0.0, "a")
    assert "+inf" in c.table()


def parse(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    return root


def test_svg_plots_are_well_formed(tmp_path: Path) -> None:
    c = comparison()
    written = c.write_plots(str(tmp_path / "plots"))
    assert sorted(Path(p).name for p in written) == ["cd.svg", "scores.svg"]
    cd = parse(tmp_path / "plots" / "cd.svg")
    texts = [t.text or "" for t in cd.iter(f"{SVG}text")]
    for name, rank in zip(c.ranking.methods, c.ranking.friedman.average_ranks, strict=True):  # type: ignore[union-attr]
        assert f"{name} ({rank:.2f})" in texts
    assert any(t.startswith("CD = ") for t in texts)
    # One thick bar per group of methods that do not differ.
    bars = [ln for ln in cd.iter(f"{SVG}line") if ln.get("stroke-width") == "4"]
    assert len(bars) == len(c.ranking.groups)  # type: ignore[union-attr]
    scores = parse(tmp_path / "plots" / "scores.svg")
    titles = [t.text or "" for t in scores.iter(f"{SVG}title")]
    # One marker per applicable method per data set, each titled with its figures.
    assert sum(1 for t in titles if t.startswith(("a:", "b:", "c:", "all_features:"))) == 11
    # Ties (a and b) stand side by side, not on top of each other.
    circles = [(e.get("cx"), e.get("cy")) for e in scores.iter(f"{SVG}circle")]
    assert len(circles) == len(set(circles))


def test_no_ranking_without_two_data_sets(tmp_path: Path) -> None:
    c = comparison()
    c.datasets = c.datasets[:1]
    c.ranking, c.ranking_note, c.excluded = _ranking(c.datasets, ("a", "b", ALL_FEATURES), 0.05)
    assert c.ranking is None and c.ranking_note is not None
    assert "no ranking (the Friedman test needs at least 2 data sets)" in c.table()
    written = c.write_plots(str(tmp_path))
    assert [Path(p).name for p in written] == ["scores.svg"]
    assert math.isfinite(c.datasets[0].methods[0].score_mean)
