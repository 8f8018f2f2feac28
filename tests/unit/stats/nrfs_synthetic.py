"""The synthetic data set of the NRFS paper (section I.B, Figure 1, Table I).

Huang, Yoo, Yu and Qin ("Noise Resistant Unsupervised Feature Selection via
Multi Perspective Correlations", ICDM 2014) motivate NRFS with 1280 instances
in 34 features: four clusters of 300 instances plus 80 noisy instances, where
only the first four features carry the cluster structure. This module draws
data sets of that design; the exact centres and spreads are not published, so
the values below are read off the axes of the figure.

Design:

* Plane (f1, f2), axes about 0-400 by 0-210: clusters 0 and 1 ("red" and
  "blue") are Gaussian blobs, clusters 2 and 3 ("green" and "yellow") are
  uniform over axis-aligned rectangles. Each cluster sits in its own place.
* Plane (f3, f4), axes about 0-200 by 0-200, the other way round: clusters 0
  and 1 are uniform rectangles and clusters 2 and 3 Gaussian blobs, arranged
  differently from the first plane so that f3 and f4 are not copies of f1, f2.
* f5-f34: noise, uniform on [0, 150] for every instance, unrelated to the
  clusters (the paper's Figure 1(c) shows f5 and f6 over that range).
* 80 noisy instances: every feature uniform over the range of its axis
  (f1 on [0, 400], f2 on [0, 210], f3 and f4 on [0, 200], the noise features
  on [0, 150]), so they belong to no cluster and are scattered between them.

Rows are shuffled with the same seeded generator, so a window holds the
clusters and the noise interleaved as a stream would deliver them.
"""

from __future__ import annotations

import numpy as np

CLUSTER_SIZE = 300
N_CLUSTERS = 4
N_NOISY = 80
N_NOISE_FEATURES = 30
NOISY_LABEL = -1

# (f1, f2): Gaussian (centre, sd) for clusters 0 and 1, rectangle (lo, hi) for 2 and 3.
_GAUSS_12 = {0: ((70.0, 160.0), 12.0), 1: ((170.0, 50.0), 12.0)}
_RECT_12 = {2: ((240.0, 120.0), (300.0, 190.0)), 3: ((320.0, 20.0), (380.0, 80.0))}
# (f3, f4): rectangles for clusters 0 and 1, Gaussians for 2 and 3.
_RECT_34 = {0: ((10.0, 20.0), (60.0, 80.0)), 1: ((130.0, 120.0), (190.0, 180.0))}
_GAUSS_34 = {2: ((40.0, 150.0), 10.0), 3: ((160.0, 45.0), 10.0)}
_AXIS_HIGH = np.array([400.0, 210.0, 200.0, 200.0])
_NOISE_HIGH = 150.0


def _gaussian(
    rng: np.random.Generator, centre: tuple[float, float], sd: float, size: int
) -> np.ndarray:
    return np.asarray(centre) + rng.normal(scale=sd, size=(size, 2))


def _rectangle(
    rng: np.random.Generator, lo: tuple[float, float], hi: tuple[float, float], size: int
) -> np.ndarray:
    return rng.uniform(lo, hi, size=(size, 2))


def make_dataset(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw one data set: X (1280 x 34) and labels (0..3, or -1 for noisy instances)."""
    rng = np.random.default_rng(seed)
    blocks = []
    labels = []
    for k in range(N_CLUSTERS):
        if k in _GAUSS_12:
            f12 = _gaussian(rng, *_GAUSS_12[k], CLUSTER_SIZE)
            f34 = _rectangle(rng, *_RECT_34[k], CLUSTER_SIZE)
        else:
            f12 = _rectangle(rng, *_RECT_12[k], CLUSTER_SIZE)
            f34 = _gaussian(rng, *_GAUSS_34[k], CLUSTER_SIZE)
        noise = rng.uniform(0.0, _NOISE_HIGH, size=(CLUSTER_SIZE, N_NOISE_FEATURES))
        blocks.append(np.hstack([f12, f34, noise]))
        labels.append(np.full(CLUSTER_SIZE, k))
    informative = rng.uniform(0.0, _AXIS_HIGH, size=(N_NOISY, 4))
    noise = rng.uniform(0.0, _NOISE_HIGH, size=(N_NOISY, N_NOISE_FEATURES))
    blocks.append(np.hstack([informative, noise]))
    labels.append(np.full(N_NOISY, NOISY_LABEL))
    X = np.vstack(blocks)
    y = np.concatenate(labels)
    order = rng.permutation(X.shape[0])
    return X[order], y[order]
