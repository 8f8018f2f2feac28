"""Regenerate ``tests/data/fires_expected.json``, the FIRES conformance vector.

The vector is our own: a seeded binary stream (d = 20 features, 10 batches of
100 instances; y = sign(X beta + noise) with five informative features of
decreasing strength), run through :func:`featurestream.stats.fires.fires_update`
with the default FIRES parameters and ``scale: "none"``, then
:func:`fires_weights` and :func:`top_m`. The JSON holds the parameters, the
final weights, mu and sigma, and the top 10.

``tests/unit/stats/test_fires.py`` rebuilds the stream from the stored
parameters and compares. Regenerate only after a deliberate change of the
update (and say so in the commit), from the repository root::

    python -m tests.data.make_fires_expected
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from featurestream.stats.fires import fires_update, fires_weights, top_m

OUTPUT = Path(__file__).with_name("fires_expected.json")

PARAMS: dict[str, Any] = {
    "seed": 20140,
    "d": 20,
    "batches": 10,
    "batch_size": 100,
    # beta: the true coefficients of the informative features (index -> value).
    "beta": {"3": 2.0, "7": -1.5, "11": 1.0, "15": -0.75, "19": 0.5},
    "label_noise_sd": 0.5,
    "fires": {
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
    },
}


def make_stream(params: dict[str, Any]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The batches (X_b, y_b) of the stream, y in {-1, +1}."""
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


def compute(params: dict[str, Any]) -> dict[str, Any]:
    """Run FIRES over the stream; returns the expected values as JSON-ready lists."""
    f = params["fires"]
    mu = np.full(params["d"], f["mu_init"])
    sigma = np.full(params["d"], f["sigma_init"])
    for X, y in make_stream(params):
        mu, sigma = fires_update(
            mu, sigma, X, y, lr_mu=f["lr_mu"], lr_sigma=f["lr_sigma"], epochs=f["epochs"]
        )
    weights = fires_weights(
        mu,
        sigma,
        penalty_s=f["penalty_s"],
        penalty_r=f["penalty_r"],
        scale_weights=f["scale_weights"],
    )
    return {
        "mu": mu.tolist(),
        "sigma": sigma.tolist(),
        "weights": weights.tolist(),
        "top": top_m(weights, f["num_features"]).tolist(),
    }


def main() -> None:
    """Write the JSON file next to this script."""
    document = {"params": PARAMS, "expected": compute(PARAMS)}
    OUTPUT.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
