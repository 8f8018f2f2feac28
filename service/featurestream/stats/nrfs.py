"""NRFS: one computation of noise-resistant unsupervised feature selection on a window.

docs/algorithms/nrfs.md, "One computation", steps 1-8, on the window's n instances X
(n x m):

1. Similarity graph W over all m features (Gaussian with width sigma, default
   the median pairwise distance; or cosine), D its degrees,
   L_sym = I - D^-1/2 W D^-1/2.
2. Spectra Y (n x c, c = k - 1): D^-1/2 u for the eigenvectors u of L_sym with
   the 2nd to (c+1)-th smallest eigenvalues (the first, trivial one skipped).
3. Noise removal: drop the ``noise_fraction`` most anomalous instances. The
   paper scores anomalousness with its authors' Fermi Density Descriptor, which
   has no public specification; it is replaced here by the local outlier
   factor (Breunig et al. 2000, min(20, n' - 1) neighbours), a standard
   density-based anomaly score, computed over the n' distinct instances of
   the window (see :func:`remove_noise` for duplicates).
4. Representatives: density-preserving split of the remaining instances by
   repeated closest pair, halving the first half until it holds at most p.
5. For each feature j, its q nearest features N(j) (itself first); for each
   representative r, B_r[:, j] = similarity between x_r and every instance on
   N(j) only, Gaussian width sigma_j = median pairwise distance in that
   subspace (1 where 0); plus a column of ones.
6. A_r = argmin ||B_r A - Y||^2 + lambda ||A||^2 in closed form, the primal
   (B^T B + lambda I)^-1 B^T Y, or the dual B^T (B B^T + lambda I)^-1 Y when
   m + 1 > n; intercept row dropped.
7. |A_r| with each column L2-normalised; A'[j, s] = max over representatives.
8. For each spectrum in turn, the ceil(h/c) features with the largest A'[:, s]
   not yet taken, stopping at h. Score of j: max_s A'[j, s].

Cost of one computation, with p representatives and q neighbours:
pairwise instance distances O(n^2 m); the partial eigendecomposition O(n^3)
(LAPACK, c eigenpairs of a dense n x n matrix); the local outlier factor
O(n^2 m + n^2 log n) (exact neighbours, by sorting each row's distances); the
closest-pair split O(n^2 log n) (one sort of all pairwise distances per
halving, then a linear sweep); the feature
neighbourhoods O(m^2 n) when q > 1; the subspace widths O(m n^2 q) (a median
over all n(n-1)/2 pairs for each feature); the similarity layers O(p n m q);
and the ridge fits O(p n m min(n, m) + p min(n, m)^3). With p a fixed
fraction of n, the ridge fits grow fastest, O(n^2 m min(n, m)): n^2 m^2 for
tall windows (m < n) and n^3 m for wide ones. At the window sizes the service
uses, though, the subspace widths dominate: m medians over n(n-1)/2 pairs each
(most of the time at n = 1000, m = 200 and at n = 300, m = 2000; the
eigendecomposition, the outlier factor and the split take far less). For
q = 1 the median of the pairwise absolute differences of one sorted column
could be selected in O(n log n) instead.

Nothing here is random: the local outlier factor and the split have no random
step, and every tie is broken towards the lower index, so the same window gives
the same selection (``seed`` is accepted for a tie-break an implementation may
add, and unused).

References
----------
H. Huang, S. Yoo, D. Yu, H. Qin. "Noise Resistant Unsupervised Feature
Selection via Multi Perspective Correlations." ICDM 2014.
M. M. Breunig, H.-P. Kriegel, R. T. Ng, J. Sander. "LOF: Identifying
Density-Based Local Outliers." SIGMOD 2000.
M. Budka, B. Gabrys. "Density-Preserving Sampling: Robust and Efficient
Alternative to Cross-Validation for Error Estimation." IEEE TNNLS 2013.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import linalg
from scipy.spatial import distance

from featurestream.errors import NumericallyUnstable
from featurestream.stats.finite import require_finite

Matrix = npt.NDArray[np.float64]
Vector = npt.NDArray[np.float64]
IntVector = npt.NDArray[np.intp]
Similarity = Literal["gaussian", "cosine"]

# Cap on the similarity layers and Gram matrices held at once, in float64
# elements (64 MiB): the representatives are processed in blocks of that size.
_BLOCK_ELEMENTS = 1 << 23
# Neighbours of the local outlier factor (docs/algorithms/nrfs.md, step 3).
_LOF_NEIGHBOURS = 20


@dataclass(frozen=True)
class NRFSResult:
    """Outcome of one NRFS computation.

    Attributes
    ----------
    selected : tuple of int
        Selected feature indices, in selection order (step 8).
    scores : ndarray of shape (m,)
        Each feature's largest normalised coefficient over the spectra.
    coefficients : ndarray of shape (m, c)
        A', the per-spectrum coefficients of step 7.
    representatives : ndarray of int
        Window indices of the representative instances (ascending).
    """

    selected: tuple[int, ...]
    scores: Vector
    coefficients: Matrix
    representatives: IntVector


def nrfs(
    X: Matrix,
    num_features: int,
    *,
    clusters: int = 4,
    representatives: float | int = 0.25,
    neighbours: int = 1,
    similarity: Similarity = "gaussian",
    sigma: float | None = None,
    ridge: float = 1e-3,
    noise_fraction: float = 0.1,
    seed: int = 0,
) -> NRFSResult:
    """Run steps 1-8 of NRFS on a window.

    Parameters
    ----------
    X : ndarray of shape (n, m)
        The window's instances.
    num_features : int
        h, the number of features to select.
    clusters : int
        k; the number of spectra used is c = k - 1. Needs n >= k.
    representatives : float or int
        p: a fraction of the instances left after noise removal if a float in
        (0, 1], else a count.
    neighbours : int
        q, the size of each local feature subspace, the feature included.
    similarity : {"gaussian", "cosine"}
        Kernel of steps 1 and 5.
    sigma : float or None
        Gaussian width of step 1; None for the median pairwise distance.
    ridge : float
        lambda of step 6.
    noise_fraction : float
        Fraction of the instances dropped as noise in step 3.
    seed : int
        Reserved for tie-breaks; the computation has no random step.

    Returns
    -------
    NRFSResult

    Examples
    --------
    Two well separated groups on feature 0; feature 1 is noise.

    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.r_[rng.normal(0, 0.1, 20), rng.normal(5, 0.1, 20)],
    ...                      rng.normal(0, 1, 40)])
    >>> nrfs(X, 1, clusters=2, representatives=4).selected
    (0,)
    """
    del seed  # no random step (module docstring)
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    c = clusters - 1
    if c < 1 or n < clusters or n < 3:
        raise ValueError(
            f"NRFS needs clusters >= 2 and at least max(3, clusters) instances; got "
            f"clusters={clusters} and n={n}."
        )
    Y = spectra(X, c, similarity=similarity, sigma=sigma)
    kept = remove_noise(X, noise_fraction)
    reps = kept[density_preserving_sample(X[kept], representatives)]
    N = feature_neighbours(X, neighbours)
    A = coefficient_maxima(X, Y, reps, N, similarity=similarity, ridge=ridge)
    selected = select_by_spectrum(A, num_features)
    return NRFSResult(selected, A.max(axis=1), A, reps)


# --- steps 1-2 ------------------------------------------------------------------


def median_distance(X: Matrix) -> float:
    """Median of the pairwise Euclidean distances between the rows of X (1 if it is 0)."""
    if X.shape[0] < 2:
        return 1.0
    med = float(np.median(distance.pdist(X)))
    # Identical instances give width 0; docs/algorithms/nrfs.md step 5 uses 1 there, and
    # step 1 follows the same rule rather than dividing by zero.
    return med if med > 0.0 else 1.0


def similarity_matrix(X: Matrix, *, similarity: Similarity, sigma: float | None) -> Matrix:
    """W of step 1 (n x n), self-similarities included.

    Negative cosine similarities are clipped to 0: a graph Laplacian needs
    non-negative edge weights (and positive degrees) to be positive
    semi-definite with its trivial eigenvector first.
    """
    if similarity == "gaussian":
        width = median_distance(X) if sigma is None else float(sigma)
        D2 = distance.squareform(distance.pdist(X, "sqeuclidean"))
        return np.asarray(np.exp(-D2 / (2.0 * width * width)), dtype=np.float64)
    norms = np.linalg.norm(X, axis=1)
    U = X / np.where(norms > 0.0, norms, 1.0)[:, None]
    return np.maximum(U @ U.T, 0.0)


def spectra(X: Matrix, c: int, *, similarity: Similarity, sigma: float | None) -> Matrix:
    """Y of step 2 (n x c): generalised eigenvectors 2..c+1 of L y = lambda D y."""
    W = similarity_matrix(X, similarity=similarity, sigma=sigma)
    degree = W.sum(axis=1)
    # An isolated instance (only possible with cosine, an all-zero row) has
    # degree 0: it gets no weight instead of an infinite one.
    d_isqrt = np.where(degree > 0.0, 1.0 / np.sqrt(np.where(degree > 0.0, degree, 1.0)), 0.0)
    L = np.eye(X.shape[0]) - d_isqrt[:, None] * W * d_isqrt[None, :]
    require_finite(L, "The NRFS graph Laplacian")
    try:
        _, U = linalg.eigh(L, subset_by_index=[1, c])
    except linalg.LinAlgError as exc:
        raise NumericallyUnstable(f"The NRFS eigensolver failed: {exc}.") from exc
    return np.asarray(d_isqrt[:, None] * U, dtype=np.float64)


# --- steps 3-4 ------------------------------------------------------------------


def local_outlier_factor(Z: Matrix, k: int) -> Vector:
    """The local outlier factor of every row of Z with k neighbours (1 <= k < len(Z)).

    The k nearest neighbours of each row (itself excluded; equal distances:
    lower index first), reach-dist(p, o) = max(k-distance(o), d(p, o)),
    lrd(p) = 1 / (mean reach-dist(p, .) + 1e-10) and LOF(p) = mean over the
    neighbours o of lrd(o) / lrd(p): scikit-learn's ``LocalOutlierFactor``
    formula, written out so that no library warning can arise while a window
    is scored, and ties are broken the same way everywhere.

    Points 0, 1, 2 and 10 with k = 2: the k-distances are 2, 1, 2 and 9, the
    mean reach-distances 1.5, 2, 1.5 and 8.5, so LOF(0) = (0.5 + 2/3) / 2 / (2/3)
    = 0.875 and the isolated point 10 stands out.

    >>> local_outlier_factor(np.array([[0.0], [1.0], [2.0], [10.0]]), 2).round(3).tolist()
    [0.875, 1.333, 0.875, 4.958]
    """
    D = distance.squareform(distance.pdist(Z))
    np.fill_diagonal(D, np.inf)
    ind = np.argsort(D, axis=1, kind="stable")[:, :k]
    dist = np.take_along_axis(D, ind, axis=1)
    reach = np.maximum(dist, dist[ind, -1])
    lrd = 1.0 / (reach.mean(axis=1) + 1e-10)
    return np.asarray((lrd[ind] / lrd[:, None]).mean(axis=1), dtype=np.float64)


def remove_noise(X: Matrix, noise_fraction: float) -> IntVector:
    """Window indices (ascending) of the instances kept by step 3.

    The ``floor(noise_fraction * n)`` instances with the largest local outlier
    factor are dropped; of equally anomalous instances the higher index goes
    first, so ties keep the lower index as everywhere else.

    Duplicates: the factor is computed over the distinct instances, and every
    copy of an instance gets its score. With copies counted as separate
    points, k + 1 equal instances would have a density of 1e10 and make the
    factor of their neighbours meaningless (scikit-learn warns of exactly
    that). A window whose instances are all equal has no density contrast:
    every score is 1, and the ties drop the highest indices.
    """
    n = X.shape[0]
    # A small tolerance so that 0.1 * 1280 = 128.00000000000003 and
    # 0.29 * 100 = 28.999999999999996 both give the intended integer.
    drop = min(math.floor(noise_fraction * n + 1e-9), n - 1)
    if drop <= 0:
        return np.arange(n, dtype=np.intp)
    distinct, inverse = np.unique(X, axis=0, return_inverse=True)
    if distinct.shape[0] < 2:
        anomalousness = np.ones(n)
    else:
        k = min(_LOF_NEIGHBOURS, distinct.shape[0] - 1)
        anomalousness = local_outlier_factor(distinct, k)[inverse.reshape(-1)]
    order = np.lexsort((-np.arange(n), -anomalousness))
    return np.sort(order[drop:]).astype(np.intp)


def closest_pair_split(Z: Matrix) -> tuple[IntVector, IntVector]:
    """Split the rows of Z in two by repeatedly pairing the closest remaining rows.

    Each step takes the closest pair (i, j), i < j, among rows not yet taken
    and sends i to the first half and j to the second (docs/algorithms/nrfs.md step 4;
    equal distances: the pair (i, j) that comes first lexicographically). With
    an odd count, the last row left joins the first half.

    All pairwise distances are sorted once and swept in order, skipping pairs
    with a member already taken: a pair is the closest remaining one exactly
    when it is the first in the sorted order whose two members are both free.
    Cost O(n^2 log n) for the sort, O(n^2) for the sweep.

    >>> first, second = closest_pair_split(np.array([[0.0], [10.0], [0.5], [11.0], [30.0]]))
    >>> first.tolist(), second.tolist()
    ([0, 1, 4], [2, 3])
    """
    n = Z.shape[0]
    if n < 2:
        return np.arange(n, dtype=np.intp), np.zeros(0, dtype=np.intp)
    dist = distance.pdist(Z)
    # pdist lists the pairs in (i, j) lexicographic order, so a stable sort
    # breaks distance ties towards the lexicographically first pair.
    order = np.argsort(dist, kind="stable")
    rows, cols = np.triu_indices(n, k=1)
    a_list = rows[order].tolist()
    b_list = cols[order].tolist()
    taken = [False] * n
    first: list[int] = []
    second: list[int] = []
    free = n
    for a, b in zip(a_list, b_list, strict=True):
        if taken[a] or taken[b]:
            continue
        taken[a] = taken[b] = True
        first.append(a)
        second.append(b)
        free -= 2
        if free < 2:
            break
    first.extend(i for i in range(n) if not taken[i])
    return np.array(sorted(first), dtype=np.intp), np.array(sorted(second), dtype=np.intp)


def representative_count(p: float | int, n: int) -> float:
    """The size bound of step 4: p * n for a fraction, p for a count."""
    if isinstance(p, bool):
        raise TypeError("representatives must be a number, not a bool")
    if isinstance(p, float) and 0.0 < p <= 1.0:
        return p * n
    return float(p)


def density_preserving_sample(Z: Matrix, p: float | int) -> IntVector:
    """Row indices of Z (ascending) of the representatives of step 4.

    The first half of a closest-pair split is split again until it holds at
    most ``representative_count(p, len(Z))`` rows (at least one row is kept).
    """
    bound = representative_count(p, Z.shape[0])
    current = np.arange(Z.shape[0], dtype=np.intp)
    while current.size > bound and current.size > 1:
        first, _ = closest_pair_split(Z[current])
        current = current[first]
    return current


# --- step 5 ---------------------------------------------------------------------


def feature_neighbours(X: Matrix, q: int) -> IntVector:
    """N (m x q): row j is feature j followed by its q - 1 nearest features.

    Distances are Euclidean between the standardised columns (a constant column
    standardises to 0); ties go to the lower index.
    """
    m = X.shape[1]
    q = max(1, min(q, m))
    own = np.arange(m, dtype=np.intp)[:, None]
    if q == 1:
        return own
    sd = X.std(axis=0)
    Zc = np.where(sd > 0.0, (X - X.mean(axis=0)) / np.where(sd > 0.0, sd, 1.0), 0.0)
    D = distance.cdist(Zc.T, Zc.T)
    # The feature itself comes first whatever its distance to a duplicate.
    np.fill_diagonal(D, -np.inf)
    order = np.argsort(D, axis=1, kind="stable")[:, :q]
    return np.asarray(order, dtype=np.intp)


def _subspace_sq(diff_sq: Matrix, N: IntVector) -> Matrix:
    """Sum of squared differences over each feature's subspace: column j sums N[j]."""
    S = diff_sq[:, N[:, 0]].copy()
    for t in range(1, N.shape[1]):
        S += diff_sq[:, N[:, t]]
    return S


