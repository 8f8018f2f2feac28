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

Multi-class targets (docs/algorithms/fires.md, "Class targets") are one-vs-rest: K (mu, sigma)
pairs stacked as (K, d) arrays, class k updated with y = +1 for its instances
and -1 for the others (:func:`fires_update_ovr`, which prepares the batch once and updates each
class as :func:`fires_update` would), and a feature's weight the largest of its K per-class weights
(:func:`fires_weights` on the stacked arrays). Each per-class weight is
computed, min-max scaling included, exactly as for a binary stream, so the
result does not depend on how the classes are coded.

The penalties enter only the weights: a feature that is 0 in every row of a
batch gets a gradient of exactly 0 and keeps its mu and sigma. A wide batch
with few non-zeros is therefore computed sparse, over its non-zeros
(:func:`batch_form` decides from the values alone, so a scipy.sparse batch
and its dense form give the same bits).

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
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special

from featurestream.stats.sparse import canonical_csr, is_sparse

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


# The sparse form is used for batches of at least this many features whose
# non-zeros are at most 1/_SPARSE_RATIO of their values (see :func:`batch_form`).
_SPARSE_MIN_D = 4096
_SPARSE_RATIO = 16


def batch_form(X: Any) -> Any:
    """The form the update computes on: a dense array, or a canonical CSR matrix.

    The choice depends on the values only, never on how they arrived: a batch
    of at least 4,096 features whose non-zeros are at most 1/16 of its values
    is computed sparse (CSR, explicit zeros removed), every other batch dense.
    A sparse batch and its dense form therefore go the same way and give the
    same bits.

    >>> import scipy.sparse as sp
    >>> batch_form(sp.csr_matrix(np.eye(3))).tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    >>> batch_form(np.eye(5000)[:2]).format
    'csr'
    """
    if is_sparse(X):
        n, d = X.shape
        M = X if _is_canonical(X) else canonical_csr(X)
        if d >= _SPARSE_MIN_D and M.nnz * _SPARSE_RATIO <= n * d:
            return M
        return np.asarray(M.toarray(), dtype=np.float64)
    A = np.asarray(X, dtype=np.float64)
    n, d = A.shape
    if d >= _SPARSE_MIN_D and np.count_nonzero(A) * _SPARSE_RATIO <= n * d:
        from scipy import sparse

        return canonical_csr(sparse.csr_matrix(A))
    return A


def _is_canonical(X: Any) -> bool:
    """A float64 CSR matrix already in ``canonical_csr``'s form (it is only read)."""
    return bool(
        X.format == "csr"
        and X.dtype == np.float64
        and X.has_canonical_format
        and X.data.shape[0] == X.nnz
        and np.count_nonzero(X.data) == X.nnz
    )


@dataclass(frozen=True)
class _Batch:
    """A batch in its computing form, with its square and their transposes.

    Dense: ``X`` and ``X2`` are arrays. Sparse: CSR matrices, and ``XT``,
    ``X2T`` their transposes (CSC views, no copy): ``XT @ c`` adds c_i x_ij
    over the rows i of feature j's non-zeros only.
    """

    X: Any
    X2: Any
    XT: Any
    X2T: Any
    n: int


def _prepare(X: Any) -> _Batch:
    X = batch_form(X)
    if is_sparse(X):
        X2 = X.copy()
        X2.data = X2.data * X2.data
        return _Batch(X, X2, X.T, X2.T, X.shape[0])
    return _Batch(X, X * X, None, None, X.shape[0])


