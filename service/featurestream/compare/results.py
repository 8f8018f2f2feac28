"""What a comparison measured: runs, methods, pairwise tests, the ranking.

Plain data (``featurestream.compare.run`` fills it in); ``report`` renders it
as text and JSON, ``svg`` draws it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from featurestream.evaluation.compare import FriedmanResult, NemenyiResult, SignificanceResult

#: The name of the method that keeps every column.
ALL_FEATURES = "all_features"

__all__ = [
    "ALL_FEATURES",
    "ComparisonData",
    "DatasetResult",
    "MethodResult",
    "PairTest",
    "Ranking",
    "Run",
]


@dataclass(frozen=True)
class Run:
    """One stream: an algorithm on one column order of a data set.

    ``order`` is 0 for the data set's own order, 1..N for the shuffled ones;
    ``columns_seen`` is less than the data set's width when ``stopped`` says why.
    """

    order: int
    selected: tuple[str, ...]
    seconds: float
    columns_seen: int
    stopped: str | None
    scores: tuple[tuple[float, float], ...]

    @property
    def score(self) -> float:
        return float(np.mean(self.scores))


@dataclass
class MethodResult:
    """A selector (or all features) on one data set.

    ``fold_scores`` is the 5 x 2 matrix of the tests: score on fold j of
    repetition i, averaged over the runs (column orders). ``score_std`` is the
    sample standard deviation of every run's fold scores. ``stability`` is
    Nogueira's Phi over the runs' selections (None with a single run).
    """

    name: str
    applicable: bool = True
    reason: str | None = None
    runs: list[Run] = field(default_factory=list)
    fold_scores: tuple[tuple[float, float], ...] = ()
    score_mean: float = math.nan
    score_std: float = math.nan
    n_features: float = math.nan
    n_features_range: tuple[int, int] = (0, 0)
    seconds: float | None = None
    stability: float | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PairTest:
    """Both 5x2cv tests of method ``a`` against method ``b`` on one data set.

    ``difference`` is the mean over the 10 folds of score(a) - score(b).
    ``verdict`` reads the combined F test at level ``alpha``: ``"a"`` or ``"b"``
    (the better one, by the sign of ``difference``) when p < alpha, else ``"="``.
    """

    a: str
    b: str
    difference: float
    t: SignificanceResult
    f: SignificanceResult
    verdict: str


@dataclass
class DatasetResult:
    """Everything measured on one data set."""

    name: str
    description: str
    source: str
    task: str
    score_name: str
    n_instances: int
    n_features: int
    planted: tuple[str, ...]
    methods: list[MethodResult]
    pairs: list[PairTest]

    def method(self, name: str) -> MethodResult:
        return next(m for m in self.methods if m.name == name)


@dataclass(frozen=True)
class Ranking:
    """The Friedman test and the Nemenyi post-hoc over the data sets.

    ``methods`` are those scored on every data set, in the order of
    ``friedman.average_ranks``; ``excluded`` maps the others to why.
    """

    methods: tuple[str, ...]
    datasets: tuple[str, ...]
    scores: tuple[tuple[float, ...], ...]
    friedman: FriedmanResult
    nemenyi: NemenyiResult
    groups: tuple[tuple[int, ...], ...]


@dataclass
class ComparisonData:
    """Everything :func:`featurestream.compare.compare` measured, per data set and over them."""

    algorithms: tuple[str, ...]
    model: str
    shuffles: int
    seed: int
    alpha: float
    budget: float | None
    datasets: list[DatasetResult]
    ranking: Ranking | None
    ranking_note: str | None
    excluded: dict[str, str]
    seconds: float
    server: str
