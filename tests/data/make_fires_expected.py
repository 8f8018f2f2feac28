"""Regenerate ``tests/data/fires_expected.json``, the FIRES conformance vectors.

The vectors are our own, computed by the transcription below of the rules in
docs/algorithms/fires.md ("Exact rules", and "Class targets" for one-vs-rest)
and docs/algorithms.md ("Targets"). It is written from those rules alone: it
imports nothing of ``featurestream``, and goes one instance at a time, summing
each batch's gradient over its instances in a plain loop, with
``scipy.stats.norm`` for the densities.

* ``params`` / ``expected``: a seeded binary stream (d = 20 features, 10
  batches of 100; y = sign(X beta + noise) with five informative features of
  decreasing strength, labels in {-1, +1}).
* ``multiclass``: a seeded stream of three string classes (d = 20, 12 batches
  of 100): each class shifts the mean of its own features; every batch holds
  every class. One model per class in sorted order of the labels, each learning
  its class (+1) against the rest (-1); a feature's weight is the largest of
  its three per-class weights, each min-max scaled as a binary stream's.

Both use the default FIRES parameters with ``scale: "none"``; each stores its
parameters, the final mu and sigma (one row per class for the multi-class
one), the weights and the top ``num_features``.
``tests/unit/stats/test_fires.py`` and ``tests/unit/selectors/test_fires.py``
rebuild the streams from the stored parameters and check the project against
the stored values. Regenerate only after a deliberate change of the rules
(and say so in the commit), from the repository root::

    python -m tests.data.make_fires_expected
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm

OUTPUT = Path(__file__).with_name("fires_expected.json")

FIRES_DEFAULTS: dict[str, Any] = {
    "num_features": 10,
    "mu_init": 0.0,
    "sigma_init": 1.0,
    "penalty_s": 0.01,
    "penalty_r": 0.01,
    "lr_mu": 0.01,
    "lr_sigma": 0.01,
    "epochs": 1,
    "scale_weights": True,
    "scale": "none",
}

PARAMS: dict[str, Any] = {
    "seed": 20140,
    "d": 20,
    "batches": 10,
    "batch_size": 100,
    # beta: the true coefficients of the informative features (index -> value).
    "beta": {"3": 2.0, "7": -1.5, "11": 1.0, "15": -0.75, "19": 0.5},
    "label_noise_sd": 0.5,
    "fires": FIRES_DEFAULTS,
}

MULTICLASS_PARAMS: dict[str, Any] = {
    "seed": 20200,
    "d": 20,
    "batches": 12,
    "batch_size": 100,
    # The classes in the order they are drawn (not their sorted order), each with
    # the shift of the mean of its features (feature index -> shift).
    "classes": ["tern", "heron", "avocet"],
    "shifts": {
        "tern": {"2": 1.5, "14": -1.0},
        "heron": {"5": -1.25, "9": 0.75},
        "avocet": {"17": 1.0, "2": -0.5},
    },
    "fires": FIRES_DEFAULTS,
}


def make_stream(params: dict[str, Any]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The batches (X_b, y_b) of the binary stream, y in {-1, +1}."""
    rng = np.random.default_rng(params["seed"])
    d = params["d"]
    beta = np.zeros(d)
    for index, value in params["beta"].items():
        beta[int(index)] = value
    batches = []
    for _ in range(params["batches"]):
        X = rng.normal(size=(params["batch_size"], d))
        noise = rng.normal(scale=params["label_noise_sd"], size=params["batch_size"])
        y = np.where(X @ beta + noise >= 0.0, 1.0, -1.0)
        batches.append((X, y))
    return batches


def make_multiclass_stream(params: dict[str, Any]) -> list[tuple[np.ndarray, list[str]]]:
    """The batches (X_b, labels_b) of the multi-class stream; labels are the class strings."""
    rng = np.random.default_rng(params["seed"])
    d, size = params["d"], params["batch_size"]
    classes = params["classes"]
    shift = np.zeros((len(classes), d))
    for k, name in enumerate(classes):
        for index, value in params["shifts"][name].items():
            shift[k, int(index)] = value
    batches = []
    for _ in range(params["batches"]):
        # Every class in every batch: a cycle through the classes, then shuffled.
        drawn = rng.permutation(np.arange(size) % len(classes))
        X = rng.normal(size=(size, d)) + shift[drawn]
        batches.append((X, [classes[k] for k in drawn]))
    return batches


