"""Statistics for judging feature selections: stability, significance tests, cross-validation.

Pure functions over numpy arrays and sets of names, no I/O. ``crossval`` needs
scikit-learn; ``stability`` and ``compare`` need only numpy and scipy.
"""

from __future__ import annotations

from featurestream.evaluation.compare import (
    FriedmanResult,
    NemenyiResult,
    SignificanceResult,
    cd_groups,
    combined_5x2cv_f_test,
    friedman,
    nemenyi,
    nemenyi_q,
    paired_5x2cv_t_test,
)
from featurestream.evaluation.stability import (
    consecutive_jaccard,
    jaccard,
    nogueira,
    nogueira_from_matrix,
    nogueira_over,
    selection_matrix,
)

__all__ = [
    "FriedmanResult",
    "NemenyiResult",
    "SignificanceResult",
    "cd_groups",
    "combined_5x2cv_f_test",
    "consecutive_jaccard",
    "friedman",
    "jaccard",
    "nemenyi",
    "nemenyi_q",
    "nogueira",
    "nogueira_from_matrix",
    "nogueira_over",
    "paired_5x2cv_t_test",
    "selection_matrix",
]
