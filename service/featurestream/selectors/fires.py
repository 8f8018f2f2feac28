"""FIRES: stable online feature selection from the uncertainty of a probit model.

docs/algorithms/fires.md. Each feature's probit coefficient is a Gaussian
belief N(mu_j, sigma_j^2); every batch of labelled instances moves mu and sigma
by a gradient step on the batch's log-likelihood (``stats/fires.py``), and a
feature's weight rewards a large |mu_j| and penalises its uncertainty sigma_j:
w_j = (mu_j^2 - penalty_s sigma_j^2) / (2 penalty_r). The m largest weights are
selected.

References
----------
Johannes Haug, Martin Pawelczyk, Klaus Broelemann, Gjergji Kasneci.
"Leveraging Model Inherent Variable Importance for Stable Online Feature
Selection." Proceedings of the 26th ACM SIGKDD Conference on Knowledge
Discovery and Data Mining (KDD), 2020.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, cast

import numpy as np
import numpy.typing as npt

from featurestream.selectors import drift
from featurestream.selectors.base import JSON, InstanceSelector, Matrix, Vector
from featurestream.selectors.batch_labels import signs, typed_labels
from featurestream.selectors.decisions import (
    InstanceUpdate,
    ScoreKind,  # scores
    SelectedFeature,
)
from featurestream.selectors.forgetting import HALF_LIFE, HALF_LIFE_DESCRIPTION, retention
from featurestream.selectors.params import Boolean, Interval, Params, StrOptions
from featurestream.selectors.prequential import no_flags, tally
from featurestream.stats.fires import fires_update, fires_update_ovr, fires_weights, top_m
from featurestream.stats.scaling import standardise_running
from featurestream.stats.sparse import is_sparse

Index = np.ndarray[Any, np.dtype[np.intp]]


@dataclass(frozen=True, kw_only=True)
class FIRESParams(Params):
    """Parameters of FIRES (named as in docs/algorithms/fires.md).

    ``num_features`` has no default: it is required.
    """

    algorithm: ClassVar[str] = "FIRES"
    constraints: ClassVar[dict[str, Any]] = {
        "num_features": Interval(int, 1, None, "left"),
        "mu_init": Interval(float, None, None, "neither"),
        "sigma_init": Interval(float, 0.0, None, "left"),
        "penalty_s": Interval(float, 0.0, None, "left"),
        "penalty_r": Interval(float, 0.0, None, "neither"),
        "lr_mu": Interval(float, 0.0, None, "neither"),
        "lr_sigma": Interval(float, 0.0, None, "left"),
        "epochs": Interval(int, 1, None, "left"),
        "scale_weights": Boolean(),
        "scale": StrOptions(("standard", "none")),
        "half_life": HALF_LIFE,
        **drift.CONSTRAINTS,
    }
    descriptions: ClassVar[dict[str, str]] = {
        "num_features": "m, the number of features selected (all d when m > d)",
        "mu_init": "initial mean of every coefficient",
        "sigma_init": "initial standard deviation of every coefficient (its uncertainty)",
        "penalty_s": "weight of the uncertainty in a feature's weight",
        "penalty_r": "scale of the weights (divides them; irrelevant once they are min-max scaled)",
        "lr_mu": "learning rate of mu",
        "lr_sigma": "learning rate of sigma (0 keeps sigma fixed)",
        "epochs": "passes over each batch",
        "scale_weights": "min-max scale the weights to [0, 1] (the scores reported)",
        "scale": "`standard`: standardise each instance with running means and variances first; "
        "`none`: the values as sent (the published algorithm)",
        "half_life": HALF_LIFE_DESCRIPTION,
        **drift.DESCRIPTIONS,
    }

    num_features: int
    mu_init: float = 0.0
    sigma_init: float = 1.0
    penalty_s: float = 0.01
    penalty_r: float = 0.01
    lr_mu: float = 0.01
    lr_sigma: float = 0.01
    epochs: int = 1
    scale_weights: bool = True
    scale: str = "standard"
    half_life: float | None = None
    drift: str = "none"
    on_drift: str = "log"


@dataclass(frozen=True)
class FIRESState:
    """Everything FIRES knows.

    Attributes
    ----------
    feature_names : the d feature names, in column order.
    mu, sigma : (K, d): one probit model per row. A binary stream has K = 1
        (the model of the positive class); a multi-class stream would keep one
        row per class, one-vs-rest, and the weights take the largest per class.
    scale_mean, scale_M2 : the running mean and sum of squared deviations of
        every feature, (d,), with ``scale: "standard"``; empty otherwise. Their
        count is ``instances_seen``.
    instances_seen, batches_seen : counters; every learn call with at least
        one instance is one batch (the batch boundaries are part of the result).
    predicted, correct, recent : prequential accuracy (``prequential.py``): the
        instances predicted and predicted right, and the last 1,000 outcomes.
    """

    feature_names: tuple[str, ...]
    mu: Matrix
    sigma: Matrix
    scale_mean: Vector
    scale_M2: Vector
    instances_seen: int = 0
    batches_seen: int = 0
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


class FIRES(InstanceSelector[FIRESParams, FIRESState]):
    """Supervised feature selection by the importance and uncertainty of probit coefficients.

    Parameters
    ----------
    params : FIRESParams
        ``num_features`` (m, required), ``mu_init`` and ``sigma_init`` (the
        prior of every coefficient), ``penalty_s`` (weight of the
        uncertainty), ``penalty_r`` (scale of the weights), ``lr_mu`` and
        ``lr_sigma`` (learning rates), ``epochs`` (passes over each batch),
        ``scale_weights`` (min-max scale the weights to [0, 1]), ``scale``
        (``standard``: standardise every instance with running statistics
        first; ``none``: learn from the values as given) and ``half_life``
        (h instances; default none: no forgetting).

    Notes
    -----
    * Labels are binary, in {0, 1} or {-1, +1} (0 means -1); any other label
      refuses the whole batch. A stream created with a ``target_type`` also
      takes string labels, and a multi-class target keeps one model per class
      (one-vs-rest, in sorted order of the labels; a class first seen later
      starts from the prior); a feature's weight is the largest of its K.
    * Every ``learn_instances`` call is one batch: the gradient is a mean over
      the batch, so the batch boundaries are part of the result, as for FSDS.
      An empty batch changes nothing and is not counted.
    * With ``scale: "standard"`` each instance is standardised with the
      running mean and population variance of every feature over the instances
      seen so far, itself included (a feature of variance 0 maps to 0), before
      the batch's update; ``scale: "none"`` is the published algorithm.
    * With a ``half_life`` h, mu and sigma forget (selectors/forgetting.py):
      each instance first moves them toward their initial values, theta =
      lambda theta + (1 - lambda) theta_init with lambda = 2^(-1/h), so a
      batch of b instances applies lambda^b before its gradient step. The
      prediction of each instance (test, then train) uses the model before.
    * Before the first batch nothing is selected; afterwards the selection is
      the m highest weights in descending order, ties to the lower index, each
      with its weight as the score.
    * ``selection_changed`` is True when the selected tuple after the batch
      differs from the one before it.

    Examples
    --------
    Two features, one batch of two instances, ``scale: "none"``:
    x = (1, 0) with y = 1 and x = (0, 1) with y = 0 (that is -1). From mu = 0
    and sigma = 1, each instance has dot = 0, rho = sqrt(2) and t = 0, so
    r = phi(0) / Phi(0) = 0.797885. The mean gradient of mu is
    (r / sqrt(2) / 2, -r / sqrt(2) / 2) = (0.282095, -0.282095); sigma's is 0
    (dot = 0). After lr_mu = 0.01: mu = (0.002821, -0.002821), sigma = (1, 1).
    Both weights are equal (mu^2 alike), so they scale to 0 and the tie goes
    to the lower index.

    >>> import numpy as np
    >>> sel = FIRES.start(FIRESParams(num_features=1, scale="none"), ["a", "b"])
    >>> u = sel.learn_instances(np.eye(2), [1, 0])
    >>> sel.state.mu.round(6).tolist(), sel.state.sigma.tolist()
    ([[0.002821, -0.002821]], [[1.0, 1.0]])
    >>> [(f.name, f.score) for f in sel.selected_features()]
    [('a', 0.0)]

    References
    ----------
    Haug, Pawelczyk, Broelemann, Kasneci. Leveraging Model Inherent Variable
    Importance for Stable Online Feature Selection. KDD 2020.
    """

    name: ClassVar[str] = "fires"
    score: ClassVar[ScoreKind] = ScoreKind("importance")
    # The update is a mean over each batch (docs/algorithms/fires.md).
    batch_invariant: ClassVar[bool] = False
    params_type: ClassVar[type[Params]] = FIRESParams
    state_type: ClassVar[type[Any]] = FIRESState
    status_fields: ClassVar[tuple[str, ...]] = ("batches_seen",)
    accepts_multiclass: ClassVar[bool] = True
    # scipy.sparse batches reach _learn_batch as they are (stats.fires.batch_form).
    accepts_sparse: ClassVar[bool] = True
    # (state, params, selection, weights) of the last _order: see there.
    _order_cache: tuple[FIRESState, FIRESParams, Index, Vector] | None = None

    @classmethod
    def test_params(cls) -> list[dict[str, Any]]:
        return [
            {"num_features": 3},
            {"num_features": 2, "scale": "none", "epochs": 2, "lr_mu": 0.5, "lr_sigma": 0.1},
            {"num_features": 4, "scale_weights": False, "penalty_s": 0.0, "mu_init": 0.1},
            {"num_features": 3, "half_life": 4.0, "mu_init": 0.1, "sigma_init": 0.5},
        ]

    @classmethod
    def initial_state(cls, params: FIRESParams, feature_names: tuple[str, ...]) -> FIRESState:
        d = len(feature_names)
        scaled = params.scale == "standard"
        return FIRESState(
            feature_names=feature_names,
            mu=np.full((1, d), params.mu_init),
            sigma=np.full((1, d), params.sigma_init),
            scale_mean=np.zeros(d if scaled else 0),
            scale_M2=np.zeros(d if scaled else 0),
        )

    # ------------------------------------------------------------------ queries

    def weights(self) -> Vector:
        """Every feature's current weight (the largest over the K models)."""
        p = self.params
        s = self.state
        return fires_weights(
            s.mu,
            s.sigma,
            penalty_s=p.penalty_s,
            penalty_r=p.penalty_r,
            scale_weights=p.scale_weights,
        )

    def _order(self) -> tuple[Index, Vector]:
        # The selection is a function of the State, which a batch replaces by a
        # new object: the last one computed stays valid while self.state is it.
        cached = self._order_cache
        if cached is not None and cached[0] is self.state and cached[1] is self.params:
            return cached[2], cached[3]
        w = self.weights()
        if self.state.batches_seen == 0:
            order = np.zeros(0, dtype=np.intp)
        else:
            order = top_m(w, self.params.num_features)
        self._order_cache = (self.state, self.params, order, w)
        return order, w

    def selected_features(self) -> tuple[SelectedFeature, ...]:
        order, w = self._order()
        names = self.state.feature_names
        return tuple(SelectedFeature(names[i], float(w[i])) for i in order)

    def status(self) -> dict[str, JSON]:
        return {**super().status(), "scale": self.params.scale}

    # ------------------------------------------------------------------ learning

    def _learn_batch(self, X: Matrix, y: Vector | None) -> InstanceUpdate:
        p = self.params
        s = self.state
        # docs/algorithms/fires.md: labels in {0, 1} or {-1, +1}, 0 means -1; else an error.
        # A stream with a target type takes any labels (docs/algorithms.md, "Targets").
        n_b = X.shape[0]
        if n_b == 0:
            return InstanceUpdate(instances=0, instances_seen=s.instances_seen)
        target, labels = typed_labels(self, y)
        mu0, sigma0 = s.mu, s.sigma
        classes = target.get("classes", s.classes)
        # Two classes take the binary rule whatever their labels (docs/algorithms.md,
        # "Targets"); one-vs-rest from the third class on.
        multiclass = target.get("target_type") == "multiclass" and len(classes) >= 3
        if mu0.shape[0] != (len(classes) if multiclass else 1):
            mu0, sigma0 = _grow_models(p, s, classes, multiclass)
        before, _ = self._order()
        mean, M2 = s.scale_mean, s.scale_M2
        if p.scale == "standard":
            # A standardised instance is dense whatever its zeros (docs/algorithms/fires.md).
            if is_sparse(X):
                X = np.asarray(cast(Any, X).toarray(), dtype=np.float64)
            z = standardise_running(s.instances_seen, mean, M2, X)
            X, mean, M2 = z.Z, z.mean, z.M2
        # Test, then train: each instance is predicted by the model before the batch.
        hits = _predicted_right(mu0, X, labels, multiclass)
        if p.half_life is not None:
            # Forgetting (docs/algorithms/fires.md): n_b pulls toward the prior.
            keep = retention(p.half_life, n_b)
            mu0 = keep * mu0 + (1.0 - keep) * p.mu_init
            sigma0 = keep * sigma0 + (1.0 - keep) * p.sigma_init
        if multiclass:
            # One-vs-rest: model k learns class k against the rest (docs/algorithms.md,
            # "Targets"); each model on its own, so the class order changes nothing.
            mu, sigma = fires_update_ovr(
                mu0,
                sigma0,
                X,
                labels.astype(np.int64),
                lr_mu=p.lr_mu,
                lr_sigma=p.lr_sigma,
                epochs=p.epochs,
            )
        else:
            # K = 1 for a binary stream: the model of the positive class.
            mu1, sigma1 = fires_update(
                mu0[0],
                sigma0[0],
                X,
                labels,
                lr_mu=p.lr_mu,
                lr_sigma=p.lr_sigma,
                epochs=p.epochs,
            )
            mu, sigma = mu1[None, :], sigma1[None, :]
        self.state = replace(
            s,
            mu=mu,
            sigma=sigma,
            **target,
            scale_mean=mean,
            scale_M2=M2,
            instances_seen=s.instances_seen + n_b,
            batches_seen=s.batches_seen + 1,
            **tally(s, hits),
        )
        after, _ = self._order()
        return InstanceUpdate(
            instances=n_b,
            instances_seen=self.state.instances_seen,
            selection_changed=not np.array_equal(before, after),
            hits=np.asarray(hits, dtype=np.bool_),
        )


