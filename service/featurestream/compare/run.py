"""Replay data sets into streams, score every selection on the same folds, test the differences.

For each data set, each algorithm gets one stream per column order: the data
set's own order, and with ``shuffles=N`` also N shuffled orders (seeded; the
same orders for every algorithm). The columns go in through the Python SDK
(``Stream.add_features``; ``Stream.add_groups`` with groups of ``group_size``
consecutive columns for an algorithm that takes groups), in at most
:data:`CALLS` calls, so that ``budget`` can stop a stream between two calls.
The selection at the end is read back from the server and scored here, in
this process, with ``featurestream.evaluation.crossval.cross_val_scores`` on
the 5x2cv design: 5 repetitions of 2-fold cross-validation, stratified for a
class target, their folds fixed by ``seed`` and identical for every selection
and for all features. With several orders, a method's score on a fold is the
mean over its orders' selections on that fold.

Then, per data set, every pair of methods (the selectors and "all features")
gets Dietterich's 5x2cv paired t test and Alpaydin's combined 5x2cv F test on
those fold scores; over data sets, the methods scored on every data set get
the Friedman test and the Nemenyi critical difference (Demsar 2006).

Cases that do not crash the comparison:

* an empty selection is scored by the constant baseline (majority class, or
  the mean) and flagged;
* a stream the server refuses (a 4xx answer: an algorithm defined for binary
  targets given a multi-class one, say) makes the method "not applicable" on
  that data set, with the server's reason; it is left out of the pairwise
  tests there, and out of the Friedman test altogether;
* a stream stopped by ``budget`` (or by a column beyond the server's own time
  budget per request) keeps the selection it had, flagged with the number of
  columns it saw.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from featurestream.compare.data import Dataset, load
from featurestream.compare.report import render_table, to_dict
from featurestream.compare.results import (
    ALL_FEATURES,
    ComparisonData,
    DatasetResult,
    MethodResult,
    PairTest,
    Ranking,
    Run,
)
from featurestream.compare.svg import write_plots
from featurestream.errors import InvalidInput, InvalidParameter
from featurestream.evaluation.compare import (
    cd_groups,
    combined_5x2cv_f_test,
    friedman,
    nemenyi,
    paired_5x2cv_t_test,
)
from featurestream.evaluation.crossval import MODELS, Task, cross_val_scores
from featurestream.evaluation.stability import nogueira

FloatArray = npt.NDArray[np.float64]

#: The most calls one stream's columns are split into (``budget`` is checked between them).
CALLS = 50
DEFAULT_BUDGET = 60.0
DEFAULT_GROUP_SIZE = 10

__all__ = [
    "ALL_FEATURES",
    "CALLS",
    "Comparison",
    "DatasetResult",
    "MethodResult",
    "PairTest",
    "Ranking",
    "Run",
    "compare",
]


class Comparison(ComparisonData):
    """The result of :func:`compare`: per data set, and over data sets.

    ``table()`` renders it as text, ``to_dict()`` / ``to_json()`` as JSON and
    ``write_plots(directory)`` writes the SVG plots.
    """

    def table(self) -> str:
        return render_table(self)

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def write_plots(self, directory: str) -> list[str]:
        return write_plots(self, directory)


def _orders(d: int, shuffles: int, seed: int) -> list[npt.NDArray[np.intp]]:
    """The column orders: identity first, then ``shuffles`` seeded permutations."""
    orders = [np.arange(d, dtype=np.intp)]
    for s in range(shuffles):
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5EED, s]))
        orders.append(rng.permutation(d).astype(np.intp))
    return orders


def _calls(d: int, unit: int) -> list[tuple[int, int]]:
    """At most CALLS consecutive ranges over d columns, each a multiple of ``unit``."""
    units = -(-d // unit)
    per = max(1, -(-units // CALLS)) * unit
    return [(lo, min(d, lo + per)) for lo in range(0, d, per)]


def _fold_scores(ds: Dataset, columns: Sequence[int], model: str, seed: int) -> FloatArray:
    task = cast(Task, ds.task)
    return cross_val_scores(ds.X, ds.y, columns, model, folds=2, repeats=5, seed=seed, task=task)


def _as_pairs(m: FloatArray) -> tuple[tuple[float, float], ...]:
    return tuple((float(r[0]), float(r[1])) for r in m)


class _Refused(Exception):
    """The server answered a stream's creation or write with a 4xx: not applicable."""


