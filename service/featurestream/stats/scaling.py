"""Running standardisation of instances (docs/algorithms/fires.md, "Exact rules", `scale`).

With ``scale: "standard"`` an instance-stream selector standardises each
instance before it learns from it, with the running mean and variance of every
feature over the instances seen so far *including this one*: Welford's update,
the population variance M2/t, and a feature whose variance is 0 maps to 0.

The state is ``(count, mean, M2)``, a count and two float64 vectors of length
d, so it is rebuilt exactly from a snapshot. A batch is processed with the
semantics of a row-by-row loop: row i is standardised with the statistics of
every earlier instance and rows 0..i of the batch. The computation is
vectorised over the rows; it agrees with the plain loop to rounding (within
1e-12 on data whose spread is not tiny against its offset).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float64]
Vector = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Standardised:
    """A standardised batch and the running statistics after it."""

    Z: Matrix
    count: int
    mean: Vector
    M2: Vector


def standardise_running(count: int, mean: Vector, M2: Vector, X: Matrix) -> Standardised:
    """Standardise a batch with running statistics that include each row itself.

    Parameters
    ----------
    count : int
        Instances seen before this batch (t, >= 0).
    mean : ndarray of shape (d,)
        Running mean of each feature over those instances (zeros when count is 0).
    M2 : ndarray of shape (d,)
        Running sum of squared deviations from the mean (Welford's M2).
    X : ndarray of shape (n_b, d)
        The batch, rows in arrival order.

    Returns
    -------
    Standardised
        ``Z`` (n_b, d): row i is ``(x_i - mean_i) / sqrt(M2_i / t_i)`` with the
        statistics after row i, 0 where ``M2_i`` is 0; and the new
        ``(count, mean, M2)``. The inputs are not modified.

    Examples
    --------
    The first instance standardises to 0 (a variance of 0); the second of
    [0, 2] has mean 1 and population variance 1, so it maps to 1.

    >>> s = standardise_running(0, np.zeros(1), np.zeros(1), np.array([[0.0], [2.0]]))
    >>> s.Z.ravel().tolist(), s.count, s.mean.tolist(), s.M2.tolist()
    ([0.0, 1.0], 2, [1.0], [2.0])
    """
    X = np.asarray(X, dtype=np.float64)
    mean = np.asarray(mean, dtype=np.float64)
    M2 = np.asarray(M2, dtype=np.float64)
    n_b = X.shape[0]
    if n_b == 0:
        return Standardised(X.copy(), count, mean.copy(), M2.copy())
    if n_b * X.shape[1] <= _BLOCK_ELEMENTS:
        Z, new_mean, new_M2 = _standardise_block(count, mean, M2, X)
        return Standardised(Z, count + n_b, new_mean, new_M2)
    # Features are standardised independently of each other: a wide batch goes
    # in blocks of columns whose temporaries stay small (cache-sized, instead of
    # a dozen arrays the size of the batch), with the same operations, so the
    # same bits, as in one piece.
    Z = np.empty_like(X)
    new_mean = np.empty_like(mean)
    new_M2 = np.empty_like(M2)
    width = max(1, _BLOCK_ELEMENTS // n_b)
    for lo in range(0, X.shape[1], width):
        cols = slice(lo, lo + width)
        Z[:, cols], new_mean[cols], new_M2[cols] = _standardise_block(
            count, mean[cols], M2[cols], X[:, cols]
        )
    return Standardised(Z, count + n_b, new_mean, new_M2)


# Elements of a batch standardised at once (256 KiB of float64 per temporary).
_BLOCK_ELEMENTS = 1 << 15


def _standardise_block(
    count: int, mean: Vector, M2: Vector, X: Matrix
) -> tuple[Matrix, Vector, Vector]:
    """Z, mean and M2 after the rows of X (n_b >= 1), for the columns of X."""
    n_b = X.shape[0]
    # Accumulate deviations from a shift close to the data rather than raw
    # values: a cumulative sum of raw values of large magnitude (1e6 +/- 1)
    # would lose the digits that the standardised values depend on.
    shift = mean if count > 0 else X[0]
    t = count + np.arange(1, n_b + 1, dtype=np.float64)[:, None]
    dev_sum = count * (mean - shift) + np.cumsum(X - shift, axis=0)
    means = shift + dev_sum / t  # mean after each row
    previous = np.vstack([mean[None, :], means[:-1]])  # mean before each row
    # Welford: M2_i = M2_{i-1} + (x_i - mean_{i-1}) (x_i - mean_i), summed in
    # row order exactly as the loop does.
    M2s = M2 + np.cumsum((X - previous) * (X - means), axis=0)
    var = M2s / t
    positive = var > 0.0
    # A feature whose variance is 0 so far maps to 0 (docs/algorithms/fires.md, `scale`).
    sd = np.sqrt(np.where(positive, var, 1.0))
    Z = np.where(positive, (X - means) / sd, 0.0)
    return Z, means[-1].copy(), M2s[-1].copy()


__all__ = ["Standardised", "standardise_running"]