def subspace_widths(X: Matrix, N: IntVector) -> Vector:
    """sigma_j of step 5: median pairwise distance on the features N[j] (1 if 0).

    One ``pdist`` (compiled) and one median (a linear-time partition) per
    feature, over the n(n-1)/2 pairs: O(m n^2 q) time, O(n^2) memory.
    """
    n, m = X.shape
    if n < 2:
        return np.ones(m)
    widths = np.array([np.median(distance.pdist(X[:, N[j]])) for j in range(m)])
    # A subspace where at least half the pairs coincide has width 0; docs/algorithms/nrfs.md
    # step 5 uses 1 there.
    return np.where(widths > 0.0, widths, 1.0)


def similarity_layer(
    X: Matrix, x_r: Vector, N: IntVector, widths: Vector, *, similarity: Similarity
) -> Matrix:
    """B_r without its intercept (n x m): x_r against every instance, on each subspace."""
    if similarity == "gaussian":
        diff = X - x_r
        S = _subspace_sq(diff * diff, N)
        return np.exp(-S / (2.0 * widths * widths))
    dots = _subspace_sq(X * x_r, N)
    norms_sq = _subspace_sq(X * X, N)
    r_sq = _subspace_sq((x_r * x_r)[None, :], N)
    denom = np.sqrt(norms_sq * r_sq)
    # A zero vector on a subspace has no direction: similarity 0.
    return np.where(denom > 0.0, dots / np.where(denom > 0.0, denom, 1.0), 0.0)


