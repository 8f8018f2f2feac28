"""Tests that could not be made: the ``untestable`` parameter, its counters and its warning.

docs/algorithms.md, "Untestable tests". A conditional-independence test is
*untestable* when its data cannot decide it: a G2 / chi-square test with fewer
than 5 instances per degree of freedom, or a Fisher z test with
n - |S| - 3 <= 0 or an undefined partial correlation (a singular conditioning
set). The reference rule, ``untestable: "independent"`` (the default), counts
such a test as independent; ``untestable: "dependent"`` (OSFS, Fast-OSFS,
SAOLA, group-SAOLA) counts it as dependent, so no feature is rejected or
evicted on the strength of a test that could not be made.

Either way the selector counts the tests it made (``tests_performed``) and
those that were untestable (``tests_untestable``); once more than
:data:`WARN_FRACTION` of them were untestable, its status carries the
:data:`WARNING_CODE` warning, which says why and what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream.selectors.params import StrOptions
from featurestream.stats.fisher_z import fisher_z_classes

UNTESTABLE_MODES: tuple[str, ...] = ("independent", "dependent")
UNTESTABLE = StrOptions(UNTESTABLE_MODES)

# More than this fraction of untestable tests raises the warning.
WARN_FRACTION = 0.10
WARNING_CODE = "untestable-tests"

Warning = dict[str, str]


def too_many(performed: int, untestable: int) -> bool:
    """True once more than WARN_FRACTION of the tests made were untestable.

    >>> too_many(10, 1), too_many(10, 2), too_many(0, 0)
    (False, True, False)
    """
    # Integer arithmetic: 10 u > t, no rounding at the boundary.
    return performed > 0 and 10 * untestable > performed


def fisher_z_untestable(r: npt.ArrayLike, n: int) -> npt.NDArray[np.bool_]:
    """Where an unconditional fisher_z(a, b | {}) cannot be made: r undefined, or n - 3 <= 0.

    Exactly where ``fisher_z_statistic(r, n, 0)`` is NaN, without its logarithms
    (|r| = 1 gives an infinite statistic: testable, dependent).

    >>> fisher_z_untestable(np.array([0.5, np.nan, 1.0]), 10).tolist()
    [False, True, False]
    >>> fisher_z_untestable(np.array([0.5]), 3).tolist()
    [True]
    """
    r_arr = np.asarray(r, dtype=np.float64)
    if n - 3 <= 0:
        return np.ones(r_arr.shape, dtype=bool)
    return np.asarray(np.isnan(r_arr))


def fisher_z_relevance(
    rs: Sequence[npt.NDArray[np.float64]],
    n: int,
    alpha: float,
    constant: npt.NDArray[np.bool_],
    untestable: str,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """SAOLA's relevance step under Fisher z: (dep, relevant, untestable) per feature.

    ``rs`` holds r(x, y_k) for each target column (one for a binary or
    continuous target). One test per feature, untestable when one of its class
    tests is; with ``untestable == "dependent"`` such a feature is relevant and,
    since no state holds a NaN, a kept feature whose r is undefined has dep 0.
    """
    dep, independent = fisher_z_classes(rs, n, 0, alpha)
    relevant = ~constant & ~independent
    untested = ~constant & fisher_z_untestable(rs[0], n)
    for r in rs[1:]:
        untested |= ~constant & fisher_z_untestable(r, n)
    if untestable == "dependent":
        relevant |= untested
        dep = np.where(relevant & np.isnan(dep), 0.0, dep)
    return dep, relevant, untested


def untestable_warnings(params: Any, performed: int, untestable: int) -> list[Warning]:
    """The status warning of a selector with these counters (empty when there is none).

    ``params`` has ``test`` and ``untestable``.

    >>> class P:
    ...     test, untestable = "g2", "independent"
    >>> [w["code"] for w in untestable_warnings(P(), 100, 11)]
    ['untestable-tests']
    >>> untestable_warnings(P(), 100, 10)
    []
    """
    if not too_many(performed, untestable):
        return []
    share = 100.0 * untestable / performed
    head = (
        f"{untestable} of {performed} conditional-independence tests ({share:.0f}%) "
        "could not be made"
    )
    if params.test in ("g2", "chi2"):
        why = (
            ": too few instances per degree of freedom (a G2 or chi-square test needs at "
            "least 5 instances per degree of freedom, and its degrees of freedom multiply "
            "with the levels of every conditioning feature)"
        )
        todo = "use fewer levels per feature (bin or merge values), more instances"
    else:
        why = (
            ": too few instances per degree of freedom (a Fisher z test needs more than "
            "|S| + 3 instances) or a conditioning set whose columns are collinear"
        )
        todo = "use more instances, drop duplicated or collinear features"
    if params.untestable == "independent":
        effect = (
            " They counted as independent, so features may have been rejected or evicted "
            "without evidence."
        )
        todo += ', or create the stream with untestable: "dependent"'
    else:
        effect = ' They counted as dependent (untestable: "dependent").'
    return [{"code": WARNING_CODE, "message": f"{head}{why}.{effect} To fix it, {todo}."}]


__all__ = [
    "UNTESTABLE",
    "UNTESTABLE_MODES",
    "WARNING_CODE",
    "WARN_FRACTION",
    "fisher_z_untestable",
    "too_many",
    "untestable_warnings",
]
