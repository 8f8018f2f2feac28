"""How good a stream's selection is: ``GET /evaluation``.

Feature streams: the cross-validated score of a scikit-learn model on the
columns of the current selection, beside that of the best single selected
feature (``evaluation/crossval.py`` gives the models and the folds: shuffled
``StratifiedKFold`` for class targets, ``KFold`` for continuous ones, repetition r
with ``random_state = fold_seed(0, r)``; kNN, logistic regression and ridge
standardise each column with the training fold's mean and deviation first).
The columns are the values the client sent, so a selector must keep them:

* SAOLA, and group-SAOLA with the SU test, keep the selected columns as sent;
* Grafting, and OSFS, Fast-OSFS and group-SAOLA with the Fisher z test, keep
  them standardised with the mean and scale of each, and they are restored
  from those (exact to rounding). A state stored before the scales were kept
  cannot be restored until its older members have left the selection;
* OSFS and Fast-OSFS with the discrete tests keep integer codes, and
  alpha-investing an orthonormal basis: their streams answer
  ``422 evaluation-unavailable``.

Supervised instance streams (OFS, FIRES): the prequential (test-then-train)
accuracy the selector counts as it learns (``selectors/prequential.py``),
overall and over the last 1,000 instances. Unsupervised ones (FSDS, NRFS):
``422 evaluation-unavailable``.

Results are cached per (stream, incarnation, version, query); the work runs
in whatever ``run`` the caller hands in (the API: a worker thread, never the
event loop). Its cost is bounded before it is queued: ``MAX_FITS`` model fits
((selected + 1) x folds x repeats), ``MAX_CELLS`` values fitted in all, and
knn on at most ``MAX_KNN_ROWS`` rows (it compares every test row with every
training row); above that, ``413 limit-exceeded``. Once running it is held to
the time budget of a request (``request_time_budget``: ``413
request-too-expensive`` past it, checked between fits), and it stops at its
next check when every caller that asked for it has gone. At most
``MAX_QUEUED_PER_TENANT`` distinct queries of one tenant, and ``MAX_QUEUED``
in all, run or wait at once; past that, ``429 quota-exceeded``. They take
their turns tenant after tenant (``fairness.py``).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from featurestream.engine.budget import Budget
from featurestream.engine.fairness import FairGate
from featurestream.errors import EvaluationUnavailable, InvalidInput, LimitExceeded, QuotaExceeded
from featurestream.offload import EVALUATION_THREADS

T = TypeVar("T")
Run = Callable[[Callable[[], T]], Awaitable[T]]

MODELS = ("knn", "logistic", "naive_bayes", "linear")
SEED = 0
MAX_FOLDS = 10
MAX_REPEATS = 10
# Rows x (selected features + 1) x folds x repeats: the values all the fits go through.
MAX_CELLS = 20_000_000
# (Selected features + 1) x folds x repeats: the models one evaluation fits.
MAX_FITS = 2000
MAX_KNN_ROWS = 20_000
# Distinct queries running or waiting at once: per tenant, and in all.
MAX_QUEUED_PER_TENANT = 4
MAX_QUEUED = 16
# Prequential accuracy "recently": over this many latest instances.
RECENT = 1000
# Cached results (each a few hundred bytes).
CACHE_ENTRIES = 256

FEATURE_COLUMNS = ("saola", "grafting", "osfs", "fast_osfs", "group_saola")
SUPERVISED_INSTANCES = ("ofs", "fires")


@dataclass(frozen=True)
class StateView:
    """A stream's committed state as of one version (states are immutable values)."""

    info: Mapping[str, Any]
    incarnation: str
    version: int
    algorithm: str
    state: Any
    params: Mapping[str, Any] = field(default_factory=dict)


class EvaluationCache:
    """The latest results, by (stream, incarnation, version, query)."""

    def __init__(self, size: int = CACHE_ENTRIES) -> None:
        self.size = size
        self._items: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
        # Computations under way, by key: the same query asked again meanwhile waits
        # for the one computation instead of starting another.
        self.running: dict[tuple[Any, ...], asyncio.Future[dict[str, Any]]] = {}
        # Of the computations under way: who asked (tenant), how many callers wait, and
        # the checkpoint that stops one nobody waits for any more.
        self.tenants: Counter[str | None] = Counter()
        self.waiters: Counter[tuple[Any, ...]] = Counter()
        self.work: dict[tuple[Any, ...], Work] = {}
        self.gate = FairGate(EVALUATION_THREADS)

    def get(self, key: tuple[Any, ...]) -> dict[str, Any] | None:
        doc = self._items.get(key)
        if doc is not None:
            self._items.move_to_end(key)
        return doc

    def put(self, key: tuple[Any, ...], doc: dict[str, Any]) -> None:
        self._items[key] = doc
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