@dataclass
class _Replayer:
    client: Any
    budget: float | None
    group_size: int
    params: Mapping[str, Mapping[str, Any]]
    grouped: frozenset[str]

    def replay(
        self, ds: Dataset, algorithm: str, order: npt.NDArray[np.intp], k: int
    ) -> tuple[tuple[str, ...], float, int, str | None]:
        """Stream ``ds``'s columns in ``order``; the selection, seconds, columns seen, stop."""
        from featurestream_client.errors import FeatureStreamError, RequestTooExpensive

        X = ds.X[:, order]
        names = [ds.names[i] for i in order]
        d = len(names)
        groups = algorithm in self.grouped
        try:
            stream = self.client.create_stream(
                algorithm,
                target=ds.y,
                params=dict(self.params.get(algorithm, {})),
                id=f"compare-{ds.name[:40]}-{algorithm}-{k}-{uuid.uuid4().hex[:8]}",
                target_type=ds.target_type,
            )
        except FeatureStreamError as exc:
            if exc.status is not None and 400 <= exc.status < 500:
                raise _Refused(str(exc)) from None
            raise
        stopped = None
        try:
            t0 = time.perf_counter()
            for lo, hi in _calls(d, self.group_size if groups else 1):
                try:
                    if groups:
                        stream.add_groups(
                            {
                                f"g{g // self.group_size}": (
                                    X[:, g : min(hi, g + self.group_size)],
                                    names[g : min(hi, g + self.group_size)],
                                )
                                for g in range(lo, hi, self.group_size)
                            }
                        )
                    else:
                        stream.add_features(X[:, lo:hi], names=names[lo:hi])
                except RequestTooExpensive:
                    stopped = "one column took longer than the server's time budget per request"
                    break
                except FeatureStreamError as exc:
                    if exc.status is not None and 400 <= exc.status < 500:
                        raise _Refused(str(exc)) from None
                    raise
                if self.budget is not None and hi < d and time.perf_counter() - t0 > self.budget:
                    stopped = f"the budget of {self.budget:g} s ran out"
                    break
            seconds = time.perf_counter() - t0
            selected = tuple(stream.selected().names)
            seen = int(stream.status().get("features_seen", 0)) if stopped else d
        finally:
            stream.delete()
        return selected, seconds, seen, stopped


def _summarise(m: MethodResult, universe: Sequence[str]) -> None:
    d = len(universe)
    runs = m.runs
    per_run = np.array([r.scores for r in runs], dtype=np.float64)  # runs x 5 x 2
    m.fold_scores = _as_pairs(per_run.mean(axis=0))
    m.score_mean = float(per_run.mean())
    m.score_std = float(per_run.reshape(-1).std(ddof=1))
    sizes = [len(r.selected) for r in runs]
    m.n_features = float(np.mean(sizes))
    m.n_features_range = (min(sizes), max(sizes))
    if m.name == ALL_FEATURES:
        return
    m.seconds = float(np.mean([r.seconds for r in runs]))
    if len(runs) >= 2:
        m.stability = nogueira([set(r.selected) for r in runs], universe)
    empty = sum(1 for s in sizes if s == 0)
    if empty:
        m.notes.append(
            f"selected nothing in {empty} of {len(runs)} run(s): scored by the constant "
            "baseline (majority class, or the mean)"
        )
    for r in runs:
        if r.stopped:
            m.notes.append(
                f"order {r.order}: stopped after {r.columns_seen} of {d} columns, {r.stopped}"
            )


def _pairs(methods: list[MethodResult], alpha: float) -> list[PairTest]:
    live = [m for m in methods if m.applicable]
    out = []
    for i, a in enumerate(live):
        for b in live[i + 1 :]:
            p = np.array(a.fold_scores) - np.array(b.fold_scores)
            f = combined_5x2cv_f_test(p)
            diff = float(p.mean())
            verdict = "=" if not f.p_value < alpha else ("a" if diff > 0 else "b")
            out.append(PairTest(a.name, b.name, diff, paired_5x2cv_t_test(p), f, verdict))
    return out


