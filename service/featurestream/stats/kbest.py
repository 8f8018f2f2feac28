"""Per-feature relevance to a target from weighted sums (docs/algorithms/kbest.md).

The sums are those an online filter accumulates, instance by instance, each
instance with a weight w (1 without forgetting): W = sum w, and per feature
S_x = sum w x and S_xx = sum w x^2. A continuous target adds S_y, S_yy and
S_xy = sum w x y; a class target keeps per class k its weight n_k = sum of
the w of its instances and its per-feature sums S_k = sum of their w x.

Every score is a ratio in which a common factor of all the sums cancels, so
the sums may be kept in any common unit; only the F statistic's degrees of
freedom need the true total weight, passed as ``total``.

* correlation, continuous target: |r| = |cov| / sqrt(var_x var_y), with
  cov = S_xy - S_x S_y / W, var_x = S_xx - S_x^2 / W, var_y = S_yy - S_y^2 / W;
  0 when a variance is not positive.
* correlation, class target: the largest over the classes of |r(x, 1[y = k])|,
  the point-biserial correlation |m_k - m_rest| sqrt(n_k n_rest) / (W s_x) with
  m_k = S_k / n_k, m_rest = (S_x - S_k) / (W - n_k) and s_x^2 = var_x / W;
  each class's term uses only its own sums and the totals, so no relabelling
  of the classes changes a bit, and with two classes it is |r| with the 0/1
  codes of the binary rule.
* anova: F = (SSB / (K - 1)) / (SSW / (N - K)) over the K classes seen, with
  SSB = sum_k S_k^2 / n_k - S_x^2 / W and SSW = S_xx - sum_k S_k^2 / n_k; the
  terms are summed in sorted order, so the sum does not depend on how the
  classes are numbered. 0 with fewer than 2 classes or N <= K; a feature
  constant within every class (SSW 0) but not overall scores the largest
  finite float (F is infinite there; a score must be a finite number), and 0
  when SSB is 0 too.
"""

from __future__ import annotations

import sys

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float64]
Matrix = npt.NDArray[np.float64]

#: The score of a feature whose F statistic is infinite (SSW = 0 < SSB).
INFINITE_F = sys.float_info.max


def _variance_x(W: float, sx: Vector, sxx: Vector) -> Vector:
    """W times the weighted variance of every feature: S_xx - S_x^2 / W (>= 0 or clamped)."""
    return np.maximum(sxx - sx * sx / W, 0.0)


def correlation_continuous(
    W: float, sx: Vector, sxx: Vector, sy: float, syy: float, sxy: Vector
) -> Vector:
    """|Pearson r| of every feature with a continuous target.

    >>> x = np.array([[1.0], [2.0], [3.0]]); y = np.array([2.0, 4.0, 7.0])
    >>> r = correlation_continuous(3.0, x.sum(0), (x * x).sum(0), y.sum(), (y * y).sum(),
    ...                            (x[:, 0] * y)[:, None].sum(0))
    >>> round(float(r[0]), 12) == round(float(np.corrcoef(x[:, 0], y)[0, 1]), 12)
    True
    """
    d = sx.shape[0]
    if W <= 0.0:
        return np.zeros(d)
    vy = syy - sy * sy / W
    if not vy > 0.0:
        return np.zeros(d)
    vx = _variance_x(W, sx, sxx)
    cov = sxy - sx * (sy / W)
    den = np.sqrt(vx * vy)
    r = np.divide(np.abs(cov), den, out=np.zeros(d), where=den > 0.0)
    return np.asarray(np.minimum(r, 1.0), dtype=np.float64)


def correlation_classes(W: float, sx: Vector, sxx: Vector, nk: Vector, sk: Matrix) -> Vector:
    """The largest |r| of every feature with a class indicator (point-biserial).

    >>> x = np.array([0.0, 1.0, 0.0, 1.0]); y = np.array([0, 1, 0, 1])
    >>> sk = np.array([[x[y == k].sum()] for k in (0, 1)])
    >>> correlation_classes(4.0, x[None].sum(1), (x * x)[None].sum(1), np.array([2.0, 2.0]), sk)
    array([1.])
    """
    d = sx.shape[0]
    best = np.zeros(d)
    if W <= 0.0:
        return best
    sd = np.sqrt(_variance_x(W, sx, sxx) / W)
    positive = sd > 0.0
    for k in range(nk.shape[0]):
        n_in = float(nk[k])
        n_out = W - n_in
        if not (n_in > 0.0 and n_out > 0.0):
            continue
        gap = np.abs(sk[k] / n_in - (sx - sk[k]) / n_out)
        num = gap * (np.sqrt(n_in * n_out) / W)
        r = np.divide(num, sd, out=np.zeros(d), where=positive)
        np.maximum(best, r, out=best)
    return np.asarray(np.minimum(best, 1.0), dtype=np.float64)


def anova_f(W: float, total: float, sx: Vector, sxx: Vector, nk: Vector, sk: Matrix) -> Vector:
    """The one-way ANOVA F statistic of every feature between the classes.

    ``total`` is the true total weight N (W in the sums' unit may differ by a
    common factor).

    >>> x = np.array([1.0, 2.0, 4.0, 6.0]); y = np.array([0, 0, 1, 1])
    >>> sk = np.array([[x[y == k].sum()] for k in (0, 1)])
    >>> f = anova_f(4.0, 4.0, x[None].sum(1), (x * x)[None].sum(1), np.array([2.0, 2.0]), sk)
    >>> float(f[0])  # SSB = 12.25, SSW = 2.5: 12.25 / (2.5 / 2)
    9.8
    """
    d = sx.shape[0]
    present = nk > 0.0
    K = int(np.count_nonzero(present))
    if K < 2 or not total > K or W <= 0.0:
        return np.zeros(d)
    n = nk[present][:, None]
    s = sk[present]
    terms = np.sort(s * s / n, axis=0)
    between_sum = terms[0].copy()
    for row in terms[1:]:
        between_sum += row
    ssb = np.maximum(between_sum - sx * sx / W, 0.0)
    ssw = np.maximum(sxx - between_sum, 0.0)
    scale = (total - K) / (K - 1)
    f = np.divide(ssb * scale, ssw, out=np.zeros(d), where=ssw > 0.0)
    f[(ssw <= 0.0) & (ssb > 0.0)] = INFINITE_F
    return np.asarray(np.minimum(f, INFINITE_F), dtype=np.float64)


__all__ = ["INFINITE_F", "anova_f", "correlation_classes", "correlation_continuous"]