def _predicted_right(mu: Matrix, X: Any, labels: Vector, multiclass: bool) -> Any:
    """Whether each row was predicted right: the sign of its probit mean mu . x for a
    binary stream, the class of the largest mu_k . x for a multi-class one. A tie (a
    margin of exactly 0, or two classes sharing the largest) predicts no class, so
    the count never depends on how the classes are coded."""
    margins = np.asarray(X @ np.asarray(mu).T, dtype=np.float64).reshape(X.shape[0], -1)
    if multiclass:
        top = margins.max(axis=1, keepdims=True)
        alone = (margins == top).sum(axis=1) == 1
        return alone & (np.argmax(margins, axis=1) == np.asarray(labels, dtype=np.int64))
    return np.sign(margins[:, 0]) == np.asarray(labels, dtype=np.float64)


def _grow_models(
    p: FIRESParams, s: FIRESState, classes: tuple[Any, ...], multiclass: bool
) -> tuple[Matrix, Matrix]:
    """The models for ``classes``: (K, d) one-vs-rest, or the (1, d) binary model.

    One model per class, in sorted order of the labels: a class seen for the
    first time starts its model from the prior. A binary model (K = 1, the
    model of the class coded +1) becomes the models of its two classes: itself,
    and its mirror -mu for the class coded -1. A state stored when two classes
    kept one-vs-rest models gives its binary model back the same way.
    """
    d = len(s.feature_names)
    old: dict[Any, tuple[Vector, Vector]] = {}
    if s.mu.shape[0] == 1 and s.first_label is not None:
        # "+ 0.0": the mirror of a zero weight is 0.0, not -0.0.
        old = {c: (_sign(c, s.first_label) * s.mu[0] + 0.0, s.sigma[0]) for c in s.classes}
    elif s.mu.shape[0] == len(s.classes):
        old = {c: (s.mu[k], s.sigma[k]) for k, c in enumerate(s.classes)}
    if not multiclass:
        mu, sigma = np.full((1, d), p.mu_init), np.full((1, d), p.sigma_init)
        positive = [c for c in s.classes if _sign(c, s.first_label) > 0]
        if positive:
            mu[0], sigma[0] = old[positive[0]]
        return mu, sigma
    mu = np.full((len(classes), d), p.mu_init)
    sigma = np.full((len(classes), d), p.sigma_init)
    for k, c in enumerate(classes):
        if c in old:
            mu[k], sigma[k] = old[c]
    return mu, sigma


def _sign(label: Any, first: Any) -> float:
    """The binary rule's code (-1 or +1) of one class (selectors/batch_labels.py, signs)."""
    return float(signs([label], first)[0])


__all__ = ["FIRES", "FIRESParams", "FIRESState"]
