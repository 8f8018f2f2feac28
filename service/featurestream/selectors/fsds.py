"""FSDS: unsupervised Feature Selection on Data Streams with a Frequent Directions sketch.

docs/algorithms/fsds.md, "Exact rules". The stream's instances are summarised by a Frequent
Directions sketch B (d x l, one row per feature) whose B B^T approximates
X^T X. After each batch the features are scored by their largest (ridge
regularised) loading on the top k left singular vectors of the sketch, and the
m highest scores are selected. No labels are needed.

References
----------
Hao Huang, Shinjae Yoo, Shiva Prasad Kasiviswanathan. "Unsupervised Feature
Selection on Data Streams." Proceedings of the 24th ACM International
Conference on Information and Knowledge Management (CIKM), 2015.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import scipy.linalg

from featurestream.errors import NumericallyUnstable
from featurestream.selectors import drift
from featurestream.selectors.base import JSON, InstanceSelector, Matrix, Vector
from featurestream.selectors.decisions import (
    InstanceUpdate,
    ScoreKind,  # scores
    SelectedFeature,
)
from featurestream.selectors.forgetting import (
    HALF_LIFE,
    HALF_LIFE_DESCRIPTION,
    retention,
    row_weights,
)
from featurestream.selectors.params import Interval, NoneOr, Params


@dataclass(frozen=True, kw_only=True)
class FSDSParams(Params):
    """Parameters of FSDS (named as in docs/algorithms.md, "FSDS").

    ``num_features`` has no default: it is required. ``sketch_size`` None
    means ceil(sqrt(d)), resolved when the stream starts and kept in the
    State; ``ridge`` None means 8 s'_k (see the class notes).
    """

    algorithm: ClassVar[str] = "FSDS"
    constraints: ClassVar[dict[str, Any]] = {
        "num_features": Interval(int, 1, None, "left"),
        "sketch_size": NoneOr(Interval(int, 1, None, "left")),
        "k": Interval(int, 1, None, "left"),
        "ridge": NoneOr(Interval(float, 0.0, None, "left")),
        "half_life": HALF_LIFE,
        **drift.CONSTRAINTS,
    }
    descriptions: ClassVar[dict[str, str]] = {
        "num_features": "m, the number of features selected",
        "sketch_size": "l, rows of the sketch; null means ceil(sqrt(d))",
        "k": "singular vectors used for the scores",
        "ridge": "ridge term of the scores; null means 8 times the k-th singular value",
        "half_life": HALF_LIFE_DESCRIPTION,
        **drift.DESCRIPTIONS,
    }

    num_features: int
    sketch_size: int | None = None
    k: int = 2
    ridge: float | None = None
    half_life: float | None = None
    drift: str = "none"
    on_drift: str = "log"


@dataclass(frozen=True)
class FSDSState:
    """Everything FSDS knows.

    Attributes
    ----------
    feature_names : the d feature names, in column order.
    sketch_size : l, resolved at start (ceil(sqrt(d)) when the parameter is None).
    sketch : the Frequent Directions sketch B, (d, c) with c <= l columns
        (c = 0 before the first batch).
    scores : the feature scores (d,) computed after the last batch.
    instances_seen, batches_seen : counters; every learn call is one batch.
    """

    feature_names: tuple[str, ...]
    sketch_size: int
    sketch: Matrix
    scores: Vector
    instances_seen: int = 0
    batches_seen: int = 0
    # The drift watch (selectors/drift.py): empty without one.
    watch: tuple[Any, ...] = ()


# Above this magnitude (2^400, about 2.6e120) the squares of singular values could
# overflow float64 (they do past 1.3e154): such data is computed on scaled by a power
# of two, which leaves U and the ratios exact. Below it nothing is scaled, so ordinary
# data gives bit for bit the results of the plain formulas.
SAFE_MAGNITUDE = 2.0**400


# Columns per panel of the blocked QR (``_tall_svd``); fewer when C has fewer.
_QR_BLOCK = 32


def _power_of_two(x: float) -> float:
    """The largest power of two 2^e <= x (x > 0 finite): dividing by it is exact."""
    return math.ldexp(1.0, math.frexp(x)[1] - 1)


def sketch_step(B: Matrix, Xt: Matrix, l: int) -> tuple[Matrix, Vector, Vector]:
    """One Frequent Directions step on a batch; returns ``(B', U, s')``.

    C = [B, Xt^T], thin SVD C = U diag(s) V^T, keep the first l triplets,
    shrink by delta = s_l^2 (0 when fewer than l singular values exist) and
    return B' = U_l diag(s'), U_l and s' = sqrt(max(s^2 - delta, 0)).

    A C with entries beyond ``SAFE_MAGNITUDE`` is scaled by a power of two c
    first, and s' scaled back (s'(C) = c s'(C / c)), so that s^2 cannot
    overflow; a C holding NaN or an infinity is never passed to LAPACK (an SVD
    of it may not converge): NumericallyUnstable.

    >>> B, U, s = sketch_step(np.zeros((3, 0)), np.array([[3.0, 0, 0], [0, 4.0, 0]]), 3)
    >>> s  # two singular values < l = 3: no shrink
    array([4., 3.])
    >>> B, U, s = sketch_step(np.zeros((3, 0)), np.array([[3e300, 0, 0], [0, 4e300, 0]]), 3)
    >>> s
    array([4.e+300, 3.e+300])
    """
    C = np.concatenate([B, Xt.T], axis=1)
    # max and min propagate NaN; np.maximum keeps it.
    peak = float(np.maximum(C.max(), -C.min())) if C.size else 0.0
    if not math.isfinite(peak):
        raise NumericallyUnstable("The FSDS sketch holds NaN or infinite values.")
    scale = 1.0
    if peak > SAFE_MAGNITUDE:
        scale = _power_of_two(peak)
        C = C / scale
    try:
        if C.shape[0] > C.shape[1]:
            U_l, s = _tall_svd(C, l)
        else:
            U, s, _ = np.linalg.svd(C, full_matrices=False)
            U_l = np.ascontiguousarray(U[:, : min(l, s.shape[0])])
    except np.linalg.LinAlgError as exc:
        raise NumericallyUnstable(f"The SVD of the FSDS sketch failed: {exc}.") from exc
    r = s.shape[0]
    keep = min(l, r)
    # docs/algorithms/fsds.md, step 3: delta = s_l^2, or 0 when fewer than l values exist.
    delta = float(s[l - 1]) ** 2 if r >= l else 0.0
    # max(., 0): the l-th value and any equal to it shrink to exactly zero.
    s_shr = np.sqrt(np.maximum(s[:keep] ** 2 - delta, 0.0))
    if scale != 1.0:
        # Beyond float64 this overflows to inf: the engine refuses such a state.
        with np.errstate(over="ignore"):
            s_shr = s_shr * scale
    return U_l * s_shr, U_l, s_shr


def _tall_svd(C: Matrix, l: int) -> tuple[Matrix, Vector]:
    """The first l left singular vectors and all singular values of a tall C (d > columns).

    A Householder QR of C, the SVD of the small square R, and U_l = Q U_R[:, :l]
    by applying the reflectors to those l columns: Q itself is never formed,
    nor the d x (l + n_t) product, which was most of the step's time. The QR
    is LAPACK's blocked, compact-WY one (``dgeqrt``, panels of
    ``_QR_BLOCK`` columns, applied with ``dgemqrt``): the same reflectors as
    ``dgeqrf`` and ``dormqr``, to rounding, in half the time, since OpenBLAS's
    ``dgeqrf`` works a column at a time at this size. The singular values are
    those of R, exactly as from an explicit Q; U_l agrees with Q @ U_R to
    rounding (about 1e-16).

    >>> C = np.array([[3.0, 0.0], [0.0, 4.0], [0.0, 0.0]])
    >>> U, s = _tall_svd(C, 1)
    >>> s, np.abs(U).round(12).ravel().tolist()
    (array([4., 3.]), [0.0, 1.0, 0.0])
    """
    d, m = C.shape
    qr, T, info = scipy.linalg.lapack.dgeqrt(min(_QR_BLOCK, m), C)
    if info != 0:
        raise np.linalg.LinAlgError(f"dgeqrt returned {info}")
    U_R, s, _ = np.linalg.svd(np.triu(qr[:m]))
    keep = min(l, m)
    head = np.zeros((d, keep), order="F")
    head[:m] = U_R[:, :keep]
    U_l, info = scipy.linalg.lapack.dgemqrt(qr, T, head, side="L", trans="N")
    if info != 0:
        raise np.linalg.LinAlgError(f"dgemqrt returned {info}")
    return np.ascontiguousarray(U_l), s


def fsds_scores(U: Matrix, s: Vector, k: int, ridge: float | None) -> Vector:
    """score_j = max_i |W[j, i]| with W = U_k diag(s_k / (s_k^2 + a)), a = ridge or 8 s_k.

    With fewer than k singular values, the k available are used and a is 8
    times the last of them. A ratio 0 / 0 (s_i = 0 and a = 0) counts as 0.

    Singular values beyond ``SAFE_MAGNITUDE`` are scaled by a power of two c:
    s / (s^2 + a) = (t / (t^2 + a / c^2)) / c with t = s / c, so s^2 cannot
    overflow (and the scores, about 1 / s, stay representable).

    >>> fsds_scores(np.eye(2), np.array([2.0, 1.0]), 2, 0.0)
    array([0.5, 1. ])
    >>> fsds_scores(np.eye(2), np.array([2e300, 1e300]), 2, 0.0)
    array([5.e-301, 1.e-300])
    """
    d = U.shape[0]
    kk = min(k, s.shape[0])
    if kk == 0:
        return np.zeros(d)
    s_k = s[:kk]
    top = float(s_k.max())
    if top > SAFE_MAGNITUDE:
        c = _power_of_two(top)
        t = s_k / c
        a_c = 8.0 * float(t[-1]) / c if ridge is None else float(ridge) / c / c
        den = t * t + a_c
        ratio = np.divide(t, den, out=np.zeros(kk), where=den > 0.0) / c
    else:
        a = 8.0 * float(s_k[-1]) if ridge is None else float(ridge)
        den = s_k * s_k + a
        # docs/algorithms/fsds.md, step 4: undefined ratios count as 0.
        ratio = np.divide(s_k, den, out=np.zeros(kk), where=den > 0.0)
    W = U[:, :kk] * ratio
    return np.asarray(np.abs(W).max(axis=1), dtype=np.float64)


class FSDS(InstanceSelector[FSDSParams, FSDSState]):
    """Unsupervised feature selection over an instance stream, by sketching.

    Parameters
    ----------
    params : FSDSParams
        ``num_features`` (m, required), ``sketch_size`` (l, default
        ceil(sqrt(d))), ``k`` (singular vectors used), ``ridge`` (default
        8 s'_k), ``half_life`` (h instances; default none: no forgetting).

    Notes
    -----
    * Every ``learn_instances`` call is one batch X_t: the batch boundaries
      are the client's and are part of the result (docs/algorithms/fsds.md, "Exact rules").
      Labels, if given, are ignored. An empty frame (0 instances) changes
      nothing and is not counted as a batch.
    * Singular vectors are defined up to sign; neither B B^T nor the scores
      (absolute values) depend on the sign the SVD returns.
    * When fewer than k singular values exist (fewer than k instances seen,
      or l < k), the scores use those that exist, and the default ridge is 8
      times the last of them.
    * Before the first batch nothing is selected; afterwards the selection is
      the m highest scores (ties: lower index), zeros included.
    * With a ``half_life`` h the sketch forgets (selectors/forgetting.py): with
      lambda = 2^(-1/h), a batch of b instances scales the sketch by
      sqrt(lambda^b) and its row i by sqrt(lambda^(b - 1 - i)) before the
      step, so B B^T sketches sum over instances of lambda^age x x^T, as b
      single instances would.
    * ``selection_changed`` is True when the selected tuple after the batch
      differs from the one before it.

    Examples
    --------
    Three features, l = 2 and one batch of three instances with orthogonal
    columns: C = diag(3, 4, 1) has s = (4, 3, 1); keeping l = 2 and shrinking
    by delta = 3^2 leaves s' = (sqrt(7), 0), so B B^T = diag(0, 7, 0). With
    k = 2 and ridge 8 s'_2 = 0, feature b scores sqrt(7) / 7 = 0.378 and the
    0 / 0 ratio of the second direction counts as 0.

    >>> import numpy as np
    >>> sel = FSDS.start(FSDSParams(num_features=2, sketch_size=2), ["a", "b", "c"])
    >>> u = sel.learn_instances(np.diag([3.0, 4.0, 1.0]))
    >>> B = sel.state.sketch
    >>> (B @ B.T).round(12) + 0.0
    array([[0., 0., 0.],
           [0., 7., 0.],
           [0., 0., 0.]])
    >>> [(f.name, round(f.score, 4)) for f in sel.selected_features()]
    [('b', 0.378), ('a', 0.0)]

    References
    ----------
    Huang, Yoo, Kasiviswanathan. Unsupervised Feature Selection on Data
    Streams. CIKM 2015.
    """

    name: ClassVar[str] = "fsds"
    score: ClassVar[ScoreKind] = ScoreKind("sketch_weight")
    supervised: ClassVar[bool] = False
    # The sketch depends on the client's batch boundaries (docs/algorithms/fsds.md, "Exact rules").
    batch_invariant: ClassVar[bool] = False
    params_type: ClassVar[type[Params]] = FSDSParams
    state_type: ClassVar[type[Any]] = FSDSState
    status_fields: ClassVar[tuple[str, ...]] = ("batches_seen", "sketch_size")

    @classmethod
    def test_params(cls) -> list[dict[str, Any]]:
        return [
            {"num_features": 2},
            {"num_features": 2, "sketch_size": 2, "k": 1},
            {"num_features": 3, "sketch_size": 3, "k": 3, "ridge": 0.5},
            {"num_features": 2, "sketch_size": 3, "half_life": 5.0},
        ]

    @classmethod
    def initial_state(cls, params: FSDSParams, feature_names: tuple[str, ...]) -> FSDSState:
        d = len(feature_names)
        l = params.sketch_size if params.sketch_size is not None else math.isqrt(d - 1) + 1
        return FSDSState(
            feature_names=feature_names,
            sketch_size=int(l),
            sketch=np.zeros((d, 0)),
            scores=np.zeros(d),
        )

    # ------------------------------------------------------------------ queries

    def selected_features(self) -> tuple[SelectedFeature, ...]:
        s = self.state
        return tuple(
            SelectedFeature(s.feature_names[i], float(s.scores[i])) for i in self._order(s)
        )

    def _order(self, s: FSDSState) -> np.ndarray[Any, np.dtype[np.intp]]:
        if s.batches_seen == 0:
            return np.zeros(0, dtype=np.intp)
        m = self.params.num_features
        # Stable sort of -score: ties keep the lower index first.
        return np.argsort(-s.scores, kind="stable")[:m]

    def status(self) -> dict[str, JSON]:
        return {**super().status(), "sketch_columns": int(self.state.sketch.shape[1])}

    # ------------------------------------------------------------------ learning

    def _learn_batch(self, X: Matrix, y: Vector | None) -> InstanceUpdate:
        s = self.state
        n_t = X.shape[0]
        if n_t == 0:
            return InstanceUpdate(instances=0, instances_seen=s.instances_seen)
        before = self._order(s)
        B = s.sketch
        h = self.params.half_life
        if h is not None:
            # Forgetting (docs/algorithms/fsds.md): n_t single steps of lambda on B B^T.
            B = B * math.sqrt(retention(h, n_t))
            X = X * np.sqrt(row_weights(h, n_t))[:, None]
        B, U, s_shr = sketch_step(B, X, s.sketch_size)
        scores = fsds_scores(U, s_shr, self.params.k, self.params.ridge)
        self.state = replace(
            s,
            sketch=B,
            scores=scores,
            instances_seen=s.instances_seen + n_t,
            batches_seen=s.batches_seen + 1,
        )
        return InstanceUpdate(
            instances=n_t,
            instances_seen=self.state.instances_seen,
            selection_changed=not np.array_equal(before, self._order(self.state)),
        )


__all__ = ["FSDS", "SAFE_MAGNITUDE", "FSDSParams", "FSDSState", "fsds_scores", "sketch_step"]