def _ranking(
    datasets: list[DatasetResult], methods: Sequence[str], alpha: float
) -> tuple[Ranking | None, str | None, dict[str, str]]:
    excluded: dict[str, str] = {}
    for name in methods:
        missing = [ds.name for ds in datasets if not ds.method(name).applicable]
        if missing:
            excluded[name] = f"not applicable on {', '.join(missing)}"
    kept = tuple(n for n in methods if n not in excluded)
    if len(datasets) < 2:
        return None, "the Friedman test needs at least 2 data sets", excluded
    if len(kept) < 2:
        return None, "the Friedman test needs at least 2 methods scored on every data set", excluded
    scores = tuple(tuple(ds.method(n).score_mean for n in kept) for ds in datasets)
    fr = friedman(scores, higher_is_better=True)
    ne = nemenyi(fr.average_ranks, len(datasets), alpha)
    ranking = Ranking(
        methods=kept,
        datasets=tuple(ds.name for ds in datasets),
        scores=scores,
        friedman=fr,
        nemenyi=ne,
        groups=cd_groups(fr.average_ranks, ne.critical_difference),
    )
    return ranking, None, excluded


@contextmanager
def _client(
    url: str | None, api_key: str | None, store: str, timeout: float
) -> Iterator[tuple[Any, str]]:
    from featurestream_client import Client

    if url is not None:
        with Client(url, api_key=api_key, timeout=timeout) as c:
            yield c, url
        return
    from featurestream.bench.server import spawn_server

    with spawn_server(store) as srv, Client(srv.url, timeout=timeout) as c:
        yield c, f"spawned featurestream serve --store {store}"


def _check(
    algorithms: Sequence[str], model: str, shuffles: int, alpha: float, budget: float | None
) -> tuple[str, ...]:
    if model not in MODELS:
        raise InvalidParameter(
            f"The 'model' parameter must be one of {', '.join(MODELS)}. Got {model!r} instead.",
            parameter="model",
        )
    if shuffles < 0:
        raise InvalidParameter(
            f"The 'shuffles' parameter must be a non-negative integer. Got {shuffles} instead.",
            parameter="shuffles",
        )
    if not 0.0 < alpha < 1.0:
        raise InvalidParameter(
            f"The 'alpha' parameter must be in (0, 1). Got {alpha} instead.", parameter="alpha"
        )
    if budget is not None and not budget > 0:
        raise InvalidParameter(
            f"The 'budget' parameter must be positive (None: no budget). Got {budget} instead.",
            parameter="budget",
        )
    names = tuple(dict.fromkeys(a.strip() for a in algorithms if a.strip()))
    if not names:
        raise InvalidParameter("Name at least one algorithm.", parameter="algorithms")
    if ALL_FEATURES in names:
        raise InvalidParameter(
            f"{ALL_FEATURES!r} is always compared; it is not an algorithm.",
            parameter="algorithms",
        )
    return names


