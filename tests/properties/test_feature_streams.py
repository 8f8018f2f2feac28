"""Hypothesis properties of every registered feature-stream selector.

* one request of b columns decides exactly as b requests of one column, and
  leaves bit-identical state, whatever the batch boundaries;
* replaying a stream's event log (order and batch boundaries) into a fresh
  selector reproduces the committed state bit for bit.
"""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from featurestream import codec
from featurestream.config import Settings
from featurestream.engine import StreamEngine, wire
from featurestream.selectors import REGISTRY, FeatureSelector
from featurestream.selectors.targets import resolve_target
from featurestream.store.memory import InMemoryStore

FEATURE_SELECTORS = [
    pytest.param(cls, params, id=f"{name}-{i}")
    for name, cls in sorted(REGISTRY.items())
    if issubclass(cls, FeatureSelector)
    for i, params in enumerate(cls.test_params())
]


@st.composite
def streams(draw: st.DrawFn, discrete: bool, binary_target: bool = False) -> dict[str, Any]:
    """A target, b columns (with copies, constants and relevant ones) and batch cuts."""
    n = draw(st.integers(6, 30))
    b = draw(st.integers(1, 14))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if discrete or binary_target:
        y = rng.integers(0, 2, n).astype(float)
    if discrete:
        X = rng.integers(0, draw(st.integers(2, 4)), (b, n)).astype(float)
    else:
        if not binary_target:
            y = np.round(rng.normal(size=n), draw(st.integers(0, 3)))
        X = np.round(rng.normal(size=(b, n)), draw(st.integers(0, 3)))
    for i in range(b):
        kind = draw(st.sampled_from(["plain", "copy", "relevant", "constant", "y"]))
        if kind == "copy" and i:
            X[i] = X[draw(st.integers(0, i - 1))]
        elif kind == "relevant":
            X[i] = X[i] + y if not discrete else (X[i] + y) % 3
        elif kind == "constant":
            X[i] = float(draw(st.integers(0, 2)))
        elif kind == "y":
            X[i] = y
    cut_points = sorted(set(draw(st.lists(st.integers(1, max(1, b - 1)), max_size=4))))
    cut_points = [0, *[c for c in cut_points if 0 < c < b], b]
    return {"y": y, "X": X, "names": [f"c{i}" for i in range(b)], "cuts": cut_points}


def _groups(cls: Any, names: list[str], cuts: list[int]) -> list[str | None] | None:
    """Group-aware selectors: each batch between cuts is one group."""
    if not getattr(cls, "uses_groups", False):
        return None
    out: list[str | None] = []
    for k, (a, b) in enumerate(itertools.pairwise(cuts)):
        out += [f"g{k}"] * (b - a)
    return out


@pytest.mark.parametrize(("cls", "params"), FEATURE_SELECTORS)
@given(data=st.data())
def test_batch_equals_one_column_at_a_time(
    cls: Any, params: dict[str, Any], data: st.DataObject
) -> None:
    p = cls.params_type.from_mapping(params)
    binary = cls.requires_binary_target(p)
    s = data.draw(
        streams(True, binary)
        if cls.requires_discrete(p)
        else st.one_of(streams(True, binary), streams(False, binary))
    )
    y, X, names, cuts = s["y"], s["X"], s["names"], s["cuts"]
    groups = _groups(cls, names, cuts)
    whole = cls.start(p, y)
    batched = []
    for a, b in itertools.pairwise(cuts):
        batched += whole.learn_features(names[a:b], X[a:b], None if groups is None else groups[a:b])
    if groups is None:
        single = cls.start(p, y)
        singles = [single.learn_feature(n, x) for n, x in zip(names, X, strict=True)]
        all_at_once = cls.start(p, y)
        at_once = all_at_once.learn_features(names, X)
        assert batched == singles == at_once
        assert (
            codec.encode(cls.name, params, whole.snapshot())
            == codec.encode(cls.name, params, single.snapshot())
            == codec.encode(cls.name, params, all_at_once.snapshot())
        )
    else:
        all_at_once = cls.start(p, y)
        at_once = all_at_once.learn_features(names, X, groups)
        assert batched == at_once
        assert codec.encode(cls.name, params, whole.snapshot()) == codec.encode(
            cls.name, params, all_at_once.snapshot()
        )


@pytest.mark.parametrize(("cls", "params"), FEATURE_SELECTORS)
@given(data=st.data())
def test_sparse_input_decides_like_dense(
    cls: Any, params: dict[str, Any], data: st.DataObject
) -> None:
    import scipy.sparse

    p = cls.params_type.from_mapping(params)
    s = data.draw(streams(cls.requires_discrete(p), cls.requires_binary_target(p)))
    y, X, names, cuts = s["y"], s["X"], s["names"], s["cuts"]
    X = X * (np.random.default_rng(0).random(X.shape) < 0.6)  # make it sparse-ish
    groups = _groups(cls, names, cuts)
    dense, sparse = cls.start(p, y), cls.start(p, y)
    assert dense.learn_features(names, X, groups) == sparse.learn_features(
        names, scipy.sparse.csr_matrix(X), groups
    )
    assert codec.encode(cls.name, params, dense.snapshot()) == codec.encode(
        cls.name, params, sparse.snapshot()
    )


@pytest.mark.parametrize(("cls", "params"), FEATURE_SELECTORS)
@given(data=st.data())
def test_replaying_the_event_log_reproduces_the_state(
    cls: Any, params: dict[str, Any], data: st.DataObject
) -> None:
    p = cls.params_type.from_mapping(params)
    s = data.draw(streams(cls.requires_discrete(p), cls.requires_binary_target(p)))
    y, X, names, cuts = s["y"], s["X"], s["names"], s["cuts"]
    groups = _groups(cls, names, cuts)
    # The engine resolves the target (docs/algorithms.md, "Targets"); a few integer
    # values read as classes, which a binary-only algorithm takes as continuous.
    t = resolve_target(y.tolist())
    if t.n_classes and not cls.accepts_multiclass:
        t = resolve_target(y.tolist(), "continuous")

    async def run() -> tuple[bytes, list[dict[str, Any]]]:
        engine = StreamEngine(InMemoryStore(), Settings(store_url="memory://"))
        await engine.create(
            stream_id="p",
            algorithm=cls.name,
            params=params,
            target=y.tolist(),
            feature_names=None,
            target_type=t.target_type,
        )
        for a, b in itertools.pairwise(cuts):
            await engine.add_features(
                "p", names[a:b], X[a:b], groups=None if groups is None else groups[a:b]
            )
        log = wire.event_page(await engine.events("p", None, 100_000))["events"]
        return (await engine.store.load("p")).blob, log

    blob, log = anyio.run(run)
    columns = dict(zip(names, X, strict=True))
    replay = cls.start(p, t.y, t.n_classes)
    for event in log:
        if event["type"] == "batch":
            replay.learn_features(
                event["names"], np.array([columns[x] for x in event["names"]]), event.get("groups")
            )
    assert codec.encode(cls.name, p.to_dict(), replay.snapshot()) == blob
