"""``featurestream compare`` end to end against a ``featurestream serve`` process.

Every figure the command reports is checked against a computation of its own:
the selection against the selector run in this process on the same columns,
the scores against scikit-learn's ``cross_val_score`` on the reported
selection and the same folds, the 5x2cv statistics against their formulas,
the ranks against scipy's ``rankdata`` and the critical difference against
Demsar's q for k methods.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats
from sklearn.datasets import load_wine
from sklearn.dummy import DummyClassifier
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from featurestream.evaluation.crossval import fold_seed
from featurestream.selectors import REGISTRY
from featurestream.selectors.base import FeatureSelector
from featurestream.selectors.targets import resolve_target
from tests.support import ServeProcess

SVG = "{http://www.w3.org/2000/svg}"


def small_csv(path: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """120 x 10: columns 2 and 6 carry a yes/no label, the rest is noise."""
    rng = np.random.default_rng(5)
    y = np.repeat([0, 1], 60)
    X = rng.normal(size=(120, 10))
    X[:, 2] += 1.5 * y
    X[:, 6] -= 1.2 * y
    names = [f"c{i}" for i in range(10)]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([*names, "label"])
        for row, label in zip(X, y, strict=True):
            w.writerow([*(f"{v:.17g}" for v in row), "yes" if label else "no"])
    return X, y.astype(float), names


def run_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "featurestream", "compare", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def in_process_selection(
    algorithm: str, X: np.ndarray, y: np.ndarray, names: list[str]
) -> set[str]:
    cls = REGISTRY[algorithm]
    assert issubclass(cls, FeatureSelector)
    t = resolve_target(y)
    sel = cls.start(cls.params_type.from_mapping({}), t.y, t.n_classes)
    for j, name in enumerate(names):
        sel.learn_features([name], X[:, j][None, :].copy(), None)
    return set(sel.selected())


def sklearn_folds(X: np.ndarray, y: np.ndarray, columns: list[int]) -> np.ndarray:
    """The 5 x 2 scores of standardised kNN (DummyClassifier without columns)."""
    rows = []
    for r in range(5):
        cv = StratifiedKFold(n_splits=2, shuffle=True, random_state=fold_seed(0, r))
        if columns:
            knn = make_pipeline(StandardScaler(), KNeighborsClassifier())
            rows.append(cross_val_score(knn, X[:, columns], y, cv=cv))
        else:
            rows.append(cross_val_score(DummyClassifier(), np.zeros((len(y), 1)), y, cv=cv))
    return np.array(rows)


def by_hand(p: np.ndarray) -> tuple[float, float]:
    """Dietterich's t and Alpaydin's F from their formulas."""
    s2 = ((p - p.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    return p[0, 0] / math.sqrt(s2.mean()), (p**2).sum() / (2 * s2.sum())


def check_svg(path: Path, texts: list[str]) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    shown = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    for text in texts:
        assert text in shown, (path.name, text)
    return root


def test_compare_command_end_to_end(serve: ServeProcess, tmp_path: Path) -> None:
    X, y, names = small_csv(tmp_path / "small.csv")
    out = tmp_path / "result.json"
    plots = tmp_path / "plots"
    algorithms = "saola,alpha_investing,grafting"
    proc = run_cli(
        str(tmp_path / "small.csv"),
        "wine",
        "--target",
        "label",
        "--algorithms",
        algorithms,
        "--url",
        serve.url,
        "--json",
        str(out),
        "--plots",
        str(plots),
    )
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout
    assert "small: 120 instances x 10 features, 2 classes" in table
    assert "wine: 178 instances x 13 features, 3 classes" in table
    assert "grafting         not applicable: grafting is defined for binary targets" in table
    assert "left out of the ranking: grafting (not applicable on wine)" in table
    assert "Nemenyi critical difference" in table
    result: dict[str, Any] = json.loads(out.read_text())
    assert result["algorithms"] == algorithms.split(",")
    wine = load_wine()
    data = {"small": (X, y, names), "wine": (wine.data, wine.target.astype(float), None)}
    for ds in result["datasets"]:
        Xd, yd, nd = data[ds["name"]]
        nd = nd or [n.replace(" ", "_") for n in wine.feature_names]
        methods = {m["name"]: m for m in ds["methods"]}
        assert list(methods) == [*algorithms.split(","), "all_features"]
        if ds["name"] == "wine":
            assert methods["grafting"]["applicable"] is False
            assert "multi-class" in methods["grafting"]["reason"]
        for name, m in methods.items():
            if not m["applicable"]:
                continue
            (run,) = m["runs"]
            if name != "all_features":
                # The stream's selection is the selector's own on the same columns.
                assert set(run["selected"]) == in_process_selection(name, Xd, yd, nd)
                assert run["columns_seen"] == len(nd) and run["stopped"] is None
            columns = [nd.index(n) for n in run["selected"]]
            expected = sklearn_folds(Xd, yd, columns)
            np.testing.assert_allclose(m["fold_scores"], expected, rtol=1e-12)
            assert m["score_mean"] == pytest.approx(expected.mean(), rel=1e-12)
            assert m["score_std"] == pytest.approx(expected.std(ddof=1), rel=1e-9)
            assert m["n_features"] == len(columns)
        live = [n for n, m in methods.items() if m["applicable"]]
        assert len(ds["pairs"]) == len(live) * (len(live) - 1) // 2
        for pair in ds["pairs"]:
            p = np.array(methods[pair["a"]]["fold_scores"]) - np.array(
                methods[pair["b"]]["fold_scores"]
            )
            assert pair["difference"] == pytest.approx(p.mean(), abs=1e-12)
            s2 = ((p - p.mean(axis=1, keepdims=True)) ** 2).sum()
            if s2 == 0:
                continue  # the zero-variance rule: tested in tests/unit/evaluation
            t, f = by_hand(p)
            assert pair["t"] == pytest.approx(t, rel=1e-9)
            assert pair["t_p_value"] == pytest.approx(2 * stats.t.sf(abs(t), 5), rel=1e-9)
            assert pair["f"] == pytest.approx(f, rel=1e-9)
            assert pair["f_p_value"] == pytest.approx(stats.f.sf(f, 10, 5), rel=1e-9)
            better = pair["a"] if pair["difference"] > 0 else pair["b"]
            assert pair["verdict"] == (better if pair["f_p_value"] < 0.05 else None)
    ranking = result["ranking"]
    assert ranking["methods"] == ["saola", "alpha_investing", "all_features"]
    assert result["excluded"] == {"grafting": "not applicable on wine"}
    scores = np.array(ranking["scores"])
    np.testing.assert_allclose(
        ranking["average_ranks"], stats.rankdata(-scores, axis=1).mean(axis=0), rtol=1e-12
    )
    q = stats.studentized_range.ppf(0.95, 3, np.inf) / math.sqrt(2)
    assert ranking["critical_difference"] == pytest.approx(q * math.sqrt(3 * 4 / 12), rel=1e-9)
    # Plots: well-formed SVG naming what they show.
    check_svg(plots / "cd.svg", [f"{m} (" for m in ranking["methods"]])
    root = check_svg(plots / "scores.svg", ["small (", "wine (", "saola", "all_features"])
    assert len(list(root.iter(f"{SVG}circle"))) >= 2


def test_compare_reports_empty_selections_and_budget_stops(
    serve: ServeProcess, tmp_path: Path
) -> None:
    from featurestream.compare import compare, from_arrays

    rng = np.random.default_rng(9)
    y = np.repeat([0.0, 1.0], 50)
    noise = from_arrays("noise", rng.normal(size=(100, 8)), y)
    wide = from_arrays("wide", rng.normal(size=(100, 100)), y)
    result = compare([noise], ["saola"], url=serve.url)
    m = result.datasets[0].method("saola")
    assert m.runs[0].selected == ()
    assert "selected nothing in 1 of 1 run(s)" in m.notes[0]
    # The empty selection scores as the majority class does.
    np.testing.assert_allclose(m.fold_scores, sklearn_folds(noise.X, y, []), rtol=1e-12)
    assert m.score_mean == pytest.approx(0.5)
    assert result.ranking is None and "at least 2 data sets" in (result.ranking_note or "")
    # A budget no call can meet stops each stream after its first call (2 of 100 columns).
    stopped = compare([wide], ["saola", "alpha_investing"], url=serve.url, budget=1e-9)
    for name in ("saola", "alpha_investing"):
        (run,) = stopped.datasets[0].method(name).runs
        assert (run.columns_seen, run.stopped) == (2, "the budget of 1e-09 s ran out")
        assert set(run.selected) <= {"x0", "x1"}
        assert "stopped after 2 of 100 columns" in stopped.datasets[0].method(name).notes[-1]


def test_compare_shuffles_give_every_algorithm_the_same_orders(
    serve: ServeProcess, tmp_path: Path
) -> None:
    from featurestream.compare import compare, from_arrays

    X, y, names = small_csv(tmp_path / "small.csv")
    ds = from_arrays("small", X, y, names)
    result = compare([ds], ["saola", "group_saola"], url=serve.url, shuffles=2, group_size=1)
    saola = result.datasets[0].method("saola")
    groups = result.datasets[0].method("group_saola")
    assert [r.order for r in saola.runs] == [0, 1, 2]
    assert saola.stability is not None and -1.0 <= saola.stability <= 1.0
    # Group-SAOLA with one column per group sees the same columns in the same orders.
    assert len(groups.runs) == 3
    # The folds are the same in every run: the per-fold mean is the mean of the runs.
    per_run = np.array([r.scores for r in saola.runs])
    np.testing.assert_allclose(saola.fold_scores, per_run.mean(axis=0), rtol=1e-12)
    assert saola.score_std == pytest.approx(per_run.reshape(-1).std(ddof=1), rel=1e-12)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no_such_set"], "neither a built-in data set"),
        (["wine", "--algorithms", "saola,nope"], "Unknown algorithm 'nope'"),
        (["wine", "--algorithms", "ofs"], "not a supervised feature-stream algorithm"),
        (["wine", "--model", "forest"], "'model' parameter"),
        (["wine", "--param", "saola"], "expected ALG.KEY=VALUE"),
        (["wine", "--shuffles", "-1"], "'shuffles' parameter"),
        (["wine", "--budget", "-5"], "'budget' parameter"),
        (["SMALL"], "--target"),
    ],
)
def test_compare_command_errors(
    serve: ServeProcess,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    from featurestream._entry import main

    small_csv(tmp_path / "small.csv")
    argv = [str(tmp_path / "small.csv") if a == "SMALL" else a for a in args]
    assert main(["compare", *argv, "--url", serve.url, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("featurestream compare: ") and message in err


def test_compare_without_a_server_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    from featurestream._entry import main
    from tests.support import free_port

    url = f"http://127.0.0.1:{free_port()}"
    assert main(["compare", "wine", "--url", url, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("featurestream compare: ") and "127.0.0.1" in err


def test_compare_starts_its_own_server(tmp_path: Path) -> None:
    """Without --url the command runs a server on the memory store, then stops it."""
    X, y, names = small_csv(tmp_path / "small.csv")
    proc = run_cli(
        str(tmp_path / "small.csv"),
        "--target",
        "label",
        "--algorithms",
        "saola",
        "--json",
        "-",
        "--quiet",
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["server"] == "spawned featurestream serve --store memory://"
    (run,) = result["datasets"][0]["methods"][0]["runs"]
    assert set(run["selected"]) == in_process_selection("saola", X, y, names)


@pytest.mark.redis
def test_compare_on_a_redis_server(redis_serve: ServeProcess, tmp_path: Path) -> None:
    X, y, names = small_csv(tmp_path / "small.csv")
    proc = run_cli(
        str(tmp_path / "small.csv"),
        "--target",
        "label",
        "--algorithms",
        "saola,osfs",
        "--url",
        redis_serve.url,
        "--json",
        "-",
        "--quiet",
    )
    assert proc.returncode == 0, proc.stderr
    methods = {m["name"]: m for m in json.loads(proc.stdout)["datasets"][0]["methods"]}
    for name in ("saola", "osfs"):
        assert set(methods[name]["runs"][0]["selected"]) == in_process_selection(name, X, y, names)
