"""Untestable tests: the ``untestable`` parameter, the counters and the status warning."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.datasets import load_digits

from featurestream.errors import InvalidParameter
from featurestream.selectors import (
    OSFS,
    SAOLA,
    FastOSFS,
    FastOSFSParams,
    GroupSAOLA,
    GroupSAOLAParams,
    OSFSParams,
    Reason,
    SAOLAParams,
    osfs_bcf,
)
from featurestream.selectors.untestable import WARNING_CODE, too_many


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    """Integer pixels 0..16 (feature-major) and 10 classes: few instances per df."""
    X, y = load_digits(return_X_y=True)
    return np.ascontiguousarray(X.T, dtype=np.float64), y.astype(np.float64)


def _names(k: int) -> list[str]:
    return [f"p{i}" for i in range(k)]


def test_untestable_is_checked() -> None:
    for params in (OSFSParams, FastOSFSParams, SAOLAParams, GroupSAOLAParams):
        with pytest.raises(InvalidParameter, match="'untestable'") as err:
            params.from_mapping({"untestable": "maybe"})
        assert err.value.parameter == "untestable"
        assert params().untestable == "independent"


def test_digits_g2_default_counts_untestable_tests_and_warns(digits: tuple) -> None:
    X, y = digits
    sel = FastOSFS.start(FastOSFSParams(test="g2"), y)
    decisions = sel.learn_features(_names(64), X)
    status = sel.status()
    # The reference rule: almost every conditional test has n < 5 df and says
    # "independent", so every later relevant pixel is "redundant" given one other.
    assert len(sel.selected()) == 1
    assert sum(d.reason is Reason.REDUNDANT for d in decisions) > 40
    assert too_many(status["tests_performed"], status["tests_untestable"])
    (warning,) = status["warnings"]
    assert warning["code"] == WARNING_CODE
    assert "too few instances per degree of freedom" in warning["message"]
    assert "fewer levels" in warning["message"]
    assert "more instances" in warning["message"]
    assert 'untestable: "dependent"' in warning["message"]


def test_digits_g2_dependent_rejects_nothing_on_untestable_tests(digits: tuple) -> None:
    X, y = digits
    sel = FastOSFS.start(FastOSFSParams(test="g2", untestable="dependent"), y)
    decisions = sel.learn_features(_names(64), X)
    # No conditional test of a pixel given another can be made (df >= 144 x 2):
    # no arrival is rejected as redundant, no member evicted.
    assert not any(d.reason is Reason.REDUNDANT or d.evicted for d in decisions)
    reasons = {d.reason for d in decisions if not d.accepted}
    assert reasons <= {Reason.CONSTANT, Reason.IRRELEVANT}
    assert len(sel.selected()) > 40
    status = sel.status()
    assert status["tests_untestable"] > 0.9 * status["tests_performed"]
    assert "counted as dependent" in status["warnings"][0]["message"]


def _discrete(seed: int, n: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns with 2 to 6 levels, some tied to y: a mix of testable and untestable sets."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n).astype(np.float64)
    X = np.empty((b, n))
    for i in range(b):
        levels = int(rng.integers(2, 7))
        noise = rng.integers(0, levels, size=n)
        X[i] = np.where(rng.random(n) < 0.5, y % levels, noise) if i % 2 else noise
    return X, y


def _fisher(seed: int, n: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    X = y + rng.normal(size=(b, n)) * rng.uniform(0.2, 2.0, size=(b, 1))
    return X, y


@pytest.mark.parametrize("cls", [OSFS, FastOSFS])
@pytest.mark.parametrize(
    ("make", "n", "params"),
    [
        (_discrete, 200, {"test": "g2"}),
        (_discrete, 120, {"test": "chi2", "max_k": 2}),
        (_fisher, 5, {"max_k": 3, "alpha": 0.5}),
    ],
)
def test_search_shortcut_equals_every_test_run(
    monkeypatch: pytest.MonkeyPatch, cls: Any, make: Any, n: int, params: dict[str, Any]
) -> None:
    # ci_search ends at the first size whose every set is untestable; running each
    # of those tests one by one must give the same decisions and the same counters.
    X, y = make(5, n, 14)
    p = cls.params_type.from_mapping({**params, "untestable": "dependent"})
    fast = cls.start(p, y)
    fast_decisions = fast.learn_features(_names(14), X)
    monkeypatch.setattr(osfs_bcf.BCF, "_untestable_from", lambda *a: False)
    slow = cls.start(p, y)
    assert slow.learn_features(_names(14), X) == fast_decisions
    assert slow.status() == fast.status()
    assert fast.status()["tests_untestable"] > 0


def test_osfs_relevance_untestable_keeps_the_feature() -> None:
    # n = 3: n - 3 <= 0, no Fisher z test can be made at all.
    y = [1.0, 2.0, 4.0]
    X = [[1.0, 3.0, 2.0], [0.0, 1.0, 5.0]]
    ref = OSFS.start(OSFSParams(), y)
    assert [d.reason for d in ref.learn_features(["a", "b"], X)] == [Reason.IRRELEVANT] * 2
    dep = OSFS.start(OSFSParams(untestable="dependent"), y)
    decisions = dep.learn_features(["a", "b"], X)
    assert [d.accepted for d in decisions] == [True, True]
    assert decisions[0].score is None  # no test, no dep
    assert dep.selected() == ("a", "b")
    assert dep.status()["tests_untestable"] == dep.status()["tests_performed"] > 0


@pytest.mark.parametrize("cls", [SAOLA, GroupSAOLA])
def test_saola_family_relevance_untestable(cls: Any) -> None:
    y = [1.0, 2.0, 4.0]
    X = [[1.0, 2.0, 4.5], [4.0, 2.0, 1.0]]
    groups = ["g", "g"] if cls is GroupSAOLA else None
    ref = cls.start(cls.params_type(), y)
    assert not any(d.accepted for d in ref.learn_features(["a", "b"], X, groups))
    assert ref.status()["warnings"][0]["code"] == WARNING_CODE
    assert ref.status()["tests_untestable"] == 2
    dep = cls.start(cls.params_type(untestable="dependent"), y)
    decisions = dep.learn_features(["a", "b"], X, groups)
    # Both kept by relevance; their pair cannot be tested either, so neither
    # one removes the other (an untestable pair has no t to compare).
    assert [d.accepted for d in decisions] == [True, True]
    assert not any(d.evicted for d in decisions)
    status = dep.status()
    assert status["tests_performed"] == status["tests_untestable"] == 3


def test_saola_counts_tests_and_no_warning_on_testable_data() -> None:
    X, y = _fisher(1, 100, 6)
    sel = SAOLA.start(SAOLAParams(), y)
    sel.learn_features(_names(6), X)
    status = sel.status()
    assert status["tests_performed"] >= 6
    assert status["tests_untestable"] == 0
    assert "warnings" not in status


def test_warning_only_above_ten_percent() -> None:
    assert not too_many(10, 1)
    assert too_many(10, 2)
    assert not too_many(0, 0)
