"""``featurestream compare``: feature-stream selectors judged side by side on data sets.

Each data set is replayed, column by column, into one stream per selector on a
featurestream server (one it starts on the embedded memory store, or one given
by URL), through the Python SDK; every selection is scored by a scikit-learn
model on the same 5x2cv folds; the 5x2cv paired t test and combined F test
compare each pair of selectors (and all features) per data set, the Friedman
test and the Nemenyi critical difference over data sets (``run``). The result
prints as a table, serialises to JSON (``report``) and draws as SVG (``svg``).

For example (it starts a server, so it is not run as a doctest)::

    from featurestream.compare import compare

    result = compare(["breast_cancer", "wine"], ["saola", "alpha_investing"], model="knn")
    print(result.table())
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from featurestream.compare.data import BUILTIN, Dataset, from_arrays, load
    from featurestream.compare.results import (
        ALL_FEATURES,
        DatasetResult,
        MethodResult,
        PairTest,
        Ranking,
        Run,
    )
    from featurestream.compare.run import Comparison, compare

# Loaded on first use: the command line builds its parser from featurestream.compare.command,
# and every featurestream command would otherwise import scikit-learn to start.
_HOME = {
    "BUILTIN": "data",
    "Dataset": "data",
    "from_arrays": "data",
    "load": "data",
    "ALL_FEATURES": "results",
    "DatasetResult": "results",
    "MethodResult": "results",
    "PairTest": "results",
    "Ranking": "results",
    "Run": "results",
    "Comparison": "run",
    "compare": "run",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'featurestream.compare' has no attribute {name!r}")
    return getattr(importlib.import_module(f"featurestream.compare.{_HOME[name]}"), name)


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
