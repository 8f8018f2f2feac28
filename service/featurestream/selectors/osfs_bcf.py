"""BCF while an OSFS or Fast-OSFS batch is decided, and its conditional-independence tests.

The working copy of the best candidate features (``osfs.py``): their names,
relevance, columns or codes and, for Fisher's z, the Gram matrix of the
standardised [y, BCF...], mutated in place as features arrive and are evicted;
:meth:`BCF.independent` runs one test, :meth:`BCF.ci_search` the search for a
separating conditioning set (docs/algorithms/osfs.md, "ci_search").
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream.selectors.base import Matrix, Vector
from featurestream.stats.columns import row_dots
from featurestream.stats.discrete import (
    MIN_ROWS_PER_DF,
    DiscreteResult,
    Method,
    ci_test_codes,
    degrees_of_freedom,
)
from featurestream.stats.finite import require_finite
from featurestream.stats.fisher_z import FisherZResult, fisher_z_from_correlation


class BCF:
    """BCF while a batch is decided: private working copies, mutated in place.

    Members are addressed by position; ``keys`` gives each member an identity
    that survives evictions (an old member's row index, or ``~i`` for the i-th
    column of the batch), since names need not be unique across requests.
    """

    def __init__(self, sel: Any, state: Any) -> None:
        # ``sel``: the OSFS or Fast-OSFS selector deciding the batch; ``state`` its state
        # before it (typed loosely: osfs.py imports this module).
        self.sel = sel
        self.done = 0  # columns of the batch complete
        self.names: list[str] = list(state.selected)
        self.dep: list[float] = state.dep.tolist()
        self.keys: list[int] = list(range(len(self.names)))
        # Row views of the published state: read, never written.
        self.rows: list[npt.NDArray[Any]] = list(state.columns)
        self.levels: list[int] = [int(L) for L in state.levels]
        self.C: Matrix = state.corr
        # fisher_z: each member's (mean, scale), by position; a state stored before
        # they were kept gives its members (0, 0). ``batch`` holds the arrivals'.
        kept = len(state.scales) == len(self.names)
        self.origins: list[tuple[float, float]] = (
            []
            if sel.discrete
            else list(zip(state.means.tolist(), state.scales.tolist(), strict=True))
            if kept
            else [(0.0, 0.0)] * len(self.names)
        )
        self.old_origins = list(self.origins)
        self.batch: tuple[Vector, Vector] = (np.zeros(0), np.zeros(0))
        self.tests = 0
        self.untestable = 0

    def __len__(self) -> int:
        return len(self.names)

    def append(self, key: int, name: str, dep: float, row: npt.NDArray[Any], level: int) -> None:
        sel = self.sel
        if sel.discrete:
            self.levels.append(level)
        else:
            # One row_dots call gives the new column's dots with y and with every member;
            # each entry is a sum along the contiguous axis, whatever the batch shape.
            m = len(self.names) + len(sel._y_refs)
            d = row_dots(np.stack([*sel._y_refs, *self.rows]), row)
            C = np.empty((m + 1, m + 1))
            C[:m, :m] = self.C
            C[m, :m] = d
            C[:m, m] = d
            C[m, m] = row_dots(row[None, :], row)[0]
            # C feeds the Cholesky factorisations of the Fisher z tests.
            require_finite(C[m], "A correlation of the OSFS members")
            self.C = C
        self.names.append(name)
        self.dep.append(dep)
        self.keys.append(key)
        self.rows.append(row)
        if not sel.discrete:
            # ~i: column i of the batch; else an old member's row index.
            if key < 0:
                self.origins.append((float(self.batch[0][~key]), float(self.batch[1][~key])))
            else:
                self.origins.append(self.old_origins[key])

    def remove(self, pos: int) -> None:
        del self.names[pos], self.dep[pos], self.keys[pos], self.rows[pos]
        if not self.sel.discrete:
            del self.origins[pos]
        if self.sel.discrete:
            del self.levels[pos]
        else:
            at = pos + len(self.sel._y_refs)
            self.C = np.delete(np.delete(self.C, at, axis=0), at, axis=1)

    def independent(self, x: int, Z: Sequence[int]) -> bool:
        """test(x, y | Z) says independent (positions in BCF).

        A test that cannot be made is counted, and says what ``untestable`` says.
        """
        self.tests += 1
        sel = self.sel
        # One column may run many tests: the caller may stop the batch between them.
        sel.checkpoint(self.done)
        p = sel.params
        if sel.discrete:
            method: Method = "g2" if p.test == "g2" else "chi2"
            levels = [self.levels[x], sel._y_levels, *(self.levels[z] for z in Z)]
            res: DiscreteResult | FisherZResult = ci_test_codes(
                self.rows[x],
                sel._y_ref_codes,
                [self.rows[z] for z in Z],
                levels,
                method=method,
                alpha=p.alpha,
            )
            if not res.testable:
                self.untestable += 1
                return bool(p.untestable == "independent")
            return res.independent
        # One test per target column (docs/algorithms.md, "Targets"): with K class
        # indicators, K tests at alpha / K; independent iff none rejects. The K
        # tests count as one test, untestable when one of them is.
        ny = len(sel._y_refs)
        level = p.alpha / ny if ny > 1 else p.alpha
        S = [z + ny for z in Z]
        results = [
            fisher_z_from_correlation(self.C, x + ny, k, S, sel.n_instances, level)
            for k in range(ny)
        ]
        if not all(r.testable for r in results):
            self.untestable += 1
            if p.untestable == "dependent":
                return False
        return all(r.independent for r in results)

    def ci_search(self, x: int, B: Sequence[int], must_contain: int | None = None) -> bool:
        """True ("independent") at the first separating Z.

        docs/algorithms/osfs.md, "ci_search".

        Z runs over sizes 1..min(max_k, |B|) and, within a size, over
        ``itertools.combinations`` of the positions in B; with ``must_contain``
        only sets holding that element (placed last) are tried.
        """
        top = min(self.sel.params.max_k, len(B))
        if must_contain is None:
            for k in range(1, top + 1):
                if self._untestable_from(x, B, k, None):
                    self._skip_untestable(len(B), k, top)
                    return False
                for Z in itertools.combinations(B, k):
                    if self.independent(x, Z):
                        return True
            return False
        others = [b for b in B if b != must_contain]
        for k in range(1, top + 1):
            if self._untestable_from(x, others, k, must_contain):
                self._skip_untestable(len(others), k - 1, top - 1)
                return False
            for head in itertools.combinations(others, k - 1):
                if self.independent(x, (*head, must_contain)):
                    return True
        return False

    def _untestable_from(
        self, x: int, pool: Sequence[int], k: int, must_contain: int | None
    ) -> bool:
        """With ``untestable: "dependent"``: True when no set of size k or more can be tested.

        Then every remaining set of the search says "dependent", so the search
        ends without running them (``_skip_untestable`` counts them). The size
        rule is monotone: n - |Z| - 3 (Fisher z) only falls as Z grows, and
        df (G2, chi-square) only grows, so the smallest df of a size, that of
        its k members with the fewest levels, decides for every larger size.
        """
        sel = self.sel
        if sel.params.untestable != "dependent":
            return False
        n = sel.n_instances
        if not sel.discrete:
            return bool(n - k - 3 <= 0)
        if must_contain is None:
            fewest = sorted(self.levels[b] for b in pool)[:k]
        else:
            fewest = [self.levels[must_contain], *sorted(self.levels[b] for b in pool)[: k - 1]]
        df = degrees_of_freedom(self.levels[x], sel._y_levels, fewest)
        return bool(n < MIN_ROWS_PER_DF * df)

    def _skip_untestable(self, pool: int, lo: int, hi: int) -> None:
        """Count the sets of sizes lo..hi drawn from ``pool`` members as untestable tests."""
        count = sum(math.comb(pool, j) for j in range(lo, hi + 1))
        self.tests += count
        self.untestable += count


__all__ = ["BCF"]
