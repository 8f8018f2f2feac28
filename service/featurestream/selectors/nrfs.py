"""NRFS on a window: noise-resistant unsupervised feature selection over an instance stream.

docs/algorithms/nrfs.md. The stream keeps its most recent ``window`` instances
in a ring buffer. Every ``refresh`` instances (and once the window first holds
``min_instances``), NRFS runs on the window (``stats/nrfs.py``): the spectra of
an instance similarity graph give the cluster structure to explain; noisy
instances are dropped; each remaining representative instance explains the
spectra from per-feature similarity layers by ridge regression; and features
are taken spectrum by spectrum by their largest normalised coefficient.

References
----------
Hao Huang, Shinjae Yoo, Dantong Yu, Hong Qin. "Noise Resistant Unsupervised
Feature Selection via Multi Perspective Correlations." Proceedings of the
IEEE International Conference on Data Mining (ICDM), 2014.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np

from featurestream.errors import InvalidParameter
from featurestream.selectors import drift
from featurestream.selectors.base import JSON, InstanceSelector, Matrix, Vector
from featurestream.selectors.decisions import (
    InstanceUpdate,
    ScoreKind,  # scores
    SelectedFeature,
)
from featurestream.selectors.params import Constraint, Interval, NoneOr, Params, StrOptions
from featurestream.stats.nrfs import nrfs

# Largest window the service keeps, in values (window x d float64 numbers: 1 GiB).
MAX_WINDOW_VALUES = 1 << 27
# Largest window in instances: one computation holds n x n matrices (the similarity
# graph, its eigenvectors, pairwise distances), 200 MB each at n = 5,000, and takes
# about a minute there on one core; a larger window would exhaust memory or time.
MAX_WINDOW = 5000


@dataclass(frozen=True)
class FractionOrCount(Constraint):
    """A float in (0, 1] (a fraction) or an int >= 1 (a count); a bool is neither.

    >>> rule = FractionOrCount()
    >>> rule.accepts(0.25), rule.accepts(1.0), rule.accepts(5), rule.accepts(5.0)
    (True, True, True, False)
    """

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        if isinstance(value, Integral):
            return int(value) >= 1
        if isinstance(value, Real):
            return 0.0 < float(value) <= 1.0
        return False

    def coerce(self, value: Any) -> Any:
        return int(value) if isinstance(value, Integral) else float(value)

    def describe(self) -> str:
        return "a float in the range (0, 1] or an int in the range [1, inf)"

    def schema(self) -> dict[str, Any]:
        return {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                {"type": "integer", "minimum": 1},
            ]
        }

    def invalid_example(self) -> Any:
        return 0


@dataclass(frozen=True, kw_only=True)
class NRFSParams(Params):
    """Parameters of NRFS (named as in docs/algorithms/nrfs.md).

    ``num_features`` has no default: it is required. ``refresh`` None means
    "equal to ``window``"; ``sigma`` None means the median pairwise distance
    of the window's instances.
    """

    algorithm: ClassVar[str] = "NRFS"
    constraints: ClassVar[dict[str, Any]] = {
        "num_features": Interval(int, 1, None, "left"),
        "window": Interval(int, 3, MAX_WINDOW, "both"),
        "refresh": NoneOr(Interval(int, 1, None, "left")),
        "min_instances": Interval(int, 3, None, "left"),
        "clusters": Interval(int, 2, None, "left"),
        "representatives": FractionOrCount(),
        "neighbours": Interval(int, 1, None, "left"),
        "similarity": StrOptions(("gaussian", "cosine")),
        "sigma": NoneOr(Interval(float, 0.0, None, "neither")),
        "ridge": Interval(float, 0.0, None, "neither"),
        "noise_fraction": Interval(float, 0.0, 1.0, "left"),
        "seed": Interval(int, 0, None, "left"),
        **drift.CONSTRAINTS,
    }
    descriptions: ClassVar[dict[str, str]] = {
        "num_features": "h, the number of features selected (at most d)",
        "window": "instances kept: the most recent ones (a computation costs n^2 in time and "
        "memory)",
        "refresh": "compute when the count of instances crosses a multiple of it; null means "
        "`window`",
        "min_instances": "the first computation waits until the window holds this many "
        "(at most `window`)",
        "clusters": "k, the clusters sought; k - 1 spectra are explained (at most `min_instances`)",
        "representatives": "p, the representative instances: a fraction of those left "
        "after noise removal, or a count",
        "neighbours": "q, features in each feature's local subspace, itself included",
        "similarity": "the kernel between instances",
        "sigma": "width of the Gaussian kernel of the graph; null means the median pairwise "
        "distance",
        "ridge": "lambda, the ridge penalty of the fits",
        "noise_fraction": "fraction of the window set aside as noise",
        "seed": "kept for a future tie-break; the computation has no random step",
        **drift.DESCRIPTIONS,
    }

    num_features: int
    window: int = 1000
    refresh: int | None = None
    min_instances: int = 100
    clusters: int = 4
    representatives: float | int = 0.25
    neighbours: int = 1
    similarity: str = "gaussian"
    sigma: float | None = None
    ridge: float = 1e-3
    noise_fraction: float = 0.1
    seed: int = 0
    drift: str = "none"
    on_drift: str = "log"

    def _check(self) -> None:
        if self.min_instances > self.window:
            raise InvalidParameter(
                f"The 'min_instances' parameter of NRFS must be at most the window "
                f"({self.window}). Got {self.min_instances!r} instead.",
                parameter="min_instances",
            )
        if self.clusters > self.min_instances:
            raise InvalidParameter(
                f"The 'clusters' parameter of NRFS must be at most min_instances "
                f"({self.min_instances}): each cluster needs an instance. "
                f"Got {self.clusters!r} instead.",
                parameter="clusters",
            )

    @property
    def refresh_every(self) -> int:
        """``refresh``, or ``window`` when it is None."""
        return self.window if self.refresh is None else self.refresh


@dataclass(frozen=True)
class NRFSState:
    """Everything NRFS knows.

    Attributes
    ----------
    feature_names : the d feature names, in column order.
    window : the ring buffer, (fill, d) with fill <= the ``window`` parameter;
        it grows until full, then row ``position`` is the oldest instance and
        the next to be overwritten.
    position : where the next instance goes once the buffer is full (0 before).
    scores : (d,) the scores of the last computation (zeros before the first).
    selected : the feature indices selected by the last computation, in
        selection order (empty before the first).
    computed_at : ``instances_seen`` when the last computation ran (0: never).
    computations : how many computations have run.
    instances_seen, batches_seen : counters; every learn call with at least
        one instance is one batch (computations happen at the end of a batch).
    """

    feature_names: tuple[str, ...]
    window: Matrix
    scores: Vector
    position: int = 0
    selected: tuple[int, ...] = ()
    computed_at: int = 0
    computations: int = 0
    instances_seen: int = 0
    batches_seen: int = 0
    # The drift watch (selectors/drift.py): empty without one.
    watch: tuple[Any, ...] = ()


def push(window: Matrix, seen: int, capacity: int, X: Matrix) -> tuple[Matrix, int]:
    """The ring buffer after appending the rows of X: ``(window, position)``, a new array.

    ``seen`` is the number of instances pushed before. Instance t (counted from
    0 over the stream) lives in row t mod ``capacity``; the buffer grows until
    it holds ``capacity`` rows, and ``position`` is then the row of the oldest
    instance, the next to be overwritten (0 while growing).

    >>> w, pos = push(np.zeros((0, 1)), 0, 3, np.array([[1.0], [2.0], [3.0], [4.0]]))
    >>> w.ravel().tolist(), pos
    ([4.0, 2.0, 3.0], 1)
    """
    fill, m = window.shape[0], X.shape[0]
    if fill + m < capacity:
        return np.concatenate([window, X]), 0
    out = np.empty((capacity, window.shape[1]))
    out[:fill] = window
    keep = min(m, capacity)  # older rows of a batch longer than the window never land
    rows = (seen + m - keep + np.arange(keep)) % capacity
    out[rows] = X[m - keep :]
    return out, (seen + m) % capacity


def in_order(window: Matrix, position: int) -> Matrix:
    """The window's instances oldest first (a copy when it has wrapped around)."""
    if position == 0:
        return window
    return np.concatenate([window[position:], window[:position]])


