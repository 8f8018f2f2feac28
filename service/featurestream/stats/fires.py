"""FIRES with a probit base model: the parameter update, the weights and the selection.

docs/algorithms/fires.md, "Exact rules". The model keeps, for each of the d features, a Gaussian
belief N(mu_j, sigma_j^2) about the probit coefficient. For a batch (X_b, y_b)
of n_b instances with y in {-1, +1}, ``epochs`` times:

1. dot = X_b mu;  rho = sqrt(1 + (X_b * X_b)(sigma * sigma));  t = y dot / rho.
2. r = phi(t) / Phi(t);
   grad_mu = mean_i r_i y_i / rho_i x_i;
   grad_sigma = mean_i r_i (-y_i / rho_i^3) x_i^2 sigma dot_i.
3. mu += lr_mu grad_mu;  sigma += lr_sigma grad_sigma;  sigma = max(sigma, 0).

Weights: w = (mu^2 - penalty_s sigma^2) / (2 penalty_r), min-max scaled to
[0, 1] when ``scale_weights`` (all equal -> all 0). Selected: the m largest
weights in descending order, ties to the lower index.

Multi-class targets (docs/algorithms/fires.md, "The choices made") are one-vs-rest: K (mu, sigma)
pairs stacked as (K, d) arrays, class k updated with y = +1 for its instances
and -1 for the others (:func:`fires_update_ovr`, which calls :func:`fires_update`
once per class), and a feature's weight the largest of its K per-class weights
(:func:`fires_weights` on the stacked arrays). Each per-class weight is
computed, min-max scaling included, exactly as for a binary stream, so the
result does not depend on how the classes are coded.

Every function returns new arrays and leaves its inputs alone. The mean over a
batch does not depend on the order of its rows, so no shuffling is done and the
update is deterministic.

References
----------
J. Haug, M. Pawelczyk, K. Broelemann, G. Kasneci. "Leveraging Model Inherent
Variable Importance for Stable Online Feature Selection." KDD 2020.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import special

Matrix = npt.NDArray[np.float64]
Vector = npt.NDArray[np.float64]
IntVector = npt.NDArray[np.intp]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def inverse_mills(t: Vector) -> Vector:
    """r = phi(t) / Phi(t), the inverse Mills ratio, finite for every finite t.

    Computed as exp(log phi(t) - log Phi(t)) with ``scipy.special.log_ndtr``:
    for t below about -38, Phi(t) underflows to 0 and the plain quotient is
    0/0, while the ratio itself behaves like -t (docs/algorithms/fires.md, "Exact rules", step 2).

    >>> inverse_mills(np.array([0.0])).round(6).tolist()
    [0.797885]
    >>> bool(abs(inverse_mills(np.array([-40.0]))[0] - 40.025) < 1e-3)
    True
    """
    t = np.asarray(t, dtype=np.float64)
    log_phi = -0.5 * t * t - _LOG_SQRT_2PI
    return np.asarray(np.exp(log_phi - special.log_ndtr(t)), dtype=np.float64)


def fires_update(
    mu: Vector,
    sigma: Vector,
    X: Matrix,
    y: Vector,
    *,
    lr_mu: float = 0.01,
    lr_sigma: float = 0.01,
    epochs: int = 1,
) -> tuple[Vector, Vector]:
    """Apply one batch to the probit parameters of one (binary) model.

    Parameters
    ----------
    mu, sigma : ndarray of shape (d,)
        Current means and standard deviations of the coefficients.
    X : ndarray of shape (n_b, d)
        The batch (already standardised if the stream scales its input).
    y : ndarray of shape (n_b,)
        Labels in {-1, +1}.
    lr_mu, lr_sigma : float
        Learning rates of mu and sigma.
    epochs : int
        Number of passes over the batch.

    Returns
    -------
    (mu, sigma) : tuple of ndarray of shape (d,)
        New arrays; ``mu`` and ``sigma`` are not modified.

    Examples
    --------
    One instance x = (1, 0), y = +1, from mu = 0, sigma = 1: dot = 0,
    rho = sqrt(2), t = 0, r = phi(0)/Phi(0) = 2 phi(0) = 0.7979, so
    grad_mu = (0.7979 / sqrt(2), 0) = (0.5642, 0) and grad_sigma = 0 (dot = 0).

    >>> mu, sigma = fires_update(np.zeros(2), np.ones(2), np.array([[1.0, 0.0]]),
    ...                          np.array([1.0]))
    >>> mu.round(6).tolist(), sigma.tolist()
    ([0.005642, 0.0], [1.0, 1.0])
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    mu = np.array(mu, dtype=np.float64)  # copies: the caller's arrays stay as they are
    sigma = np.array(sigma, dtype=np.float64)
    n_b = X.shape[0]
    if n_b == 0:
        return mu, sigma
    X2 = X * X
    for _ in range(epochs):
        dot = X @ mu
        rho = np.sqrt(1.0 + X2 @ (sigma * sigma))
        r = inverse_mills(y * dot / rho)
        # Row coefficients first, then one matrix-vector product each: the mean
        # over rows of c_i x_i is (c @ X) / n_b.
        grad_mu = ((r * y / rho) @ X) / n_b
        grad_sigma = sigma * (((r * (-y / rho**3)) * dot) @ X2) / n_b
        mu = mu + lr_mu * grad_mu
        sigma = np.maximum(sigma + lr_sigma * grad_sigma, 0.0)
    return mu, sigma


