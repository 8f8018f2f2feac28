"""Synthetic data sets shaped like those of the SAOLA paper, with planted features.

Feature streams (the instances are fixed, the columns stream in):

* ``dorothea``: 800 x 100,000 binary, about 1% non-zero;
* ``thrombin``: 2,000 x 139,351 binary, about 0.7% non-zero;
* ``news20``: 9,996 x 1,355,191, about 4.5 million non-zeros, positive
  tf-idf-like values (each instance scaled to unit length);
* ``dense``: 2,000 x 20,000 Gaussian columns.

Instance streams (the feature space is fixed, the instances stream in):
``stream-d1000`` (dense Gaussian rows, d = 1,000) and ``stream-d100000``
(sparse rows, d = 100,000, 0.2% non-zero).

Everything is a deterministic function of the spec and the seed, and the
sparse sets are built directly as CSC matrices with numpy: no dense matrix of
a large set ever exists. The sparse sets have a binary target in {0, 1}.

Planted features: ``relevant`` columns depend on the target (a binary column
that is on with probability ``q1`` for positive instances and ``q0`` for
negative ones, ``q1`` drawn per feature), and each has ``copies`` redundant
copies (the relevant column with 10% of its non-zeros dropped and a few
added, so a copy correlates about 0.9 with its original and a little less
with the target). The recall of a selection is the fraction of relevant
features found, a relevant feature counting as found when it or one of its
copies is selected. Every other column is noise, independent of the target.

Columns of the sparse sets have heavy-tailed lengths (log-normal counts of
non-zeros), as words and substructure fingerprints do: most columns hold a
handful of non-zeros, a few hold many.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class FeatureSpec:
    """Shape and structure of a feature-stream data set."""

    name: str
    n: int  # instances (rows)
    b: int  # features (columns)
    nnz: int  # target number of non-zeros (sparse sets); 0 for dense sets
    kind: str = "binary"  # "binary", "tfidf" or "dense"
    positive_rate: float = 0.5
    relevant: int = 10
    copies: int = 2
    q1: tuple[float, float] = (0.15, 0.35)
    q0: float = 0.02
    spread: float = 1.5  # sigma of the log-normal column lengths
    description: str = ""

    @property
    def sparse(self) -> bool:
        return self.kind != "dense"

    def scaled(self, n: int, b: int) -> FeatureSpec:
        """The same structure at another size (the density is kept)."""
        density = self.nnz / (self.n * self.b) if self.nnz else 0.0
        return replace(self, n=n, b=b, nnz=round(density * n * b))


@dataclass(frozen=True)
class InstanceSpec:
    """Shape and structure of an instance-stream data set."""

    name: str
    n: int  # instances
    d: int  # features
    density: float = 1.0  # fraction of non-zeros per instance (1.0: dense rows)
    relevant: int = 10
    frame: int = 100  # instances per frame sent
    description: str = ""

    @property
    def sparse(self) -> bool:
        return self.density < 1.0

    def scaled(self, n: int, d: int, frame: int | None = None) -> InstanceSpec:
        return replace(self, n=n, d=d, frame=frame or self.frame)


FEATURE_SPECS: dict[str, FeatureSpec] = {
    s.name: s
    for s in (
        FeatureSpec(
            "dorothea",
            n=800,
            b=100_000,
            nnz=800_000,
            description="800 x 100,000 binary, ~1% non-zero (NIPS 2003 DOROTHEA shape)",
        ),
        FeatureSpec(
            "thrombin",
            n=2_000,
            b=139_351,
            nnz=1_950_914,
            description="2,000 x 139,351 binary, ~0.7% non-zero (KDD Cup 2001 thrombin shape)",
        ),
        FeatureSpec(
            "news20",
            n=9_996,
            b=1_355_191,
            nnz=4_500_000,
            kind="tfidf",
            q1=(0.08, 0.2),
            q0=0.01,
            description="9,996 x 1,355,191 tf-idf, ~4.5M non-zeros (news20.binary shape)",
        ),
        FeatureSpec(
            "dense",
            n=2_000,
            b=20_000,
            nnz=0,
            kind="dense",
            description="2,000 x 20,000 Gaussian, continuous target",
        ),
    )
}

INSTANCE_SPECS: dict[str, InstanceSpec] = {
    s.name: s
    for s in (
        InstanceSpec(
            "stream-d1000",
            n=20_000,
            d=1_000,
            frame=100,
            description="20,000 dense instances, d = 1,000",
        ),
        InstanceSpec(
            "stream-d100000",
            n=10_000,
            d=100_000,
            density=0.01,
            frame=100,
            description="10,000 sparse instances (~1,000 non-zeros each), d = 100,000",
        ),
    )
}

# Small versions for --quick (every selector on every set in well under a minute).
QUICK_SIZES: dict[str, tuple[int, int]] = {
    "dorothea": (400, 3_000),
    "thrombin": (300, 3_000),
    "news20": (400, 4_000),
    "dense": (200, 600),
    "stream-d1000": (600, 100),
    "stream-d100000": (200, 2_000),
}


@dataclass
class FeatureData:
    """A feature-stream data set: X is ``(n, b)``, rows = instances (CSC, or dense)."""

    spec: FeatureSpec
    X: Any  # scipy.sparse.csc_matrix (sparse sets) or a C-contiguous (n, b) float64 array
    y: FloatArray
    names: list[str]
    relevant: list[str]
    # feature name -> the relevant feature it stands for (the feature itself or a copy)
    stands_for: dict[str, str] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def b(self) -> int:
        return int(self.X.shape[1])

    @property
    def nnz(self) -> int:
        return int(self.X.nnz) if self.spec.sparse else int(np.count_nonzero(self.X))

    def columns(self, lo: int, hi: int) -> Any:
        """Columns ``lo:hi`` feature-major ``(hi - lo, n)``, as a selector takes them."""
        if self.spec.sparse:
            return self.X[:, lo:hi].T.tocsr()
        return np.ascontiguousarray(self.X[:, lo:hi].T)

    def recall(self, selected: list[str] | tuple[str, ...]) -> float:
        found = {self.stands_for[s] for s in selected if s in self.stands_for}
        return len(found) / max(1, len(self.relevant))


@dataclass
class InstanceData:
    """An instance-stream data set: X is ``(n, d)`` (CSR for sparse sets), y in {-1, +1}."""

    spec: InstanceSpec
    X: Any
    y: FloatArray
    names: list[str]
    relevant: list[str]

    def rows(self, lo: int, hi: int, dtype: str = "float64") -> FloatArray:
        """Dense rows ``lo:hi``."""
        part = self.X[lo:hi]
        dense = part.toarray() if self.spec.sparse else part
        return np.ascontiguousarray(dense, dtype=dtype)

    def recall(self, selected: list[str] | tuple[str, ...]) -> float:
        return len(set(selected) & set(self.relevant)) / max(1, len(self.relevant))


# --------------------------------------------------------------------------- feature streams


def make_features(spec: FeatureSpec, seed: int = 0) -> FeatureData:
    """Generate a feature-stream data set (see the module docstring).

    >>> d = make_features(FEATURE_SPECS["dorothea"].scaled(100, 500), seed=1)
    >>> d.X.shape, d.X.format, len(d.relevant), set(np.unique(d.X.data).tolist())
    ((100, 500), 'csc', 10, {1.0})
    >>> make_features(FEATURE_SPECS["dorothea"].scaled(100, 500), seed=1).X.nnz == d.X.nnz
    True
    """
    if spec.kind == "dense":
        return _dense_features(spec, seed)
    return _sparse_features(spec, seed)


def _slots(rng: np.random.Generator, b: int, relevant: int, copies: int) -> IntArray:
    """Distinct column positions: relevant features first, then their copies."""
    count = relevant * (1 + copies)
    if count > b:
        raise ValueError(f"{count} planted features do not fit in {b} columns")
    return rng.choice(b, size=count, replace=False).astype(np.int64)


def _sparse_features(spec: FeatureSpec, seed: int) -> FeatureData:
    rng = np.random.default_rng([seed, spec.n, spec.b])
    n, b = spec.n, spec.b
    y = (rng.random(n) < spec.positive_rate).astype(np.float64)
    if y.min() == y.max():  # a tiny quick set could draw one class only
        y[: max(1, n // 2)] = 1.0 - y[0]
    slots = _slots(rng, b, spec.relevant, spec.copies)
    planted_rows = _planted_rows(rng, spec, y)
    planted_nnz = sum(r.size for r in planted_rows)

    # Noise columns: heavy-tailed lengths with the requested total, rows uniform.
    noise_budget = max(0, spec.nnz - planted_nnz)
    sigma = spec.spread
    mean_len = noise_budget / max(1, b - slots.size)
    mu = math.log(max(mean_len, 1e-9)) - sigma * sigma / 2
    lengths = np.minimum(rng.poisson(rng.lognormal(mu, sigma, size=b)), n).astype(np.int64)
    lengths[slots] = 0
    cols = np.repeat(np.arange(b, dtype=np.int64), lengths)
    rows = rng.integers(0, n, size=cols.size, dtype=np.int64)
    # Sorted unique (column, row) keys are the CSC order; duplicates collapse.
    keys = np.unique(cols * n + rows)
    planted_keys = np.concatenate(
        [slots[k] * n + r for k, r in enumerate(planted_rows)] or [np.zeros(0, np.int64)]
    )
    keys = np.union1d(keys, planted_keys)
    col_of, row_of = np.divmod(keys, n)
    indptr = np.zeros(b + 1, dtype=np.int64)
    np.cumsum(np.bincount(col_of, minlength=b), out=indptr[1:])
    tfidf = spec.kind == "tfidf"
    data = _tfidf_values(rng, row_of, col_of, n, b) if tfidf else np.ones(keys.size)
    X = scipy.sparse.csc_matrix(
        (data, row_of.astype(np.int32), indptr.astype(np.int32)), shape=(n, b)
    )
    names = [f"f{j}" for j in range(b)]
    relevant = [names[s] for s in slots[: spec.relevant]]
    stands_for = {names[s]: names[slots[k % spec.relevant]] for k, s in enumerate(slots)}
    return FeatureData(spec, X, y, names, relevant, stands_for)


def _planted_rows(rng: np.random.Generator, spec: FeatureSpec, y: FloatArray) -> list[IntArray]:
    """Row sets of the relevant features, then of their copies (in slot order)."""
    n = spec.n
    pos = y > 0
    originals: list[IntArray] = []
    for _ in range(spec.relevant):
        q1 = rng.uniform(*spec.q1)
        on = np.where(pos, rng.random(n) < q1, rng.random(n) < spec.q0)
        originals.append(np.flatnonzero(on).astype(np.int64))
    copies: list[IntArray] = []
    for _ in range(spec.copies):
        for rows in originals:
            kept = rows[rng.random(rows.size) >= 0.1]
            extra = rng.integers(0, n, size=max(1, rows.size // 20), dtype=np.int64)
            copies.append(np.union1d(kept, extra))
    return originals + copies


def _tfidf_values(
    rng: np.random.Generator, rows: IntArray, cols: IntArray, n: int, b: int
) -> FloatArray:
    """(1 + log tf) * idf, each instance scaled to unit Euclidean length."""
    tf = 1.0 + np.log(rng.geometric(0.6, size=rows.size).astype(np.float64))
    df = np.bincount(cols, minlength=b).astype(np.float64)
    values = tf * np.log((1.0 + n) / (1.0 + df[cols]))
    values = np.maximum(values, 1e-3)
    norms = np.sqrt(np.bincount(rows, weights=values * values, minlength=n))
    return values / norms[rows]


def _dense_features(spec: FeatureSpec, seed: int) -> FeatureData:
    rng = np.random.default_rng([seed, spec.n, spec.b])
    n, b = spec.n, spec.b
    slots = _slots(rng, b, spec.relevant, spec.copies)
    signals = rng.normal(size=(spec.relevant, n))
    y = signals.sum(axis=0) + 0.5 * rng.normal(size=n)
    X = rng.normal(size=(n, b))
    for k in range(spec.relevant):
        X[:, slots[k]] = signals[k]
    for c in range(spec.copies):
        for k in range(spec.relevant):
            slot = slots[spec.relevant * (1 + c) + k]
            X[:, slot] = signals[k] + 0.3 * rng.normal(size=n)
    names = [f"f{j}" for j in range(b)]
    relevant = [names[s] for s in slots[: spec.relevant]]
    stands_for = {names[s]: names[slots[k % spec.relevant]] for k, s in enumerate(slots)}
    return FeatureData(spec, np.ascontiguousarray(X), y, names, relevant, stands_for)


# --------------------------------------------------------------------------- instance streams


def make_instances(spec: InstanceSpec, seed: int = 0) -> InstanceData:
    """Generate an instance-stream data set.

    The ``relevant`` planted features share a latent factor z and have three
    times the scale of the others; the label is the sign of z plus a little
    noise. So the planted features are what a supervised selector (OFS) needs
    to predict the label and what dominates the leading singular vectors an
    unsupervised one (FSDS) scores by. Values are float32-exact, so frames sent
    as float32 carry exactly the data an in-process run sees.

    >>> s = make_instances(INSTANCE_SPECS["stream-d100000"].scaled(50, 400), seed=2)
    >>> s.X.shape, s.X.format, sorted(set(s.y.tolist()))
    ((50, 400), 'csr', [-1.0, 1.0])
    """
    rng = np.random.default_rng([seed, spec.n, spec.d])
    n, d = spec.n, spec.d
    slots = rng.choice(d, size=spec.relevant, replace=False).astype(np.int64)
    z = rng.normal(size=n)
    y = np.where(z + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    loadings = rng.uniform(0.7, 1.0, size=spec.relevant)
    planted = 3.0 * (z[:, None] * loadings + 0.5 * rng.normal(size=(n, spec.relevant)))
    if not spec.sparse:
        X = rng.normal(size=(n, d))
        X[:, slots] = planted
        X = X.astype(np.float32).astype(np.float64)
    else:
        per_row = max(1, round(spec.density * d))
        cols = rng.integers(0, d, size=(n, per_row), dtype=np.int64)
        keys = np.unique((np.arange(n, dtype=np.int64)[:, None] * d + cols).ravel())
        row_of, col_of = np.divmod(keys, d)
        keep = ~np.isin(col_of, slots)
        row_of, col_of = row_of[keep], col_of[keep]
        # The background terms are rare and small (scale 0.3, like tf-idf weights
        # beside a strong signal): with ~1,000 of them in every instance at the
        # planted features' noise scale, no online learner with a budget of 20
        # weights could tell the planted ones apart.
        values = 0.3 * rng.normal(size=row_of.size)
        # Planted features are present in every instance: a dense block of `relevant` columns.
        prow = np.repeat(np.arange(n, dtype=np.int64), spec.relevant)
        pcol = np.tile(slots, n)
        order = np.lexsort((np.concatenate([col_of, pcol]), np.concatenate([row_of, prow])))
        all_rows = np.concatenate([row_of, prow])[order]
        all_cols = np.concatenate([col_of, pcol])[order]
        all_vals = np.concatenate([values, planted.ravel()])[order]
        all_vals = all_vals.astype(np.float32).astype(np.float64)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(all_rows, minlength=n), out=indptr[1:])
        X = scipy.sparse.csr_matrix((all_vals, all_cols, indptr), shape=(n, d))
    names = [f"x{j}" for j in range(d)]
    return InstanceData(spec, X, y, names, [names[s] for s in slots])


def feature_spec(name: str, quick: bool = False) -> FeatureSpec:
    spec = FEATURE_SPECS[name]
    return spec.scaled(*QUICK_SIZES[name]) if quick else spec


def instance_spec(name: str, quick: bool = False) -> InstanceSpec:
    spec = INSTANCE_SPECS[name]
    if quick:
        n, d = QUICK_SIZES[name]
        return spec.scaled(n, d, frame=min(spec.frame, 50))
    return spec


__all__ = [
    "FEATURE_SPECS",
    "INSTANCE_SPECS",
    "QUICK_SIZES",
    "FeatureData",
    "FeatureSpec",
    "InstanceData",
    "InstanceSpec",
    "feature_spec",
    "instance_spec",
    "make_features",
    "make_instances",
]