def compare(
    datasets: Sequence[str | Dataset],
    algorithms: Sequence[str],
    *,
    model: str = "knn",
    shuffles: int = 0,
    seed: int = 0,
    alpha: float = 0.05,
    url: str | None = None,
    api_key: str | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    target: str | None = None,
    budget: float | None = DEFAULT_BUDGET,
    group_size: int = DEFAULT_GROUP_SIZE,
    store: str = "memory://",
    timeout: float = 600.0,
    progress: Callable[[str], None] | None = None,
) -> Comparison:
    """Compare feature-stream selectors on data sets (module docstring).

    Parameters
    ----------
    datasets
        Built-in names (``breast_cancer``, ``wine``, ``digits``, ``madelon``),
        data file paths (with ``target``), or :class:`~featurestream.compare.data.Dataset`.
    algorithms
        Feature-stream algorithm names, as the server lists them.
    model
        The scikit-learn model that scores each selection (``knn``, ``logistic``,
        ``naive_bayes``, ``linear``; ``featurestream.evaluation.crossval``).
    shuffles
        Shuffled column orders per algorithm, besides the data set's own order.
    seed
        Fixes the folds and the shuffled orders.
    alpha
        Level of the tests' verdicts and of the Nemenyi critical difference.
    url, api_key
        A running server; without ``url``, a ``featurestream serve`` is started
        on ``store`` (the embedded memory store by default) and stopped at the end.
    params
        Parameters per algorithm: ``{"osfs": {"max_k": 2}}``.
    target
        The target column of data files.
    budget
        Seconds a stream may take before it stops between two calls (None: no limit).
    group_size
        Consecutive columns per group for algorithms that take groups.
    progress
        Called with a line of text after each stream.

    Returns
    -------
    Comparison
    """
    started = time.perf_counter()
    names = _check(algorithms, model, shuffles, alpha, budget)
    if group_size < 1:
        raise InvalidParameter(
            f"The 'group_size' parameter must be >= 1. Got {group_size} instead.",
            parameter="group_size",
        )
    loaded = [d if isinstance(d, Dataset) else load(d, target=target) for d in datasets]
    if not loaded:
        raise InvalidInput("Name at least one data set.", field="data")
    if len({d.name for d in loaded}) != len(loaded):
        raise InvalidInput("Two data sets have the same name.", field="data")
    say = progress or (lambda _line: None)
    results: list[DatasetResult] = []
    with _client(url, api_key, store, timeout) as (client, server):
        hosted = {a.name: a for a in client.algorithms()}
        for a in names:
            if a not in hosted:
                raise InvalidParameter(
                    f"Unknown algorithm {a!r}; the server hosts {', '.join(sorted(hosted))}.",
                    parameter="algorithms",
                )
            if hosted[a].kind != "features" or not hosted[a].supervised:
                raise InvalidParameter(
                    f"{a} is not a supervised feature-stream algorithm; compare replays columns.",
                    parameter="algorithms",
                )
        replayer = _Replayer(
            client,
            budget,
            group_size,
            params or {},
            frozenset(a for a in names if hosted[a].supports_groups),
        )
        for ds in loaded:
            results.append(_one_dataset(ds, names, replayer, model, shuffles, seed, alpha, say))
    ranking, note, excluded = _ranking(results, (*names, ALL_FEATURES), alpha)
    return Comparison(
        algorithms=names,
        model=model,
        shuffles=shuffles,
        seed=seed,
        alpha=alpha,
        budget=budget,
        datasets=results,
        ranking=ranking,
        ranking_note=note,
        excluded=excluded,
        seconds=time.perf_counter() - started,
        server=server,
    )


def _one_dataset(
    ds: Dataset,
    names: tuple[str, ...],
    replayer: _Replayer,
    model: str,
    shuffles: int,
    seed: int,
    alpha: float,
    say: Callable[[str], None],
) -> DatasetResult:
    # All features first: a data set the folds cannot be cut from fails before any replay.
    every = _fold_scores(ds, range(ds.n_features), model, seed)
    baseline = MethodResult(ALL_FEATURES)
    baseline.runs.append(Run(0, ds.names, 0.0, ds.n_features, None, _as_pairs(every)))
    methods: list[MethodResult] = []
    index = {n: i for i, n in enumerate(ds.names)}
    orders = _orders(ds.n_features, shuffles, seed)
    for algorithm in names:
        m = MethodResult(algorithm)
        for k, order in enumerate(orders):
            try:
                selected, seconds, seen, stopped = replayer.replay(ds, algorithm, order, k)
            except _Refused as exc:
                m.applicable, m.reason = False, str(exc)
                say(f"{ds.name}: {algorithm} not applicable: {exc}")
                break
            scores = _fold_scores(ds, [index[n] for n in selected], model, seed)
            run = Run(k, selected, seconds, seen, stopped, _as_pairs(scores))
            m.runs.append(run)
            say(
                f"{ds.name}: {algorithm} order {k}: {len(selected)} selected in {seconds:.2f} s, "
                f"score {run.score:.3f}" + (f" (stopped: {stopped})" if stopped else "")
            )
        if m.applicable:
            _summarise(m, ds.names)
        methods.append(m)
    _summarise(baseline, ds.names)
    methods.append(baseline)
    return DatasetResult(
        name=ds.name,
        description=ds.describe(),
        source=ds.source,
        task=ds.task,
        score_name="accuracy" if ds.task == "classification" else "R^2",
        n_instances=ds.n_instances,
        n_features=ds.n_features,
        planted=ds.planted,
        methods=methods,
        pairs=_pairs(methods, alpha),
    )