class Abandoned(Exception):
    """Every caller of an evaluation went away: its work stops."""


class Work:
    """The checkpoint of one evaluation: its time budget, and whether anyone still waits.

    >>> w = Work(Budget(0.0, "fits", 3))
    >>> w.start(); w(1)
    >>> w.abandon()
    >>> try:
    ...     w(2)
    ... except Abandoned:
    ...     print("stopped")
    stopped
    """

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self._abandoned = threading.Event()

    def start(self) -> None:
        self.budget.start()

    def abandon(self) -> None:
        self._abandoned.set()

    @property
    def abandoned(self) -> bool:
        return self._abandoned.is_set()

    def __call__(self, fits_done: int) -> None:
        if self._abandoned.is_set():
            raise Abandoned
        self.budget(fits_done)


def check_cost(view: StateView, model: str, folds: int, repeats: int) -> None:
    """Refuse, before it is queued, a cross-validation too expensive to run (413).

    >>> from types import SimpleNamespace
    >>> state = SimpleNamespace(selected=["a"] * 400, y=np.zeros(30))
    >>> view = StateView({}, "i", 1, "saola", state)
    >>> check_cost(view, "logistic", 5, 1)  # 401 x 5 = 2,005 fits
    Traceback (most recent call last):
    ...
    featurestream.errors.LimitExceeded: Evaluating 400 selected features on 30 instances ...
    >>> check_cost(view, "logistic", 4, 1)  # 1,604 fits
    """
    k = len(view.state.selected)
    n = int(np.asarray(view.state.y).shape[0])
    fits = (k + 1) * folds * repeats
    cells = n * fits
    if fits > MAX_FITS or cells > MAX_CELLS or (model == "knn" and n > MAX_KNN_ROWS):
        raise LimitExceeded(
            f"Evaluating {k} selected features on {n} instances with {folds} folds x "
            f"{repeats} repeats is too expensive ({fits} model fits; at most {MAX_FITS} "
            f"fits, {MAX_CELLS} row-feature-fits, and {MAX_KNN_ROWS} rows for knn); ask "
            "for fewer folds or repeats.",
            limit="evaluation_cost",
            maximum=MAX_FITS if fits > MAX_FITS else MAX_CELLS,
        )


def check_query(model: str, folds: int, repeats: int) -> None:
    """Refuse an unknown model (422 naming the allowed ones); folds/repeats are checked
    by the route's bounds too."""
    if model not in MODELS:
        raise InvalidInput(
            f"The 'model' parameter must be one of {', '.join(MODELS)}. Got {model!r} instead.",
            field="model",
        )
    if not 2 <= folds <= MAX_FOLDS:
        raise InvalidInput(
            f"The 'folds' parameter must be an integer in [2, {MAX_FOLDS}]. Got {folds}.",
            field="folds",
        )
    if not 1 <= repeats <= MAX_REPEATS:
        raise InvalidInput(
            f"The 'repeats' parameter must be an integer in [1, {MAX_REPEATS}]. Got {repeats}.",
            field="repeats",
        )