def _update(
    mu: Vector,
    sigma: Vector,
    b: _Batch,
    y: Vector,
    lr_mu: float,
    lr_sigma: float,
    epochs: int,
) -> tuple[Vector, Vector]:
    """Steps 1-3, ``epochs`` times, on a prepared batch; new arrays."""
    mu = np.array(mu, dtype=np.float64)  # copies: the caller's arrays stay as they are
    sigma = np.array(sigma, dtype=np.float64)
    if b.n == 0:
        return mu, sigma
    sparse = b.XT is not None
    for _ in range(epochs):
        dot = np.asarray(b.X @ mu, dtype=np.float64)
        rho = np.sqrt(1.0 + b.X2 @ (sigma * sigma))
        r = inverse_mills(y * dot / rho)
        # Row coefficients first, then one matrix-vector product each: the mean
        # over rows of c_i x_i is (c @ X) / n_b. A feature that is 0 in every
        # row of the batch gets a gradient of exactly 0 either way, so its mu
        # and sigma (>= 0) stay as they are.
        c_mu = r * y / rho
        c_sigma = (r * (-y / rho**3)) * dot
        if sparse:
            grad_mu = (b.XT @ c_mu) / b.n
            grad_sigma = sigma * (b.X2T @ c_sigma) / b.n
        else:
            grad_mu = (c_mu @ b.X) / b.n
            grad_sigma = sigma * (c_sigma @ b.X2) / b.n
        mu = mu + lr_mu * grad_mu
        sigma = np.maximum(sigma + lr_sigma * grad_sigma, 0.0)
    return mu, sigma


def fires_update(
    mu: Vector,
    sigma: Vector,
    X: Any,
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
    X : ndarray or scipy.sparse matrix of shape (n_b, d)
        The batch (already standardised if the stream scales its input). It
        is computed in the form :func:`batch_form` chooses from its values.
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
    y = np.asarray(y, dtype=np.float64)
    return _update(mu, sigma, _prepare(X), y, lr_mu, lr_sigma, epochs)


def fires_update_ovr(
    mu: Matrix,
    sigma: Matrix,
    X: Any,
    codes: IntVector,
    *,
    lr_mu: float = 0.01,
    lr_sigma: float = 0.01,
    epochs: int = 1,
) -> tuple[Matrix, Matrix]:
    """One-vs-rest update of K probit models (docs/algorithms/fires.md, "Class targets").

    ``mu`` and ``sigma`` are (K, d); ``codes`` holds the class code 0..K-1 of
    each row. Model k learns y = +1 for rows of class k and -1 for the others,
    exactly as :func:`fires_update` would. Returns new (K, d) arrays.
    """
    codes = np.asarray(codes)
    b = _prepare(X)
    mu_out = np.empty_like(np.asarray(mu, dtype=np.float64))
    sigma_out = np.empty_like(mu_out)
    for k in range(mu_out.shape[0]):
        y_k = np.where(codes == k, 1.0, -1.0)
        mu_out[k], sigma_out[k] = _update(mu[k], sigma[k], b, y_k, lr_mu, lr_sigma, epochs)
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
    if w.ndim == 2 and w.shape[0] == 1:
        w = w[0]
    if w.ndim == 1:
        return _min_max(w) if scale_weights else w
    per_class = np.stack([_min_max(row) for row in w]) if scale_weights else w
    return np.asarray(per_class.max(axis=0), dtype=np.float64)


def top_m(weights: Vector, m: int) -> IntVector:
    """Indices of the m largest weights, in descending order, ties to the lower index.

    Exactly the first m of a stable sort of -w. For large d it is found in
    O(d + m log m): the m-th largest weight v by a partial selection, then
    every weight above v and, in index order, as many equal to v as are still
    wanted, sorted.

    >>> top_m(np.array([0.5, 1.0, 0.5, 0.0]), 3).tolist()
    [1, 0, 2]
    >>> top_m(np.array([0.5, 1.0, 0.5, 0.0]), 2).tolist()
    [1, 0]
    """
    w = np.asarray(weights, dtype=np.float64)
    d = w.shape[0]
    m = max(min(m, d), 0)
    if m == 0:
        return np.zeros(0, dtype=np.intp)
    if m * 8 >= d or d <= 2048:
        # A stable sort of -w keeps equal weights in index order.
        return np.asarray(np.argsort(-w, kind="stable")[:m], dtype=np.intp)
    v = np.partition(w, d - m)[d - m]  # the m-th largest weight
    chosen = w > v
    wanted = m - int(np.count_nonzero(chosen))
    if wanted:
        chosen[np.flatnonzero(w == v)[:wanted]] = True
    index = np.flatnonzero(chosen)  # in index order
    return np.asarray(index[np.argsort(-w[index], kind="stable")], dtype=np.intp)


__all__ = [
    "batch_form",
    "fires_update",
    "fires_update_ovr",
    "fires_weights",
    "inverse_mills",
    "top_m",
]
