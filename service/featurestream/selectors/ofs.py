"""OFS: Online Feature Selection by a truncated, projected online gradient step.

docs/algorithms/ofs.md, "Exact rules". A linear classifier w over the d features of an
instance stream. Each instance (x, y) is predicted with sign(w . x); when the
margin y (w . x) is at most ``margin``, w takes a gradient step eta y x, is
projected onto the L2 ball of radius 1 / sqrt(lam), and is truncated to its B
entries of largest magnitude. The selected features are the non-zero entries
of w. OFS-P (``mode="partial"``) observes only B features of each instance.

References
----------
Jialei Wang, Peilin Zhao, Steven C. H. Hoi, Rong Jin. "Online Feature
Selection and Its Applications." IEEE Transactions on Knowledge and Data
Engineering 26(3), 2014.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from featurestream.selectors import drift
from featurestream.selectors.base import JSON, InstanceSelector, Vector
from featurestream.selectors.batch_labels import sign_code, typed_labels
from featurestream.selectors.decisions import (
    InstanceUpdate,
    ScoreKind,  # scores
    SelectedFeature,
)
from featurestream.selectors.forgetting import HALF_LIFE, retention
from featurestream.selectors.params import Interval, Params, StrOptions
from featurestream.selectors.prequential import no_flags, tally
from featurestream.stats.sparse import is_sparse

Index = np.ndarray[Any, np.dtype[np.intp]]
_NONE: Vector = np.zeros(0)  # no running maxima: instances not max-abs scaled


@dataclass(frozen=True, kw_only=True)
class OFSParams(Params):
    """Parameters of OFS (named as in docs/algorithms.md, "OFS").

    ``num_features`` has no default: it is required. ``scale`` is ``maxabs``
    (the default: each value divided by its feature's running maximum |x|),
    ``standard`` (running mean and variance) or ``none`` (the published OFS).
    Streams stored before ``scale`` existed learnt from the values as sent, so
    they read back as ``none``.
    """

    algorithm: ClassVar[str] = "OFS"
    constraints: ClassVar[dict[str, Any]] = {
        "num_features": Interval(int, 1, None, "left"),
        "eta": Interval(float, 0.0, None, "neither"),
        "lam": Interval(float, 0.0, None, "neither"),
        "margin": Interval(float, 0.0, None, "left"),
        "decay": Interval(float, 0.0, 1.0, "left"),
        "mode": StrOptions(("full", "partial")),
        "epsilon": Interval(float, 0.0, 1.0, "right"),
        "seed": Interval(int, 0, None, "left"),
        "scale": StrOptions(("maxabs", "standard", "none")),
        "half_life": HALF_LIFE,
        **drift.CONSTRAINTS,
    }
    legacy: ClassVar[dict[str, Any]] = {"scale": "none"}
    descriptions: ClassVar[dict[str, str]] = {
        "num_features": "the budget B of selected features",
        "eta": "step size",
        "lam": "regularisation: weights stay within radius 1/sqrt(lam)",
        "margin": "update when y (w . x) <= margin",
        "decay": "weight decay per instance (margin 0 with decay lam x eta is the survey's "
        "variant)",
        "mode": "`partial`: observe only B features of each instance (OFS-P)",
        "epsilon": "partial mode: probability of exploring B random features",
        "seed": "partial mode: seed of the exploration draws",
        "scale": "`maxabs`: each value is divided by its feature's running maximum |x| "
        "before OFS predicts and learns (sparse instances stay sparse); `standard`: the "
        "running mean and variance of every feature; `none`: values as sent (the published "
        "OFS)",
        "half_life": "forgetting: w is multiplied by 2^(-1/half_life) per instance, so an "
        "instance's step weighs half after that many newer instances; null: no forgetting",
        **drift.DESCRIPTIONS,
    }

    num_features: int
    eta: float = 0.2
    lam: float = 0.01
    margin: float = 1.0
    decay: float = 0.0
    mode: str = "full"
    epsilon: float = 0.2
    seed: int = 0
    scale: str = "maxabs"
    half_life: float | None = None
    drift: str = "none"
    on_drift: str = "log"

    @property
    def keep(self) -> float:
        """What w is multiplied by per instance: (1 - decay) 2^(-1/half_life)."""
        return (1.0 - self.decay) * retention(self.half_life, 1)


@dataclass(frozen=True)
class OFSState:
    """Everything OFS knows.

    Attributes
    ----------
    feature_names : the d feature names, in column order.
    w : the weight vector (d,), at most ``num_features`` non-zeros.
    instances_seen : instances learned so far (also the OFS-P draw counter, and
        the count of the running statistics).
    mistakes : instances whose prediction sign(w . x) disagreed with y.
    scale_mean, scale_M2 : the running mean and sum of squared deviations of
        every feature, (d,), with ``scale: "standard"``; empty otherwise (and in
        states stored before scaling existed).
    predicted, correct, recent : prequential accuracy (``prequential.py``): the
        instances predicted and predicted right, and the last 1,000 outcomes.
    """

    feature_names: tuple[str, ...]
    w: Vector
    instances_seen: int = 0
    mistakes: int = 0
    scale_mean: Vector = field(default_factory=lambda: np.zeros(0))
    scale_M2: Vector = field(default_factory=lambda: np.zeros(0))
    scale_maxabs: Vector = field(default_factory=lambda: np.zeros(0))
    # The declared or resolved target_type ("" for a stream created before target
    # types: numeric binary labels), the classes seen (sorted) and the first label
    # seen (selectors/batch_labels.py, instance_labels_typed).
    target_type: str = ""
    classes: tuple[Any, ...] = ()
    first_label: Any = None
    predicted: int = 0
    correct: int = 0
    recent: npt.NDArray[np.bool_] = field(default_factory=no_flags)
    # The drift watch (selectors/drift.py): empty without one.
    watch: tuple[Any, ...] = ()


def truncate(v: Vector, B: int) -> None:
    """Keep the B entries of largest ``|v|`` in place and zero the rest.

    Ties at the boundary are kept by lower index (docs/algorithms/ofs.md, "Exact rules"). The B-th
    largest magnitude comes from a partial selection (``np.partition``, linear
    time), not a full sort, so this stays cheap for d in the hundreds of
    thousands.

    >>> v = np.array([0.5, -1.5, 1.5, 0.0])
    >>> truncate(v, 1)
    >>> v
    array([ 0. , -1.5,  0. ,  0. ])
    """
    truncate_support(v, np.flatnonzero(v), B)


def truncate_support(v: Vector, support: Index, B: int) -> Index:
    """``truncate`` given the sorted indices of v's non-zeros; returns the kept ones.

    A small support is looked at alone (O(|support|), not O(d)); a large one
    (dense instances) through whole-vector operations, cheaper than gathers and
    scatters there. Both keep the same entries.

    >>> v = np.array([0.0, 2.0, -3.0, 2.0, 0.0])
    >>> truncate_support(v, np.array([1, 2, 3]), 2).tolist(), v.tolist()
    ([1, 2], [0.0, 2.0, -3.0, 0.0, 0.0])
    """
    if support.shape[0] <= B:
        # Nothing to drop: at most B entries are non-zero already.
        return support
    if 4 * support.shape[0] > v.shape[0]:
        kept = _largest(np.abs(v), B)  # zeros are never among the B largest
        np.copyto(v, 0.0, where=~kept)
        kept_at: Index = kept.nonzero()[0]
        return kept_at
    keep = _largest(np.abs(v[support]), B)
    v[support[~keep]] = 0.0
    kept_support: Index = support[keep]
    return kept_support


def _largest(a: Vector, B: int) -> npt.NDArray[np.bool_]:
    """Mask of the B largest entries of ``a`` (B < len(a)), ties kept by lower index."""
    n = a.shape[0]
    part = a.copy()
    part.partition(n - B)  # (methods, not np.* wrappers: this runs once per update)
    thr = part[n - B]  # the B-th largest
    keep: npt.NDArray[np.bool_] = a >= thr  # the B largest, plus any further ties at thr
    extra = int(keep.sum()) - B
    if extra > 0:
        # Entries equal to thr fill the places left by lowest index: drop the last ties.
        ties = (a == thr).nonzero()[0]
        keep[ties[ties.shape[0] - extra :]] = False
    return keep


class OFS(InstanceSelector[OFSParams, OFSState]):
    """Online feature selection with a budget of B non-zero weights.

    Parameters
    ----------
    params : OFSParams
        ``num_features`` (the budget B, required), ``eta`` (step size),
        ``lam`` (the weights stay in the ball of radius 1/sqrt(lam)),
        ``margin``, ``decay``, ``mode`` (full or partial), ``epsilon`` and
        ``seed`` (partial mode), ``scale`` (maxabs, standard or none).

    Notes
    -----
    * With ``scale: "maxabs"`` (the default) each value x_j is divided by
      the largest |x_j| of the instances seen so far, itself included (0 stays
      0), so every feature is within [-1, 1] and a feature measured in
      thousands does not outweigh one measured in fractions; zeros stay zeros,
      so a sparse instance costs O(nnz). With ``scale: "standard"`` each
      instance is standardised with the running mean and population variance
      of every feature (Welford's update; a feature of variance 0 maps to 0),
      which makes a sparse instance dense. ``scale: "none"`` is the published
      OFS, which learns from the values as sent.
    * sign(0) is +1: the prediction is +1 when w . x >= 0, and a mistake is
      counted when it differs from y (so the first instance of a fresh stream,
      with w = 0, is a mistake exactly when its label is -1).
    * Every sum (w . x, ||w||^2) adds its terms one after another in index
      order, over the entries of x or the non-zeros of w, and each instance's
      update uses the previous w, so a frame of m instances gives bit for bit
      the same w as m frames of one instance, and a sparse instance
      (scipy.sparse rows) the same as its dense form, at a cost of
      O(B + nnz(x)) instead of O(d). The weights agree with other orders of
      summation to rounding, and the decisions wherever w . x is not within
      rounding of 0 or of the margin.
    * Partial mode (OFS-P): instance t (counted from 0 over the whole stream)
      draws from ``numpy.random.default_rng([seed, t])``: first a uniform
      number u, and when u < epsilon the min(B, d) features to observe, drawn
      uniformly without replacement; otherwise the features with w_i != 0 are
      observed. As in the paper, the prediction and the margin test use the
      observed instance (unobserved entries 0), and the gradient step uses
      the observed entries divided by (B/d) epsilon + 1[w_i != 0](1 - epsilon),
      with B capped at d.
    * ``selection_changed`` is True when the selected tuple (names ordered by
      |w|) after the batch differs from the one before it.

    Examples
    --------
    Three features, budget B = 2, eta = 0.5, the values as sent
    (``scale="none"``). First (x, y) = ([1, 0, 2], 1):
    w = 0 predicts +1 (correct), the margin 0 <= 1 triggers the step
    w = 0.5 x = [0.5, 0, 1] (norm 1.118 < 1/sqrt(0.01) = 10, no projection).
    Second ([0, 3, -1], 0 -> -1): w . x = -1 predicts -1 (correct); the margin
    1 <= 1 triggers w = [0.5, 0, 1] - 0.5 [0, 3, -1] = [0.5, -1.5, 1.5], and the
    truncation to 2 entries drops 0.5. The tie |-1.5| = |1.5| orders by index.

    >>> import numpy as np
    >>> sel = OFS.start(OFSParams(num_features=2, eta=0.5, scale="none"), ["a", "b", "c"])
    >>> u = sel.learn_instances([[1.0, 0.0, 2.0], [0.0, 3.0, -1.0]], [1, 0])
    >>> u.predictions, u.mistakes
    ((1, -1), 0)
    >>> sel.state.w
    array([ 0. , -1.5,  1.5])
    >>> [(f.name, f.score) for f in sel.selected_features()]
    [('b', -1.5), ('c', 1.5)]

    With the default ``scale="maxabs"`` the values 2 and 4 map to 2 / 2 = 1
    and 4 / 4 = 1: the steps give w = 0.2, then (w . x = 0.2 <= 1) 0.4.

    >>> sel = OFS.start(OFSParams(num_features=1), ["a"])
    >>> u = sel.learn_instances([[2.0], [4.0]], [1, 1])
    >>> sel.state.w, sel.state.scale_maxabs
    (array([0.4]), array([4.]))

    With ``scale="standard"`` the first instance maps to 0 (no variance yet),
    and the second of a feature that took the values 1 and 3 maps to
    (3 - 2) / 1 = 1:

    >>> sel = OFS.start(OFSParams(num_features=1, scale="standard"), ["a"])
    >>> u = sel.learn_instances([[1.0], [3.0]], [1, 1])
    >>> sel.state.w, sel.state.scale_mean, sel.state.scale_M2
    (array([0.2]), array([2.]), array([2.]))

    References
    ----------
    Wang, Zhao, Hoi, Jin. Online Feature Selection and Its Applications. IEEE
    TKDE 26(3), 2014.
    """

    name: ClassVar[str] = "ofs"
    score: ClassVar[ScoreKind] = ScoreKind("weight", by_magnitude=True)
    accepts_sparse: ClassVar[bool] = True
    params_type: ClassVar[type[Params]] = OFSParams
    state_type: ClassVar[type[Any]] = OFSState
    status_fields: ClassVar[tuple[str, ...]] = ("mistakes",)
    # The w the selected order was last computed from, and that order (``_order``).
    _order_memo: tuple[Vector, npt.NDArray[np.intp]] | None = None

    @classmethod
    def test_params(cls) -> list[dict[str, Any]]:
        return [
            {"num_features": 2},
            {"num_features": 1, "eta": 0.5, "lam": 1.0, "scale": "none"},
            {"num_features": 2, "margin": 0.0, "decay": 0.002},
            {"num_features": 2, "mode": "partial", "epsilon": 0.5, "seed": 7},
            {"num_features": 2, "mode": "partial", "epsilon": 0.5, "scale": "none"},
            {"num_features": 2, "half_life": 20.0},
            {"num_features": 2, "scale": "standard"},
        ]

    @classmethod
    def initial_state(cls, params: OFSParams, feature_names: tuple[str, ...]) -> OFSState:
        d = len(feature_names)
        scaled = params.scale == "standard"
        return OFSState(
            feature_names=feature_names,
            w=np.zeros(d),
            scale_mean=np.zeros(d if scaled else 0),
            scale_M2=np.zeros(d if scaled else 0),
            scale_maxabs=np.zeros(d if params.scale == "maxabs" else 0),
        )

    # ------------------------------------------------------------------ queries

    def selected_features(self) -> tuple[SelectedFeature, ...]:
        w = self.state.w
        names = self.state.feature_names
        return tuple(SelectedFeature(names[i], float(w[i])) for i in self._order())

    def selected(self) -> tuple[str, ...]:
        # Asked once per WebSocket frame: names straight from the order, no objects.
        order = self._order()
        if order.shape[0] == 0:
            return ()
        picked = operator.itemgetter(*order.tolist())(self.state.feature_names)
        return picked if isinstance(picked, tuple) else (picked,)

    def status(self) -> dict[str, JSON]:
        return {
            **super().status(),
            "nonzero_weights": int(np.count_nonzero(self.state.w)),
            "mode": self.params.mode,
            "scale": self.params.scale,
        }

    def _order(self) -> npt.NDArray[np.intp]:
        """The selected indices in order (``_selected_order``) of the current w.

        Asked several times per frame (before and after learning, for the
        answer and for the log); kept with the w it was computed from, which no
        one changes in place (states are immutable values).
        """
        w = self.state.w
        memo = self._order_memo
        if memo is not None and memo[0] is w:
            return memo[1]
        order = _selected_order(w)
        self._order_memo = (w, order)
        return order

    # ------------------------------------------------------------------ learning

    def _learn_batch(self, X: Any, y: Vector | None) -> InstanceUpdate:
        # Imported here, not at the top: numba takes a while to import, and most
        # users of featurestream.selectors never learn an OFS stream.
        from featurestream.selectors import _ofs_kernel

        p = self.params
        s = self.state
        # docs/algorithms/ofs.md, "Class targets": any two labels, the lower coded -1; a
        # stream stored before target types keeps {0, 1} or {-1, +1}, 0 meaning -1.
        target, labels = typed_labels(self, y, any_two=True)
        before = self._order()
        w = s.w.copy()  # the private copy the kernel updates in place
        if _flips(s.classes, target.get("classes", s.classes)):
            w = 0.0 - w  # learnt with the sign its class turns out not to have (+0.0 stays)
        # The per-instance loop is compiled (_ofs_kernel): each update needs the
        # previous w, so there is nothing to vectorise across instances.
        sparse = is_sparse(X)
        mean, M2, maxabs = s.scale_mean, s.scale_M2, s.scale_maxabs
        if p.scale == "standard":
            # Standardised first (docs/algorithms/ofs.md, "Scaling"), a bounded chunk of
            # rows at a time; the statistics are private copies, updated row by row.
            mean, M2 = mean.copy(), M2.copy()
            parts: list[npt.NDArray[np.int64]] = []
            mistakes = 0
            chunks = _ofs_kernel.standardised_chunks(
                X, sparse=sparse, count=s.instances_seen, mean=mean, M2=M2
            )
            for lo, Z in chunks:
                hi = lo + Z.shape[0]
                part, k = self._kernel(w, Z, labels[lo:hi], sparse=False, t0=s.instances_seen + lo)
                parts.append(part)
                mistakes += k
            preds = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        else:
            maxabs = maxabs.copy()  # empty unless scale is maxabs; updated row by row
            preds, mistakes = self._kernel(
                w, X, labels, sparse=sparse, t0=s.instances_seen, maxabs=maxabs
            )
        m = X.shape[0]
        after = _selected_order(w)
        hits = preds == np.asarray(labels)[: preds.shape[0]]
        self.state = replace(
            s,
            w=w,
            instances_seen=s.instances_seen + m,
            mistakes=s.mistakes + mistakes,
            scale_mean=mean,
            scale_M2=M2,
            scale_maxabs=maxabs,
            **target,
            # Each prediction was made before the step that learnt its instance.
            **tally(s, hits),
        )
        self._order_memo = (w, after)
        return InstanceUpdate(
            instances=m,
            instances_seen=s.instances_seen + m,
            # The published OFS predicts +1 at a tie.
            predictions=tuple(np.where(preds == 0, 1, preds).tolist()),
            mistakes=mistakes,
            selection_changed=not np.array_equal(before, after),
            hits=hits,
        )

    def _kernel(
        self, w: Vector, X: Any, labels: Vector, *, sparse: bool, t0: int, maxabs: Vector = _NONE
    ) -> tuple[npt.NDArray[np.int64], int]:
        """Steps 1-2 over the rows of X (instances t0, t0 + 1, ...), w updated in place."""
        from featurestream.selectors import _ofs_kernel

        p = self.params
        partial = (p.epsilon, p.seed, t0) if p.mode == "partial" else None
        return _ofs_kernel.learn(
            w, X, labels, sparse=sparse, B=p.num_features, eta=p.eta, lam=p.lam,
            margin=p.margin, keep=p.keep, maxabs=maxabs, partial=partial,
        )  # fmt: skip


def _flips(before: tuple[Any, ...], after: tuple[Any, ...]) -> bool:
    """Whether the one class seen before codes otherwise among the classes seen after."""
    return len(before) == 1 and sign_code(before[0], before) != sign_code(before[0], after)


def _selected_order(w: Vector) -> np.ndarray[Any, np.dtype[np.intp]]:
    """Indices of the non-zero entries of w by |w| descending, ties by lower index."""
    nz = np.flatnonzero(w)
    return nz[np.argsort(-np.abs(w[nz]), kind="stable")]


def warm_kernels() -> None:
    """Load OFS's compiled kernels for every kind of batch a stream can receive.

    Numba specialises a kernel per argument type, and a batch read straight off
    a request or a WebSocket frame is a read-only array (a view of the bytes
    received), which is a type of its own; loading each specialisation from the
    on-disk cache (or compiling it, where there is none) takes a noticeable
    fraction of a second. The server calls this in a background thread at
    start-up, so that the first batches of its streams do not wait for it.
    Learning on throw-away selectors changes nothing else.
    """
    import scipy.sparse

    X = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, -1.0]])
    y = np.array([1.0, -1.0])
    frozen = X.copy()
    frozen.flags.writeable = False
    csr = scipy.sparse.csr_matrix(X)
    frozen_csr = scipy.sparse.csr_matrix(X)
    for part in (frozen_csr.data, frozen_csr.indices, frozen_csr.indptr):
        part.flags.writeable = False
    for mode in ("full", "partial"):
        for scale in ("none", "standard", "maxabs"):
            params = OFSParams.from_mapping({"num_features": 2, "mode": mode, "scale": scale})
            for batch in (X, frozen, csr, frozen_csr):
                OFS.start(params, ["a", "b", "c"]).learn_instances(batch, y)


__all__ = ["OFS", "OFSParams", "OFSState", "truncate", "warm_kernels"]