# --- steps 6-7 ------------------------------------------------------------------


def ridge_coefficients(B: Matrix, Y: Matrix, lam: float) -> Matrix:
    """argmin_A ||B_r A - Y||^2 + lam ||A||^2 for each layer B_r of B (p, n, k).

    Returns A of shape (p, k, c). The primal (B^T B + lam I)^-1 B^T Y costs
    k^3 per layer, the dual B^T (B B^T + lam I)^-1 Y costs n^3: the dual is used
    when k > n. Both are the same matrix (push-through identity).
    """
    p, n, k = B.shape
    require_finite(B, "An NRFS similarity layer")
    require_finite(Y, "The NRFS spectral embedding")
    Bt = np.swapaxes(B, 1, 2)
    if k > n:
        G = B @ Bt
        G[:, np.arange(n), np.arange(n)] += lam
        return np.asarray(Bt @ np.linalg.solve(G, np.broadcast_to(Y, (p, *Y.shape))))
    G = Bt @ B
    G[:, np.arange(k), np.arange(k)] += lam
    return np.asarray(np.linalg.solve(G, Bt @ Y))


def coefficient_maxima(
    X: Matrix,
    Y: Matrix,
    reps: IntVector,
    N: IntVector,
    *,
    similarity: Similarity,
    ridge: float,
) -> Matrix:
    """A' of step 7 (m x c): max over representatives of the column-normalised |A_r|."""
    n, m = X.shape
    widths = subspace_widths(X, N) if similarity == "gaussian" else np.ones(m)
    k = m + 1
    per_layer = n * k + min(n, k) ** 2
    block = max(1, _BLOCK_ELEMENTS // per_layer)
    A_max = np.zeros((m, Y.shape[1]))
    for lo in range(0, reps.size, block):
        chunk = reps[lo : lo + block]
        B = np.empty((chunk.size, n, k))
        for t, r in enumerate(chunk):
            B[t, :, :m] = similarity_layer(X, X[r], N, widths, similarity=similarity)
        B[:, :, m] = 1.0  # the intercept column (paper, footnote to section III.A)
        A = np.abs(ridge_coefficients(B, Y, ridge)[:, :m, :])
        norms = np.linalg.norm(A, axis=1, keepdims=True)
        # An all-zero column (nothing to explain) stays 0 rather than 0/0.
        A = np.where(norms > 0.0, A / np.where(norms > 0.0, norms, 1.0), 0.0)
        A_max = np.maximum(A_max, A.max(axis=0))
    return A_max


# --- step 8 ---------------------------------------------------------------------


def select_by_spectrum(A: Matrix, h: int) -> tuple[int, ...]:
    """Step 8: each spectrum in turn takes its ceil(h/c) best untaken features.

    Ties go to the lower index. Stops at h features (or when all m are taken).

    >>> A = np.array([[0.9, 0.1], [0.8, 0.7], [0.1, 0.6], [0.2, 0.5]])
    >>> select_by_spectrum(A, 3)
    (0, 1, 2)
    """
    m, c = A.shape
    h = min(h, m)
    per = math.ceil(h / c) if c else h
    taken = np.zeros(m, dtype=bool)
    selected: list[int] = []
    for s in range(c):
        order = np.argsort(-A[:, s], kind="stable")
        fresh = [int(j) for j in order if not taken[j]][: min(per, h - len(selected))]
        for j in fresh:
            taken[j] = True
        selected.extend(fresh)
        if len(selected) >= h:
            break
    return tuple(selected)


__all__ = [
    "NRFSResult",
    "closest_pair_split",
    "density_preserving_sample",
    "feature_neighbours",
    "local_outlier_factor",
    "nrfs",
    "remove_noise",
    "ridge_coefficients",
    "select_by_spectrum",
    "spectra",
    "subspace_widths",
]
