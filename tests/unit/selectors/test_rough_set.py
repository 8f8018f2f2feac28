"""OFS-A3M and OFS-Density alike: any labels, any batching, replay
(docs/algorithms.md, "Targets" and "Determinism and replay")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from featurestream.selectors import REGISTRY
from featurestream.selectors.targets import resolve_target
from tests.unit.selectors import rough_set_reference as ref
from tests.unit.selectors.common import assert_round_trip_and_replay, blob
from tests.unit.selectors.test_ofs_a3m import data

ALGORITHMS = ["ofs_a3m", "ofs_density"]


def starter(algorithm: str, y: Any) -> Callable[[], Any]:
    cls: Any = REGISTRY[algorithm]
    t = resolve_target(list(y))
    return lambda: cls.start(cls.params_type(), t.y, t.n_classes)


def run(algorithm: str, X: Any, y: Any, step: int = 1) -> Any:
    return ref.run(starter(algorithm, y)(), X, step)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 999),
    labels=st.sampled_from([(0, 1, 2), (2, 0, 1), (7, 5, 6), ("b", "c", "a"), ("x", "y", "z")]),
)
def test_relabelled_classes_give_the_same_decisions(
    algorithm: str, seed: int, labels: tuple[Any, ...]
) -> None:
    X, y = data(seed, classes=3)
    assert run(algorithm, X, [labels[v] for v in y])[:2] == run(algorithm, X, y)[:2]
    X2, y2 = data(seed)
    assert run(algorithm, X2, [labels[1 - v] for v in y2])[:2] == run(algorithm, X2, y2)[:2]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("seed", range(3))
def test_a_batch_equals_one_by_one_and_replays(algorithm: str, seed: int) -> None:
    X, y = data(seed, classes=3)
    one = run(algorithm, X, y, step=1)
    batch = run(algorithm, X, y, step=len(X))
    assert one[:2] == batch[:2] and blob(one[2]) == blob(batch[2])
    names = [f"f{i}" for i in range(len(X))]
    assert_round_trip_and_replay(starter(algorithm, y), names, X, [0, 2, 5, 6, len(X)])
