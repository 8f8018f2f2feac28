"""The drift watch keeps replay exact: a state stored and resumed between batches goes
on to the same detections and the same bits as one that never stopped, for every
instance-stream selector and both ``on_drift`` settings; OFS, whose watch sees one
error per instance, gives the same detections and bits for a batch as for its
instances one by one; and how the labels are written changes no detection."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from featurestream.selectors import REGISTRY
from tests.unit.selectors.common import blob, resumed

NAMES = [f"f{i}" for i in range(4)]
BASE: dict[str, dict[str, Any]] = {
    "fsds": {"num_features": 2, "sketch_size": 2},
    "fires": {"num_features": 2, "scale": "none"},
    "ofs": {"num_features": 2},
    "kbest": {"num_features": 2},
    "nrfs": {"num_features": 2, "window": 40, "min_instances": 10, "clusters": 2},
}
WATCHES = [(d, o) for d in ("page_hinkley", "adwin") for o in ("log", "reset")]


def _start(name: str, drift: str, on_drift: str) -> Any:
    cls = REGISTRY[name]
    params = cls.params_type.from_mapping({**BASE[name], "drift": drift, "on_drift": on_drift})
    return cls.start(params, NAMES)


def _learn(sel: Any, X: np.ndarray, y: Any) -> list[tuple[int, float, bool]]:
    update = sel.learn_instances(X) if sel.name == "fsds" else sel.learn_instances(X, y)
    return [(d.instances_seen, d.statistic, d.reset) for d in update.drifts]


def _switching(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels follow f0, then the opposite of f0: the error jumps at n // 2."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(NAMES)))
    X[n // 2 :, 1] *= 8.0  # the unsupervised score moves too
    y = (X[:, 0] > 0).astype(int)
    y[n // 2 :] = 1 - y[n // 2 :]
    return X, y


def _cuts(n: int, sizes: list[int]) -> list[tuple[int, int]]:
    out, lo, i = [], 0, 0
    while lo < n:
        hi = min(n, lo + sizes[i % len(sizes)])
        out.append((lo, hi))
        lo, i = hi, i + 1
    return out


@pytest.mark.parametrize("name", sorted(BASE))
@pytest.mark.parametrize(("drift", "on_drift"), WATCHES)
@settings(max_examples=10, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    sizes=st.lists(st.integers(1, 120), min_size=1, max_size=5),
    cut=st.integers(1, 30),
)
def test_a_resumed_watch_goes_on_to_the_same_detections_and_bits(
    name: str, drift: str, on_drift: str, seed: int, sizes: list[int], cut: int
) -> None:
    X, y = _switching(seed, 600)
    batches = _cuts(len(X), sizes)
    cut = min(cut, len(batches) - 1)
    straight, found = _start(name, drift, on_drift), []
    for lo, hi in batches:
        found += _learn(straight, X[lo:hi], y[lo:hi])
    again, later = _start(name, drift, on_drift), []
    for i, (lo, hi) in enumerate(batches):
        if i == cut:
            again = resumed(blob(again))
        later += _learn(again, X[lo:hi], y[lo:hi])
    assert later == found
    assert blob(again) == blob(straight)
    assert again.instances_seen == len(X)


@pytest.mark.parametrize(("drift", "on_drift"), WATCHES)
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10**6), sizes=st.lists(st.integers(1, 200), min_size=1, max_size=4))
def test_ofs_detections_do_not_depend_on_the_batches(
    drift: str, on_drift: str, seed: int, sizes: list[int]
) -> None:
    X, y = _switching(seed, 600)
    single, one_by_one = _start("ofs", drift, on_drift), []
    for i in range(len(X)):
        one_by_one += _learn(single, X[i : i + 1], y[i : i + 1])
    batched, found = _start("ofs", drift, on_drift), []
    for lo, hi in _cuts(len(X), sizes):
        found += _learn(batched, X[lo:hi], y[lo:hi])
    assert found == one_by_one
    assert blob(batched) == blob(single)


@pytest.mark.parametrize("name", ["ofs", "fires", "kbest"])
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10**6), flip=st.booleans())
def test_relabelled_classes_give_the_same_detections(name: str, seed: int, flip: bool) -> None:
    X, y = _switching(seed, 600)
    cls = REGISTRY[name]

    def run(labels: Any) -> tuple[list[Any], tuple[str, ...]]:
        params = cls.params_type.from_mapping({**BASE[name], "drift": "adwin"})
        sel = cls.start(params, NAMES, target_type="binary")
        found = []
        for lo in range(0, len(X), 50):
            found += _learn(sel, X[lo : lo + 50], labels[lo : lo + 50])
        return found, sel.selected()

    words = np.array(["spam", "ham"])[(1 - y) if flip else y].tolist()
    assert run(y) == run(words)