def _batch_step(
    mu: np.ndarray, sigma: np.ndarray, X: np.ndarray, y: np.ndarray, f: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """One batch, ``epochs`` times: steps 1-3 of the rules, instance after instance."""
    n = X.shape[0]
    for _ in range(f["epochs"]):
        sum_mu = np.zeros_like(mu)
        sum_sigma = np.zeros_like(sigma)
        for i in range(n):
            x, label = X[i], y[i]
            dot = float(np.sum(x * mu))
            rho = float(np.sqrt(1.0 + np.sum(x * x * sigma * sigma)))
            t = label * dot / rho
            r = float(np.exp(norm.logpdf(t) - norm.logcdf(t)))  # phi(t) / Phi(t), stably
            sum_mu += r * label / rho * x
            sum_sigma += r * (-label / rho**3) * x * x * sigma * dot
        mu = mu + f["lr_mu"] * (sum_mu / n)
        sigma = sigma + f["lr_sigma"] * (sum_sigma / n)
        sigma = np.where(sigma < 0.0, 0.0, sigma)
    return mu, sigma


def _weights(mu: np.ndarray, sigma: np.ndarray, f: dict[str, Any]) -> np.ndarray:
    w = (mu**2 - f["penalty_s"] * sigma**2) / (2.0 * f["penalty_r"])
    if f["scale_weights"]:
        lo, hi = w.min(), w.max()
        w = np.zeros_like(w) if hi == lo else (w - lo) / (hi - lo)
    return w


def _top(w: np.ndarray, m: int) -> list[int]:
    """The m largest weights in descending order, ties to the lower index."""
    ranked = sorted(range(len(w)), key=lambda j: (-w[j], j))
    return ranked[:m]


def compute(params: dict[str, Any]) -> dict[str, Any]:
    """Run the binary stream; returns the expected values as JSON-ready lists."""
    f = params["fires"]
    mu = np.full(params["d"], float(f["mu_init"]))
    sigma = np.full(params["d"], float(f["sigma_init"]))
    for X, y in make_stream(params):
        mu, sigma = _batch_step(mu, sigma, X, y, f)
    weights = _weights(mu, sigma, f)
    return {
        "mu": mu.tolist(),
        "sigma": sigma.tolist(),
        "weights": weights.tolist(),
        "top": _top(weights, f["num_features"]),
    }


def compute_multiclass(params: dict[str, Any]) -> dict[str, Any]:
    """Run the multi-class stream one-vs-rest; the models in sorted order of the labels."""
    f = params["fires"]
    classes = sorted(params["classes"])
    mus = [np.full(params["d"], float(f["mu_init"])) for _ in classes]
    sigmas = [np.full(params["d"], float(f["sigma_init"])) for _ in classes]
    for X, labels in make_multiclass_stream(params):
        for k, name in enumerate(classes):
            y = np.array([1.0 if label == name else -1.0 for label in labels])
            mus[k], sigmas[k] = _batch_step(mus[k], sigmas[k], X, y, f)
    per_class = [_weights(mus[k], sigmas[k], f) for k in range(len(classes))]
    weights = np.max(np.stack(per_class), axis=0)
    return {
        "classes": classes,
        "mu": [m.tolist() for m in mus],
        "sigma": [s.tolist() for s in sigmas],
        "weights": weights.tolist(),
        "top": _top(weights, f["num_features"]),
    }


def main() -> None:
    """Write the JSON file next to this script."""
    document = {
        "params": PARAMS,
        "expected": compute(PARAMS),
        "multiclass": {
            "params": MULTICLASS_PARAMS,
            "expected": compute_multiclass(MULTICLASS_PARAMS),
        },
    }
    OUTPUT.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
