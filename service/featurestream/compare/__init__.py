"""``featurestream compare``: feature-stream selectors judged side by side on data sets.

Each data set is replayed, column by column, into one stream per selector on a
featurestream server (one it starts on the embedded memory store, or one given
by URL), through the Python SDK; every selection is scored by a scikit-learn
model on the same 5x2cv folds; the 5x2cv paired t test and combined F test
compare each pair of selectors (and all features) per data set, the Friedman
test and the Nemenyi critical difference over data sets (``run``). The result
prints as a table, serialises to JSON (``report``) and draws as SVG (``svg``).

>>> from featurestream.compare import compare  # doctest: +SKIP
>>> result = compare(["breast_cancer", "wine"], ["saola", "alpha_investing"], model="knn")
>>> print(result.table())  # doctest: +SKIP
"""

from __future__ import annotations

from featurestream.compare.data import BUILTIN, Dataset, from_arrays, load
from featurestream.compare.run import (
    ALL_FEATURES,
    Comparison,
    DatasetResult,
    MethodResult,
    PairTest,
    Ranking,
    Run,
    compare,
)

__all__ = [
    "ALL_FEATURES",
    "BUILTIN",
    "Comparison",
    "Dataset",
    "DatasetResult",
    "MethodResult",
    "PairTest",
    "Ranking",
    "Run",
    "compare",
    "from_arrays",
    "load",
]