def fires_update_ovr(
    mu: Matrix,
    sigma: Matrix,
    X: Matrix,
    codes: IntVector,
    *,
    lr_mu: float = 0.01,
    lr_sigma: float = 0.01,
    epochs: int = 1,
) -> tuple[Matrix, Matrix]:
    """One-vs-rest update of K probit models (docs/algorithms/fires.md, "The choices made").

    ``mu`` and ``sigma`` are (K, d); ``codes`` holds the class code 0..K-1 of
    each row. Model k learns y = +1 for rows of class k and -1 for the others.
    Returns new (K, d) arrays.
    """
    codes = np.asarray(codes)
    mu_out = np.empty_like(np.asarray(mu, dtype=np.float64))
    sigma_out = np.empty_like(mu_out)
    for k in range(mu_out.shape[0]):
        y_k = np.where(codes == k, 1.0, -1.0)
        mu_out[k], sigma_out[k] = fires_update(
            mu[k], sigma[k], X, y_k, lr_mu=lr_mu, lr_sigma=lr_sigma, epochs=epochs
        )
    return mu_out, sigma_out


def _min_max(w: Vector) -> Vector:
    lo = float(w.min())
    hi = float(w.max())
    # All weights equal: there is no range to scale to, and docs/algorithms/fires.md maps
    # them all to 0 rather than dividing by zero.
    if hi == lo:
        return np.zeros_like(w)
    return (w - lo) / (hi - lo)


def fires_weights(
    mu: Vector | Matrix,
    sigma: Vector | Matrix,
    *,
    penalty_s: float = 0.01,
    penalty_r: float = 0.01,
    scale_weights: bool = True,
) -> Vector:
    """Feature weights w = (mu^2 - penalty_s sigma^2) / (2 penalty_r).

    With (K, d) inputs (one-vs-rest), each class's weights are computed and
    scaled as for a binary stream and a feature gets the largest of its K.

    >>> fires_weights(np.array([1.0, 0.0, 2.0]), np.array([0.0, 0.0, 0.0])).tolist()
    [0.25, 0.0, 1.0]
    >>> fires_weights(np.zeros(3), np.ones(3)).tolist()
    [0.0, 0.0, 0.0]
    """
    mu = np.asarray(mu, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64)
    w = (mu * mu - penalty_s * sigma * sigma) / (2.0 * penalty_r)
    if w.ndim == 1:
        return _min_max(w) if scale_weights else w
    per_class = np.stack([_min_max(row) for row in w]) if scale_weights else w
    return np.asarray(per_class.max(axis=0), dtype=np.float64)


def top_m(weights: Vector, m: int) -> IntVector:
    """Indices of the m largest weights, in descending order, ties to the lower index.

    >>> top_m(np.array([0.5, 1.0, 0.5, 0.0]), 3).tolist()
    [1, 0, 2]
    """
    # A stable sort of -w keeps equal weights in index order.
    order = np.argsort(-np.asarray(weights, dtype=np.float64), kind="stable")
    return np.asarray(order[: max(m, 0)], dtype=np.intp)


__all__ = ["fires_update", "fires_update_ovr", "fires_weights", "inverse_mills", "top_m"]
