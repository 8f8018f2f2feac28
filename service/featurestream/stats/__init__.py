"""Statistical building blocks of the selectors .

See docs/algorithms.md, "Statistical building blocks".

Pure numpy/scipy, no I/O. Every function is deterministic and computes in float64.
"""

from __future__ import annotations

from featurestream.stats.columns import cross_dots, row_dots, standardize_rows
from featurestream.stats.drift import ADWIN, DETECTORS, PageHinkley, detections
from featurestream.stats.fires import fires_update, fires_update_ovr, fires_weights, top_m
from featurestream.stats.fisher_z import (
    FisherZResult,
    fisher_z,
    fisher_z_from_correlation,
    fisher_z_independent,
    partial_correlation,
)
from featurestream.stats.nrfs import NRFSResult, nrfs
from featurestream.stats.scaling import Standardised, standardise_running
from featurestream.stats.special import normal_quantile

__all__ = [
    "ADWIN",
    "DETECTORS",
    "FisherZResult",
    "NRFSResult",
    "PageHinkley",
    "Standardised",
    "cross_dots",
    "detections",
    "fires_update",
    "fires_update_ovr",
    "fires_weights",
    "fisher_z",
    "fisher_z_from_correlation",
    "fisher_z_independent",
    "normal_quantile",
    "nrfs",
    "partial_correlation",
    "row_dots",
    "standardise_running",
    "standardize_rows",
    "top_m",
]