class NRFS(InstanceSelector[NRFSParams, NRFSState]):
    """Unsupervised, noise-resistant feature selection over a window of recent instances.

    Parameters
    ----------
    params : NRFSParams
        ``num_features`` (h, required), ``window`` (instances kept),
        ``refresh`` (instances between computations, default ``window``),
        ``min_instances`` (the first computation waits for them),
        ``clusters`` (k; k - 1 spectra), ``representatives`` (a fraction or
        a count), ``neighbours`` (q, features per local subspace),
        ``similarity``, ``sigma``, ``ridge``, ``noise_fraction`` and ``seed``.

    Notes
    -----
    * Labels, if given, are ignored (their count is still checked).
    * When it computes: at the end of every batch during which the count of
      instances seen reached or crossed a multiple of ``refresh``, and at the
      end of the first batch that brings the window to ``min_instances``
      instances if nothing was computed before. A crossing while the window
      holds fewer than ``min_instances`` instances computes nothing (too few to
      compute on). So the batch boundaries matter, as for FSDS.
    * A computation sees the window oldest first, so its result does not
      depend on where the ring buffer happens to wrap.
    * Before the first computation nothing is selected; afterwards the
      selection is that of the last computation, in selection order, with each
      feature's score.
    * The window is dense: window x d x 8 bytes of state (sparse instances are
      expanded), refused above 2^27 values (1 GiB) when the stream starts.

    Examples
    --------
    Two features, a window of 6, a computation once 6 instances are seen:
    feature a separates two groups, b is noise. The first batch of 4 computes
    nothing; the second crosses 6 and computes.

    >>> import numpy as np
    >>> p = NRFSParams(num_features=1, window=6, min_instances=6, clusters=2,
    ...                representatives=2)
    >>> sel = NRFS.start(p, ["a", "b"])
    >>> X = np.array([[0.0, 1.0], [0.1, -1.0], [5.0, 0.5], [5.1, -0.5],
    ...               [0.2, 0.0], [4.9, 0.2]])
    >>> u = sel.learn_instances(X[:4])
    >>> sel.selected(), sel.state.computations
    ((), 0)
    >>> u = sel.learn_instances(X[4:])
    >>> sel.selected(), sel.state.computed_at
    (('a',), 6)

    References
    ----------
    Huang, Yoo, Yu, Qin. Noise Resistant Unsupervised Feature Selection via
    Multi Perspective Correlations. ICDM 2014.
    """

    name: ClassVar[str] = "nrfs"
    score: ClassVar[ScoreKind] = ScoreKind("spectral_coefficient")
    supervised: ClassVar[bool] = False
    # Computations happen at batch ends (docs/algorithms/nrfs.md).
    batch_invariant: ClassVar[bool] = False
    params_type: ClassVar[type[Params]] = NRFSParams
    state_type: ClassVar[type[Any]] = NRFSState
    status_fields: ClassVar[tuple[str, ...]] = ("batches_seen", "computations", "computed_at")

    @classmethod
    def test_params(cls) -> list[dict[str, Any]]:
        # Small and cheap: the contract stream has 40 instances.
        return [
            {"num_features": 3, "window": 40, "min_instances": 20, "refresh": 20},
            {
                "num_features": 2,
                "window": 12,
                "min_instances": 6,
                "refresh": 5,
                "clusters": 2,
                "representatives": 3,
                "neighbours": 2,
                "similarity": "cosine",
                "noise_fraction": 0.2,
            },
        ]

    @classmethod
    def initial_state(cls, params: NRFSParams, feature_names: tuple[str, ...]) -> NRFSState:
        d = len(feature_names)
        if params.num_features > d:
            raise InvalidParameter(
                f"The 'num_features' parameter of NRFS must be at most the number of "
                f"features ({d}). Got {params.num_features!r} instead.",
                parameter="num_features",
            )
        if params.window * d > MAX_WINDOW_VALUES:
            raise InvalidParameter(
                f"The 'window' parameter of NRFS must keep at most {MAX_WINDOW_VALUES} values "
                f"(window x {d} features, 8 bytes each); at most "
                f"{MAX_WINDOW_VALUES // d} instances. Got {params.window!r} instead.",
                parameter="window",
            )
        return NRFSState(feature_names=feature_names, window=np.zeros((0, d)), scores=np.zeros(d))

    # ------------------------------------------------------------------ queries

    def selected_features(self) -> tuple[SelectedFeature, ...]:
        s = self.state
        return tuple(SelectedFeature(s.feature_names[j], float(s.scores[j])) for j in s.selected)

    def selected(self) -> tuple[str, ...]:
        names = self.state.feature_names
        return tuple(names[j] for j in self.state.selected)

    def status(self) -> dict[str, JSON]:
        return {**super().status(), "window_fill": int(self.state.window.shape[0])}

    # ------------------------------------------------------------------ learning

    def due(self, before: int, after: int, fill: int) -> bool:
        """Whether a batch taking the count from ``before`` to ``after`` ends in a computation."""
        p = self.params
        if fill < p.min_instances:
            return False
        every = p.refresh_every
        crossed = after // every > before // every
        return crossed or self.state.computations == 0

    def compute(self) -> tuple[tuple[int, ...], Vector]:
        """One NRFS computation on the current window, oldest instance first."""
        p = self.params
        s = self.state
        result = nrfs(
            in_order(s.window, s.position),
            p.num_features,
            clusters=p.clusters,
            representatives=p.representatives,
            neighbours=p.neighbours,
            similarity="cosine" if p.similarity == "cosine" else "gaussian",
            sigma=p.sigma,
            ridge=p.ridge,
            noise_fraction=p.noise_fraction,
            seed=p.seed,
        )
        return result.selected, result.scores

    def _learn_batch(self, X: Matrix, y: Vector | None) -> InstanceUpdate:
        s = self.state
        m = X.shape[0]
        if m == 0:
            return InstanceUpdate(instances=0, instances_seen=s.instances_seen)
        window, position = push(s.window, s.instances_seen, self.params.window, X)
        seen = s.instances_seen + m
        self.state = replace(
            s,
            window=window,
            position=position,
            instances_seen=seen,
            batches_seen=s.batches_seen + 1,
        )
        changed = False
        if self.due(s.instances_seen, seen, window.shape[0]):
            selected, scores = self.compute()
            changed = selected != s.selected
            self.state = replace(
                self.state,
                selected=selected,
                scores=scores,
                computed_at=seen,
                computations=self.state.computations + 1,
            )
        return InstanceUpdate(instances=m, instances_seen=seen, selection_changed=changed)


__all__ = [
    "MAX_WINDOW",
    "MAX_WINDOW_VALUES",
    "NRFS",
    "FractionOrCount",
    "NRFSParams",
    "NRFSState",
    "in_order",
    "push",
]
