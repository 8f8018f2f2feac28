"""OSFS and Fast-OSFS: online feature selection with streaming features.

docs/algorithms/osfs.md, "Exact rules". Both keep an ordered list BCF (best
candidate features). An arriving feature f is first tested for relevance,
test(f, y | {}); a relevant f then takes part in a redundancy analysis with
``ci_search``, which looks for a conditioning set Z drawn from BCF (sizes 1 to
``max_k``) that makes a feature independent of y:

* OSFS appends f to BCF and re-examines every member g (f included) given
  the rest of BCF, evicting each g that some Z makes independent of y;
* Fast-OSFS first rejects f when some Z from BCF makes it independent of y,
  and otherwise appends f and re-examines the earlier members only with the
  conditioning sets that contain f.

The test is Fisher's z (continuous data) or G2 / chi-square (integer codes).
For Fisher's z the state keeps the Gram matrix of the standardised columns of
[y, BCF...] (their correlations), so a test given |Z| = 3 is a 3 x 3 Cholesky
solve, not a pass over the n rows. An arrival costs one ``row_dots`` call to
extend the matrix. For the discrete tests the state keeps the members' integer
codes and level counts, and each test is one ``np.bincount``
(``stats/discrete.py``). BCF while a batch is decided, with its tests and
``ci_search``, is ``osfs_bcf.py``.

References
----------
Xindong Wu, Kui Yu, Wei Ding, Hao Wang, Xingquan Zhu. "Online Feature
Selection with Streaming Features." IEEE Transactions on Pattern Analysis and
Machine Intelligence 35(5), 2013 (and Kui Yu et al., LOFS: a library of online
streaming feature selection, Knowledge-Based Systems 113, 2016).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from featurestream.selectors.base import FeatureSelector, Matrix, Vector
from featurestream.selectors.decisions import (  # scores
    TEST_SCORES,
    Decision,
    Eviction,
    Reason,
    ScoreKind,
)
from featurestream.selectors.osfs_bcf import BCF
from featurestream.selectors.params import Interval, Params, StrOptions
from featurestream.selectors.targets import discrete_target, target_columns
from featurestream.selectors.untestable import UNTESTABLE, untestable_warnings
from featurestream.stats.columns import (
    is_constant_rows,
    row_dots,
    row_origins,
    standardize_rows,
)
from featurestream.stats.discrete import Method, ci_test_codes
from featurestream.stats.fisher_z import fisher_z_classes

IntArray = npt.NDArray[np.int64]

DISCRETE_TESTS = ("g2", "chi2")


@dataclass(frozen=True, kw_only=True)
class OSFSParams(Params):
    """Parameters of OSFS and Fast-OSFS (named as in docs/algorithms.md, "OSFS").

    ``max_k`` may be 0: no conditioning set is then ever tried, so no feature
    is found redundant and the selector keeps every relevant feature (a pure
    relevance filter). That is the natural end of the range "largest
    conditioning-set size"; a negative size has no meaning.

    ``untestable`` says what a test that cannot be made counts as
    (docs/algorithms.md, "Untestable tests"): ``independent`` (the reference
    rule) or ``dependent``.
    """

    algorithm: ClassVar[str] = "OSFS"
    constraints: ClassVar[dict[str, Any]] = {
        "test": StrOptions(("fisher_z", *DISCRETE_TESTS)),
        "alpha": Interval(float, 0.0, 1.0, "neither"),
        # Each search may try sum_k C(|B|, k) sets: an unbounded size is a way to
        # stall the server, and LOFS's default is 3.
        "max_k": Interval(int, 0, 10, "both"),
        "untestable": UNTESTABLE,
    }
    descriptions: ClassVar[dict[str, str]] = {
        "test": "the conditional independence test",
        "alpha": "significance level of every test",
        "max_k": "largest conditioning set; 0 keeps every relevant feature (capped at 10: the "
        "number of sets grows combinatorially)",
        "untestable": "what a test that cannot be made counts as: `independent` (the reference "
        "rule) or `dependent` (nothing is rejected or evicted on such a test)",
    }

    test: str = "fisher_z"
    alpha: float = 0.01
    max_k: int = 3
    untestable: str = "independent"


def _empty_codes() -> IntArray:
    return np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class OSFSState:
    """Everything OSFS / Fast-OSFS knows.

    Attributes
    ----------
    y : the target, as given (n,), or its class codes 0..K-1 (multi-class).
    selected : names of BCF, in order.
    dep : relevance to y of each member of BCF (dep of test(f, y | {})).
    columns : one row per member of BCF: its standardised column (fisher_z,
        float64) or its integer codes (g2 / chi2, int64).
    levels : number of levels of each member's codes (g2 / chi2; empty for fisher_z).
    corr : fisher_z: the Gram matrix of the standardised [y, BCF...] (index 0
        is y; a multi-class target takes indices 0..K-1, one per class
        indicator), i.e. their correlations; ``(0, 0)`` for the discrete tests.
    features_seen, features_accepted, features_rejected, features_evicted : counters.
    tests_performed : number of conditional-independence tests run so far: one
        relevance test per non-constant arrival plus every test ci_search ran
        (a test that turned out not testable counts too).
    tests_untestable : how many of those could not be made (docs/algorithms.md,
        "Untestable tests").
    means, scales : fisher_z: per member of BCF, the mean and the scale its column
        was standardised with (column = row * scale + mean), which restore the
        column as sent for ``GET /evaluation``; scale 0 for a member of a state
        stored before they were kept. Empty for the discrete tests. They take no
        part in the tests.
    """

    y: Vector
    selected: tuple[str, ...] = ()
    dep: Vector = field(default_factory=lambda: np.zeros(0))
    columns: npt.NDArray[Any] = field(default_factory=lambda: np.zeros((0, 0)))
    levels: IntArray = field(default_factory=_empty_codes)
    corr: Matrix = field(default_factory=lambda: np.zeros((0, 0)))
    features_seen: int = 0
    features_accepted: int = 0
    features_rejected: int = 0
    features_evicted: int = 0
    tests_performed: int = 0
    tests_untestable: int = 0
    # K >= 3 for a multi-class target (y holds the class codes), else 0.
    n_classes: int = 0
    means: Vector = field(default_factory=lambda: np.zeros(0))
    scales: Vector = field(default_factory=lambda: np.zeros(0))


def _columns(state: OSFSState) -> list[Vector]:
    return target_columns(state.y, state.n_classes)


def _fisher_state(state: OSFSState) -> OSFSState:
    """The state with ``corr`` holding the Gram matrix of the standardised target columns."""
    Y = standardize_rows(np.array(_columns(state)))[0]
    corr = np.empty((Y.shape[0], Y.shape[0]))
    for j in range(Y.shape[0]):
        corr[:, j] = row_dots(Y, Y[j])
    return replace(state, corr=corr)


class _OSFSBase(FeatureSelector[OSFSParams, OSFSState]):
    """Machinery shared by OSFS and Fast-OSFS; subclasses define ``_redundancy``."""

    params_type: ClassVar[type[Params]] = OSFSParams

    score: ClassVar[ScoreKind] = TEST_SCORES["fisher_z"]
    score_by = ("test", {t: TEST_SCORES[t] for t in ("fisher_z", "g2", "chi2")})
    state_type: ClassVar[type[Any]] = OSFSState
    status_fields: ClassVar[tuple[str, ...]] = ("tests_performed", "tests_untestable")

    def __init__(self, params: OSFSParams, state: OSFSState) -> None:
        super().__init__(params, state)
        # Caches rebuilt from the state alone (docs/algorithms.md, "How a selector is built").
        self.discrete = params.test in DISCRETE_TESTS
        self._y_refs: list[Vector] = []
        self._y_ref_codes: IntArray = _empty_codes()
        self._y_levels = 1
        if self.discrete:
            # docs/algorithms.md, "Discrete tests": y's levels are its largest code + 1.
            # A multi-class target: the class numbers by first appearance (selectors/targets.py).
            self._y_ref_codes = discrete_target(state.y, state.n_classes).astype(np.int64)
            self._y_levels = int(self._y_ref_codes.max()) + 1
        else:
            # One standardised row per target column: y, or the K class indicators.
            self._y_refs = list(standardize_rows(np.array(_columns(state)))[0])

    @classmethod
    def requires_discrete(cls, params: Any) -> bool:
        return bool(params.test in DISCRETE_TESTS)

    @classmethod
    def test_params(cls) -> list[dict[str, Any]]:
        return [
            {},
            {"alpha": 0.05, "max_k": 1},
            {"max_k": 0},
            {"test": "g2"},
            {"test": "chi2", "alpha": 0.05, "max_k": 2},
            {"test": "g2", "untestable": "dependent"},
            {"untestable": "dependent", "max_k": 2},
        ]

    @classmethod
    def initial_state(cls, params: OSFSParams, y: Vector) -> OSFSState:
        n = y.shape[0]
        if params.test in DISCRETE_TESTS:
            return OSFSState(
                y=y.copy(),
                columns=np.zeros((0, n), dtype=np.int64),
                corr=np.zeros((0, 0)),
            )
        return _fisher_state(OSFSState(y=y.copy(), columns=np.zeros((0, n))))

    @classmethod
    def multiclass_state(cls, params: OSFSParams, y: Vector, n_classes: int) -> OSFSState:
        state = replace(cls.initial_state(params, y), n_classes=n_classes)
        return state if params.test in DISCRETE_TESTS else _fisher_state(state)

    # ------------------------------------------------------------------ learning

    def _relevance(
        self, X: Matrix, constant: npt.NDArray[np.bool_]
    ) -> tuple[npt.NDArray[Any], IntArray, Vector, npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """Step 1 for the whole batch, constant columns excluded.

        Returns the rows BCF would keep (standardised columns or codes), their
        levels (discrete tests), dep (NaN where not testable), the relevant
        mask and the mask of the tests that could not be made.
        """
        p = self.params
        n = self.n_instances
        if self.discrete:
            codes = X.astype(np.int64)
            levels = codes.max(axis=1) + 1
            dep = np.full(X.shape[0], np.nan)
            relevant = np.zeros(X.shape[0], dtype=bool)
            untestable = np.zeros(X.shape[0], dtype=bool)
            method: Method = "g2" if p.test == "g2" else "chi2"
            for i in np.flatnonzero(~constant):
                res = ci_test_codes(
                    codes[i],
                    self._y_ref_codes,
                    (),
                    [int(levels[i]), self._y_levels],
                    method=method,
                    alpha=p.alpha,
                )
                dep[i] = res.dep
                relevant[i] = not res.independent
                untestable[i] = not res.testable
            return codes, levels, dep, self._untestable_relevant(relevant, untestable), untestable
        rows, _ = standardize_rows(X)
        # r = C[f,y] / sqrt(C[f,f] C[y,y]): the arithmetic of partial_correlation with
        # S empty, on the same Gram entries the state keeps, vectorised over the batch.
        ff = (rows * rows).sum(axis=1)
        rs = []
        # One test per feature: untestable when one of its class tests is.
        untestable = np.zeros(X.shape[0], dtype=bool)
        for k, ref in enumerate(self._y_refs):
            fy = row_dots(rows, ref)
            denom = ff * self.state.corr[k, k]
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.clip(fy / np.sqrt(denom), -1.0, 1.0)
            # docs/algorithms.md, "Fisher z test": a zero variance (NaN r) or n - 3 <= 0
            # is "not testable", which counts as independent.
            testable = (denom > 0.0) & (n - 3 > 0)
            rs.append(np.where(testable, r, np.nan))
            untestable |= ~constant & ~testable
        dep, independent = fisher_z_classes(rs, n, 0, p.alpha)
        relevant = ~constant & ~independent
        relevant = self._untestable_relevant(relevant, untestable)
        return rows, np.zeros(X.shape[0], dtype=np.int64), dep, relevant, untestable

    def _untestable_relevant(
        self, relevant: npt.NDArray[np.bool_], untestable: npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.bool_]:
        """With ``untestable: "dependent"`` a relevance test that cannot be made keeps f."""
        if self.params.untestable == "dependent":
            return relevant | untestable
        return relevant

    def _learn_batch(
        self, names: list[str], X: Matrix, groups: Sequence[str | None] | None
    ) -> list[Decision]:
        s = self.state
        constant = is_constant_rows(X)
        rows, levels, dep_new, relevant, untestable = self._relevance(X, constant)
        bcf = BCF(self, s)
        if not self.discrete:
            bcf.batch = row_origins(X)
        bcf.tests = int((~constant).sum())
        bcf.untestable = int(untestable.sum())
        decisions: list[Decision] = []
        accepted_total = 0
        evicted_total = 0
        for i, name in enumerate(names):
            self.checkpoint(i)
            bcf.done = i
            dep_f = float(dep_new[i])
            score = dep_f if np.isfinite(dep_f) else None
            if constant[i]:
                # docs/algorithms.md, "Constant columns": zero variance is rejected before any test.
                decisions.append(Decision(name, False, Reason.CONSTANT))
                continue
            if not relevant[i]:
                decisions.append(Decision(name, False, Reason.IRRELEVANT, score=score))
                continue
            # A feature kept on a relevance test that could not be made has no dep:
            # its score is null and the state keeps 0 (states hold finite numbers).
            kept, evicted = self._redundancy(
                bcf, ~i, name, dep_f if score is not None else 0.0, rows[i], int(levels[i])
            )
            evictions = tuple(Eviction(g, Reason.REDUNDANT, by=name) for g in evicted)
            evicted_total += len(evictions)
            if kept:
                accepted_total += 1
                decisions.append(Decision(name, True, None, score=score, evicted=evictions))
            else:
                decisions.append(
                    Decision(name, False, Reason.REDUNDANT, score=score, evicted=evictions)
                )

        n = self.n_instances
        dtype = np.int64 if self.discrete else np.float64
        columns = np.stack(bcf.rows) if bcf.rows else np.zeros((0, n), dtype=dtype)
        b = len(names)
        self.state = replace(
            s,
            selected=tuple(bcf.names),
            dep=np.array(bcf.dep, dtype=np.float64),
            columns=np.ascontiguousarray(columns, dtype=dtype),
            levels=np.array(bcf.levels, dtype=np.int64),
            corr=np.ascontiguousarray(bcf.C) if not self.discrete else s.corr,
            **self.counted(b, accepted_total, evicted_total),
            tests_performed=s.tests_performed + bcf.tests,
            tests_untestable=s.tests_untestable + bcf.untestable,
            means=np.array([m for m, _ in bcf.origins], dtype=np.float64),
            scales=np.array([c for _, c in bcf.origins], dtype=np.float64),
        )
        return decisions

    def warnings(self) -> list[dict[str, str]]:
        s = self.state
        return untestable_warnings(self.params, s.tests_performed, s.tests_untestable)

    @abstractmethod
    def _redundancy(
        self, bcf: BCF, key: int, name: str, dep: float, row: npt.NDArray[Any], level: int
    ) -> tuple[bool, list[str]]:
        """Steps 2-3 for a relevant f: (f kept in BCF, names of evicted members).

        A rejected f gets no ``by``: what made it redundant is a conditioning
        set, not one feature. Members evicted meanwhile name f as ``by``.
        """


class OSFS(_OSFSBase):
    """Online Streaming Feature Selection (OSFS).

    Parameters
    ----------
    params : OSFSParams
        ``test`` (fisher_z, g2 or chi2), ``alpha`` (significance level),
        ``max_k`` (largest conditioning-set size).

    Examples
    --------
    With the orthogonal +-1 patterns h1 = [1,-1,1,-1,1,-1,1,-1],
    h2 = [1,1,-1,-1,1,1,-1,-1], h3 = [1,-1,-1,1,1,-1,-1,1] and
    h4 = [1,1,1,1,-1,-1,-1,-1], take y = 2 h1, f = y + h2, g = f + h3 and
    noise = h4. Then corr(g, y) = 2/sqrt(6) = 0.82 and corr(f, y) = 2/sqrt(5)
    = 0.89 (both relevant at alpha = 0.05 with n = 8), corr(noise, y) = 0.
    Given f, what g adds (h3) is orthogonal to y: g is independent of y given
    f, and OSFS evicts g when f arrives.

    >>> import numpy as np
    >>> y = [2, -2, 2, -2, 2, -2, 2, -2]
    >>> sel = OSFS.start(OSFSParams(alpha=0.05), y)
    >>> d = sel.learn_features(
    ...     ["g", "f", "noise"],
    ...     [[4, -2, 0, -2, 4, -2, 0, -2],
    ...      [3, -1, 1, -3, 3, -1, 1, -3],
    ...      [1, 1, 1, 1, -1, -1, -1, -1]])
    >>> [(x.feature, x.accepted, x.reason and x.reason.value) for x in d]
    [('g', True, None), ('f', True, None), ('noise', False, 'irrelevant')]
    >>> [(e.feature, e.by) for e in d[1].evicted]
    [('g', 'f')]
    >>> sel.selected()
    ('f',)

    References
    ----------
    Wu, Yu, Ding, Wang, Zhu. Online Feature Selection with Streaming Features.
    IEEE TPAMI 35(5), 2013.
    """

    name: ClassVar[str] = "osfs"

    def _redundancy(
        self, bcf: BCF, key: int, name: str, dep: float, row: npt.NDArray[Any], level: int
    ) -> tuple[bool, list[str]]:
        # Step 2: append f. Step 3: every member of a snapshot of BCF, f included.
        bcf.append(key, name, dep, row, level)
        evicted: list[str] = []
        kept = True
        for g in list(bcf.keys):
            pos = bcf.keys.index(g)
            B = [q for q in range(len(bcf)) if q != pos]
            # Step 3: g is examined only when BCF without g is not empty.
            if not B:
                continue
            if bcf.ci_search(pos, B):
                if g == key:
                    kept = False
                else:
                    evicted.append(bcf.names[pos])
                bcf.remove(pos)
        return kept, evicted


@dataclass(frozen=True, kw_only=True)
class FastOSFSParams(OSFSParams):
    """Parameters of Fast-OSFS: those of OSFS."""

    algorithm: ClassVar[str] = "Fast-OSFS"


class FastOSFS(_OSFSBase):
    """Fast-OSFS: OSFS with an inner test of the arrival and a restricted outer test.

    Parameters
    ----------
    params : OSFSParams
        ``test`` (fisher_z, g2 or chi2), ``alpha`` (significance level),
        ``max_k`` (largest conditioning-set size).

    Examples
    --------
    The stream of the OSFS example in the other order: f first, then g. Given
    f, g is independent of y (its extra part h3 is orthogonal to y), so
    Fast-OSFS rejects g on arrival without touching BCF.

    >>> import numpy as np
    >>> y = [2, -2, 2, -2, 2, -2, 2, -2]
    >>> sel = FastOSFS.start(OSFSParams(alpha=0.05), y)
    >>> d = sel.learn_features(
    ...     ["f", "g", "noise"],
    ...     [[3, -1, 1, -3, 3, -1, 1, -3],
    ...      [4, -2, 0, -2, 4, -2, 0, -2],
    ...      [1, 1, 1, 1, -1, -1, -1, -1]])
    >>> [(x.feature, x.accepted, x.reason and x.reason.value) for x in d]
    [('f', True, None), ('g', False, 'redundant'), ('noise', False, 'irrelevant')]
    >>> sel.selected()
    ('f',)

    References
    ----------
    Wu, Yu, Ding, Wang, Zhu. Online Feature Selection with Streaming Features.
    IEEE TPAMI 35(5), 2013.
    """

    name: ClassVar[str] = "fast_osfs"
    params_type: ClassVar[type[Params]] = FastOSFSParams

    def _redundancy(
        self, bcf: BCF, key: int, name: str, dep: float, row: npt.NDArray[Any], level: int
    ) -> tuple[bool, list[str]]:
        # The inner test needs f's correlations with BCF, so f joins tentatively;
        # removing it again restores exactly the previous matrix.
        had_members = len(bcf) > 0
        bcf.append(key, name, dep, row, level)
        f_pos = len(bcf) - 1
        # Step 2, inner redundancy: ci_search(f, BCF) over the members before f.
        if had_members and bcf.ci_search(f_pos, list(range(f_pos))):
            bcf.remove(f_pos)
            return False, []
        # Step 3, outer redundancy: only conditioning sets that contain f.
        evicted: list[str] = []
        for g in [k for k in bcf.keys if k != key]:
            pos = bcf.keys.index(g)
            f_pos = bcf.keys.index(key)
            B = [q for q in range(len(bcf)) if q != pos]
            if bcf.ci_search(pos, B, must_contain=f_pos):
                evicted.append(bcf.names[pos])
                bcf.remove(pos)
        return True, evicted


__all__ = ["DISCRETE_TESTS", "OSFS", "FastOSFS", "OSFSParams", "OSFSState"]
