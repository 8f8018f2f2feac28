"""Forgetting (``half_life``) keeps replay exact: a state stored and resumed between
batches goes on to the same bits as one that never stopped, for every instance-stream
selector that forgets, and the same batches give the same bits every time."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from featurestream.selectors import REGISTRY
from tests.unit.selectors.common import blob, resumed

NAMES = [f"f{i}" for i in range(5)]
FORGETTING: dict[str, dict[str, Any]] = {
    "fsds": {"num_features": 2, "sketch_size": 3},
    "fires": {"num_features": 2},
    "ofs": {"num_features": 2},
    "kbest": {"num_features": 2},
}


def _start(name: str, half_life: float) -> Any:
    cls = REGISTRY[name]
    params = cls.params_type.from_mapping({**FORGETTING[name], "half_life": half_life})
    return cls.start(params, NAMES)


def _learn(sel: Any, name: str, X: np.ndarray, y: np.ndarray) -> None:
    if name == "fsds":
        sel.learn_instances(X)
    else:
        sel.learn_instances(X, y)


@pytest.mark.parametrize("name", sorted(FORGETTING))
@given(
    seed=st.integers(0, 10**6),
    sizes=st.lists(st.integers(1, 9), min_size=2, max_size=6),
    cut=st.integers(1, 5),
    half_life=st.floats(0.5, 40.0),
)
def test_a_resumed_forgetting_state_goes_on_to_the_same_bits(
    name: str, seed: int, sizes: list[int], cut: int, half_life: float
) -> None:
    rng = np.random.default_rng(seed)
    batches = []
    for n in sizes:
        X = rng.normal(size=(n, len(NAMES)))
        batches.append((X, (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)))
    cut = min(cut, len(batches) - 1)

    straight = _start(name, half_life)
    for X, y in batches:
        _learn(straight, name, X, y)

    again = _start(name, half_life)
    for X, y in batches[:cut]:
        _learn(again, name, X, y)
    again = resumed(blob(again))
    for X, y in batches[cut:]:
        _learn(again, name, X, y)

    assert blob(again) == blob(straight)
    assert again.selected() == straight.selected()


@given(
    seed=st.integers(0, 10**6),
    n=st.integers(1, 30),
    half_life=st.floats(0.5, 40.0),
)
def test_ofs_forgetting_a_batch_equals_its_instances_one_by_one(
    seed: int, n: int, half_life: float
) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(NAMES)))
    y = (X[:, 1] > 0).astype(int)
    whole = _start("ofs", half_life)
    _learn(whole, "ofs", X, y)
    single = _start("ofs", half_life)
    for i in range(n):
        _learn(single, "ofs", X[i : i + 1], y[i : i + 1])
    assert blob(single) == blob(whole)
