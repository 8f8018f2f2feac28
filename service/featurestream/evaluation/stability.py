"""Stability of a sequence of feature selections.

Two measures over selections (sets of feature names):

* the Jaccard similarity of two selections, |A & B| / |A | B|, used for
  consecutive selections of a stream;
* Nogueira's estimator over M selections drawn from a universe of d features
  (for a stream: the features seen so far). With Z the M x d 0/1 matrix
  (Z[i, f] = 1 when selection i holds feature f), p_f the mean of column f,
  k_bar the mean selection size and s_f^2 = M/(M-1) p_f (1 - p_f) the unbiased
  sample variance of column f,

      Phi = 1 - mean_f(s_f^2) / ((k_bar/d) (1 - k_bar/d)).

  Phi is 1 for identical selections, about 0 for selections drawn at random
  with the same sizes, and at least -1/(M-1).

Degenerate cases, fixed here so that callers need not guess:

* Jaccard of two empty selections is 1.0 (they are identical).
* Nogueira with M < 2 selections raises ``InvalidInput``: a sample variance
  needs two observations.
* Nogueira when every selection is empty (k_bar = 0) or every selection holds
  the whole universe (k_bar = d, which includes d = 0): the denominator is 0.
  All selections are then identical, so the result is 1.0, the value Phi takes
  for identical selections of any other size.

References
----------
Nogueira, Sechidis, Brown, "On the Stability of Feature Selection Algorithms",
Journal of Machine Learning Research 18(174), 2018.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
import numpy.typing as npt

from featurestream.errors import InvalidInput

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "consecutive_jaccard",
    "jaccard",
    "nogueira",
    "nogueira_from_matrix",
    "nogueira_over",
    "selection_matrix",
]


def jaccard(a: Collection[str], b: Collection[str]) -> float:
    """Jaccard similarity |a & b| / |a | b| of two selections; 1.0 for two empty ones.

    Parameters
    ----------
    a, b
        Selections, as collections of feature names (duplicates are ignored).

    Examples
    --------
    >>> jaccard({"x1", "x2", "x3"}, {"x2", "x3", "x4"})
    0.5
    >>> jaccard(set(), set())
    1.0
    """
    sa, sb = set(a), set(b)
    union = len(sa | sb)
    if union == 0:
        # Two empty selections are identical, hence perfectly similar.
        return 1.0
    return len(sa & sb) / union


def consecutive_jaccard(selections: Sequence[Collection[str]]) -> list[float]:
    """Jaccard similarity of each selection with the next one (M - 1 values).

    Examples
    --------
    >>> consecutive_jaccard([{"a"}, {"a", "b"}, {"a", "b"}])
    [0.5, 1.0]
    """
    return [jaccard(selections[i], selections[i + 1]) for i in range(len(selections) - 1)]


def selection_matrix(selections: Sequence[Collection[str]], universe: Sequence[str]) -> FloatArray:
    """The M x d 0/1 matrix Z of selections over an ordered universe of names.

    Raises ``InvalidInput`` when the universe repeats a name or a selection
    names a feature outside it.

    Examples
    --------
    >>> selection_matrix([{"b"}, {"a", "c"}], ["a", "b", "c"])
    array([[0., 1., 0.],
           [1., 0., 1.]])
    """
    index = {name: j for j, name in enumerate(universe)}
    if len(index) != len(universe):
        raise InvalidInput("The universe of features repeats a name.", field="universe")
    z = np.zeros((len(selections), len(universe)), dtype=np.float64)
    for i, selection in enumerate(selections):
        for name in selection:
            j = index.get(name)
            if j is None:
                raise InvalidInput(
                    f"Selection {i} names {name!r}, which is not in the universe of features.",
                    field="selections",
                )
            z[i, j] = 1.0
    return z


def nogueira_from_matrix(z: npt.ArrayLike) -> float:
    """Nogueira's stability estimator Phi of an M x d 0/1 selection matrix.

    Parameters
    ----------
    z
        M x d array of 0/1 (or booleans): row i is selection i, column f is
        feature f of the universe.

    Returns
    -------
    float
        Phi, in [-1/(M-1), 1]; 1.0 when every selection is empty or every one
        is the whole universe (see the module docstring).

    Examples
    --------
    Two selections of one feature out of two, disjoint: p = (1/2, 1/2),
    s_f^2 = 2/1 * 1/4 = 1/2, k_bar/d = 1/2, so Phi = 1 - (1/2)/(1/4) = -1,
    the minimum -1/(M-1) for M = 2.

    >>> nogueira_from_matrix([[1, 0], [0, 1]])
    -1.0
    >>> nogueira_from_matrix([[1, 0, 1], [1, 0, 1], [1, 0, 1]])
    1.0
    """
    a = np.asarray(z, dtype=np.float64)
    if a.ndim != 2:
        raise InvalidInput(f"Expected an M x d matrix, got {a.ndim} dimension(s).", field="z")
    if not np.all((a == 0.0) | (a == 1.0)):
        raise InvalidInput("The selection matrix must hold only 0 and 1.", field="z")
    m, d = a.shape
    if m < 2:
        raise InvalidInput(f"Stability needs at least 2 selections, got {m}.", field="selections")
    k_bar = float(a.sum()) / m
    if k_bar == 0.0 or k_bar == d:
        # Denominator 0: all selections are empty, or all are the whole universe,
        # so they are identical; Phi is 1 for identical selections of any size.
        return 1.0
    p = a.mean(axis=0)
    s2 = m / (m - 1) * p * (1.0 - p)
    q = k_bar / d
    return float(1.0 - s2.mean() / (q * (1.0 - q)))


def nogueira_over(selections: Sequence[Collection[str]], d: int) -> float:
    """Nogueira's Phi of selections drawn from a universe of ``d`` features, by counts.

    The same estimator as :func:`nogueira_from_matrix`, without the M x d matrix:
    a feature no selection holds has p = 0 and s_f^2 = 0, so the mean of s_f^2
    over the universe is the sum over the features some selection holds, divided
    by d. Cost O(sum of the selections' sizes), whatever d is (a stream may have
    seen millions of columns).

    >>> nogueira_over([{"a", "b"}, {"a", "b"}, {"a", "c"}], 4)
    0.3333...
    >>> nogueira_over([{"a"}, {"b"}], 2)
    -1.0
    """
    m = len(selections)
    if m < 2:
        raise InvalidInput(f"Stability needs at least 2 selections, got {m}.", field="selections")
    counts: dict[str, int] = {}
    total = 0
    for sel in selections:
        for name in set(sel):
            counts[name] = counts.get(name, 0) + 1
            total += 1
    if d < len(counts):
        raise InvalidInput(
            f"The selections hold {len(counts)} features, more than the universe's {d}.",
            field="d",
        )
    k_bar = total / m
    if k_bar == 0.0 or k_bar == d:
        return 1.0  # identical selections (all empty, or all the whole universe)
    p = np.fromiter(counts.values(), dtype=np.float64, count=len(counts)) / m
    s2_sum = float((m / (m - 1) * p * (1.0 - p)).sum())
    q = k_bar / d
    return float(1.0 - (s2_sum / d) / (q * (1.0 - q)))


def nogueira(selections: Sequence[Collection[str]], universe: Sequence[str]) -> float:
    """Nogueira's stability estimator Phi of selections (sets of names) over a universe.

    Parameters
    ----------
    selections
        M >= 2 selections, each a collection of names from ``universe``.
    universe
        The d features the selections were drawn from, without repeats
        (for a stream: every feature seen so far).

    Examples
    --------
    Three selections over four features: p = (1, 2/3, 1/3, 0), k_bar = 2,
    mean s_f^2 = (0 + 1/3 + 1/3 + 0) / 4 = 1/6 (as 3/2 * 2/3 * 1/3 = 1/3),
    k_bar/d = 1/2, so Phi = 1 - (1/6)/(1/4) = 1/3.

    >>> nogueira([{"a", "b"}, {"a", "b"}, {"a", "c"}], ["a", "b", "c", "d"])
    0.3333...
    """
    return nogueira_from_matrix(selection_matrix(selections, universe))
