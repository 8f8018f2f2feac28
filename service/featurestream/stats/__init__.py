"""Statistical building blocks of the selectors .

See docs/algorithms.md, "Statistical building blocks".

Pure numpy/scipy, no I/O. Every function is deterministic and computes in float64.
"""

from __future__ import annotations

from featurestream.stats.columns import cross_dots, row_dots, standardize_rows
from featurestream.stats.fisher_z import (
    FisherZResult,
    fisher_z,
    fisher_z_from_correlation,
    fisher_z_independent,
    partial_correlation,
)
from featurestream.stats.special import normal_quantile

__all__ = [
    "FisherZResult",
    "cross_dots",
    "fisher_z",
    "fisher_z_from_correlation",
    "fisher_z_independent",
    "normal_quantile",
    "partial_correlation",
    "row_dots",
    "standardize_rows",
]