def selected_columns(view: StateView) -> tuple[list[str], npt.NDArray[np.float64]]:
    """The selected names and their columns as sent, ``(n, k)``."""
    s = view.state
    names = [str(n) for n in s.selected]
    n = int(s.y.shape[0])
    if view.algorithm == "saola":
        X = np.zeros((len(names), n))
        for i in range(len(names)):
            lo, hi = int(s.s_indptr[i]), int(s.s_indptr[i + 1])
            X[i, s.s_indices[lo:hi]] = s.s_data[lo:hi]
        return names, np.ascontiguousarray(X.T)
    if view.algorithm == "grafting":
        cols = np.asarray(s.columns, dtype=np.float64).reshape(len(names), n)
        X = cols * np.asarray(s.stds)[:, None] + np.asarray(s.means)[:, None]
        return names, np.ascontiguousarray(X.T)
    if view.algorithm == "group_saola" and view.params.get("test") == "su":
        # SU keeps the columns as sent (the codes SU counts are the values).
        cols = np.asarray(s.columns, dtype=np.float64).reshape(len(names), n)
        return names, np.ascontiguousarray(cols.T)
    if view.algorithm in ("osfs", "fast_osfs", "group_saola"):
        scales = np.asarray(s.scales, dtype=np.float64)
        if view.params.get("test", "fisher_z") != "fisher_z":
            raise EvaluationUnavailable(
                f"This {view.algorithm} stream runs a discrete test: it keeps its selected "
                "columns as integer codes, not as they were sent, so its selection cannot be "
                "scored (with the Fisher z test it keeps what it takes).",
                algorithm=view.algorithm,
            )
        if scales.shape[0] != len(names) or np.any(scales == 0.0):
            raise EvaluationUnavailable(
                f"Some features of this {view.algorithm} stream's selection were selected "
                "before the server kept what restores their columns; it can be scored once "
                "they have left the selection.",
                algorithm=view.algorithm,
            )
        cols = np.asarray(s.columns, dtype=np.float64).reshape(len(names), n)
        X = cols * scales[:, None] + np.asarray(s.means)[:, None]
        return names, np.ascontiguousarray(X.T)
    raise EvaluationUnavailable(
        f"Streams of {view.algorithm} keep no copy of their selected columns as they were "
        "sent, so their selection cannot be scored; feature streams of "
        f"{', '.join(FEATURE_COLUMNS)} can be (OSFS with the Fisher z test).",
        algorithm=view.algorithm,
    )


def task_of(view: StateView) -> str:
    from featurestream.evaluation.crossval import infer_task

    kind = view.info.get("target_type")
    if kind in ("binary", "multiclass"):
        return "classification"
    if kind == "continuous":
        return "regression"
    # Streams created before target types: read the kind from the values.
    return infer_task(view.state.y)


def cross_validation(
    view: StateView, model: str, folds: int, repeats: int, checkpoint: Work | None = None
) -> dict[str, Any]:
    """The evaluation document of a feature stream (pure: runs in a worker thread).

    ``checkpoint`` is called with the fits done before each set of them (the
    selection's, then each single feature's).
    """
    from featurestream.evaluation.crossval import cross_val_scores

    check_cost(view, model, folds, repeats)
    if checkpoint is not None:
        checkpoint.start()
    names, X = selected_columns(view)
    y = np.asarray(view.state.y, dtype=np.float64)
    task = task_of(view)
    k = X.shape[1]
    done = 0

    def scores(cols: list[int]) -> list[float]:
        nonlocal done
        if checkpoint is not None:
            checkpoint(done)
        done += folds * repeats
        s = cross_val_scores(X, y, cols, model, folds, repeats, SEED, task=task)  # type: ignore[arg-type]
        # Finite: accuracy, or R^2 with scikit-learn's force_finite (a constant test fold).
        return [float(v) for v in s.ravel()]

    every = scores(list(range(k)))
    best: dict[str, Any] | None = None
    for j, name in enumerate(names):
        single = scores([j])
        mean = float(np.mean(single))
        if best is None or mean > best["score"]:
            best = {"name": name, "score": mean, "fold_scores": single}
    return {
        "version": view.version,
        "kind": "cross_validation",
        "model": model,
        "score_kind": "accuracy" if task == "classification" else "r2",
        "folds": folds,
        "repeats": repeats,
        "seed": SEED,
        "features": k,
        "score": float(np.mean(every)),
        "fold_scores": every,
        "best_single": best,
    }


def prequential(view: StateView) -> dict[str, Any]:
    """The evaluation document of a supervised instance stream."""
    s = view.state
    predicted = int(getattr(s, "predicted", 0))
    correct = int(getattr(s, "correct", 0))
    recent = np.asarray(getattr(s, "recent", np.zeros(0, dtype=np.bool_)), dtype=np.bool_)
    return {
        "version": view.version,
        "kind": "prequential",
        "score_kind": "accuracy",
        "instances": predicted,
        "accuracy": correct / predicted if predicted else None,
        "recent": {
            "window": RECENT,
            "instances": int(recent.size),
            "accuracy": float(recent.mean()) if recent.size else None,
        },
    }


async def evaluate(
    view: StateView,
    cache: EvaluationCache,
    stream_id: str,
    model: str,
    folds: int,
    repeats: int,
    run: Run[dict[str, Any]],
    *,
    tenant: str | None = None,
    budget: float = 0.0,
) -> dict[str, Any]:
    """The evaluation of ``view`` (cached), computed with ``run`` when it is not cached.

    ``tenant`` is who asks (its queries are bounded together), ``budget`` the
    seconds the work may take once it runs (0: no bound).
    """
    check_query(model, folds, repeats)
    if view.info.get("kind") == "instances":
        if view.algorithm not in SUPERVISED_INSTANCES:
            raise EvaluationUnavailable(
                f"Streams of {view.algorithm} learn without labels: they make no predictions "
                "to score. Evaluation covers feature streams and the supervised instance "
                f"streams ({', '.join(SUPERVISED_INSTANCES)}).",
                algorithm=view.algorithm,
            )
        return prequential(view)
    if view.algorithm not in FEATURE_COLUMNS:
        selected_columns(view)  # raises EvaluationUnavailable
    key = (stream_id, view.incarnation, view.version, model, folds, repeats)
    doc = cache.get(key)
    if doc is not None:
        return doc
    task = cache.running.get(key)
    work = cache.work.get(key)
    if task is None or (work is not None and work.abandoned):
        # None under way, or one that stops (nobody waited for it): a computation anew.
        task = _start(view, cache, key, run, tenant, budget)
    cache.waiters[key] += 1
    try:
        # Shielded: one caller that goes away does not cancel the others' computation.
        return await asyncio.shield(task)
    finally:
        cache.waiters[key] -= 1
        if cache.waiters[key] <= 0:
            del cache.waiters[key]
            work = cache.work.get(key)
            if work is not None and not task.done():
                work.abandon()  # nobody waits any more: stop at the next check


def _start(
    view: StateView,
    cache: EvaluationCache,
    key: tuple[Any, ...],
    run: Run[dict[str, Any]],
    tenant: str | None,
    budget: float,
) -> asyncio.Future[dict[str, Any]]:
    """Queue the computation of ``key``, once its cost and the queue's bounds allow it."""
    _, _, _, model, folds, repeats = key
    check_cost(view, model, folds, repeats)
    if cache.tenants[tenant] >= MAX_QUEUED_PER_TENANT or len(cache.running) >= MAX_QUEUED:
        mine = cache.tenants[tenant] >= MAX_QUEUED_PER_TENANT
        most = MAX_QUEUED_PER_TENANT if mine else MAX_QUEUED
        raise QuotaExceeded(
            f"{most} evaluations {'of this tenant ' if mine else ''}are already running or "
            "waiting, the most there may be at once; ask again once they are done.",
            limit="evaluation_queue",
            maximum=most,
        )
    work = Work(Budget(budget, "fits", (len(view.state.selected) + 1) * folds * repeats))

    async def compute() -> dict[str, Any]:
        # One tenant's turn after another's (engine/fairness.py), not first come.
        async with cache.gate.turn(tenant):
            if work.abandoned:
                raise Abandoned
            out = await run(lambda: cross_validation(view, model, folds, repeats, work))
        cache.put(key, out)
        return out

    # A task of its own: its result fills the cache whoever still waits for it.
    task = asyncio.ensure_future(compute())
    cache.running[key] = task
    cache.work[key] = work
    cache.tenants[tenant] += 1

    def done(t: asyncio.Future[dict[str, Any]]) -> None:
        if cache.running.get(key) is t:
            del cache.running[key]
            cache.work.pop(key, None)
        cache.tenants[tenant] -= 1
        if cache.tenants[tenant] <= 0:
            del cache.tenants[tenant]
        if not t.cancelled():
            t.exception()  # retrieved: no warning when every caller went away

    task.add_done_callback(done)
    return task


__all__ = [
    "CACHE_ENTRIES",
    "FEATURE_COLUMNS",
    "MAX_CELLS",
    "MAX_FITS",
    "MAX_FOLDS",
    "MAX_KNN_ROWS",
    "MAX_QUEUED",
    "MAX_QUEUED_PER_TENANT",
    "MAX_REPEATS",
    "MODELS",
    "RECENT",
    "SEED",
    "SUPERVISED_INSTANCES",
    "Abandoned",
    "EvaluationCache",
    "StateView",
    "Work",
    "check_cost",
    "check_query",
    "cross_validation",
    "evaluate",
    "prequential",
    "selected_columns",
]
