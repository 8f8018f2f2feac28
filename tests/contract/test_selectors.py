"""The generic contract every registered selector meets.

docs/algorithms.md, "How a selector is built", says what it consists of.

Runs on each REGISTRY entry with each of its ``test_params()``, so a new
selector is checked as soon as it is registered.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import numpy as np
import pytest

from featurestream import codec
from featurestream.errors import InvalidParameter
from featurestream.selectors import REGISTRY, FeatureSelector, InstanceSelector, Reason, Selector

CASES = [
    pytest.param(cls, params, id=f"{name}-{i}")
    for name, cls in sorted(REGISTRY.items())
    for i, params in enumerate(cls.test_params())
]
FEATURE_CASES = [c for c in CASES if issubclass(c.values[0], FeatureSelector)]
INSTANCE_CASES = [c for c in CASES if issubclass(c.values[0], InstanceSelector)]
# Selectors whose state must not depend on how the stream is cut into requests. FSDS's
# does by definition (a frame is one sketch update; tests/service/test_ws.py checks that
# the frame boundaries are recorded).
BATCH_INVARIANT_CASES = [
    c for c in CASES if not issubclass(c.values[0], InstanceSelector) or c.values[0].batch_invariant
]

N, B_COLS = 48, 12
D, M = 10, 40


def feature_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Integer codes 0..2 and a binary target: valid input for every feature selector."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, N).astype(float)
    X = rng.integers(0, 3, (B_COLS, N)).astype(float)
    X[1] = y + rng.integers(0, 2, N)  # relevant
    X[4] = X[1]  # a duplicate
    X[6] = (y + X[2]) % 3  # relevant with a partner
    X[9] = 2.0  # constant
    return X, y, [f"x{i}" for i in range(B_COLS)]


def groups_for(cls: type[Selector[Any, Any]], names: list[str]) -> list[str | None] | None:
    if not getattr(cls, "uses_groups", False):
        return None
    return [f"g{i // 3}" for i in range(len(names))]


def instance_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(M, D))
    y = (X[:, 0] - X[:, 3] + 0.1 * rng.normal(size=M) > 0).astype(float)
    return X, y, [f"d{i}" for i in range(D)]


def encoded(sel: Selector[Any, Any]) -> bytes:
    return codec.encode(sel.name, sel.params.to_dict(), sel.snapshot())


def fresh(cls: type[Selector[Any, Any]], params: dict[str, Any], seed: int = 0) -> Any:
    p = cls.params_type.from_mapping(params)
    if issubclass(cls, FeatureSelector):
        return cls.start(p, feature_data(seed)[1])
    return cls.start(p, instance_data(seed)[2])


def learn(sel: Any, lo: int, hi: int, seed: int = 0) -> list[Any]:
    """Apply items lo..hi of the test stream as one batch."""
    if isinstance(sel, FeatureSelector):
        X, _, names = feature_data(seed)
        groups = groups_for(type(sel), names)
        return list(
            sel.learn_features(names[lo:hi], X[lo:hi], None if groups is None else groups[lo:hi])
        )
    X, y, _ = instance_data(seed)
    return [sel.learn_instances(X[lo:hi], y[lo:hi] if sel.supervised else None)]


def total(cls: type[Selector[Any, Any]]) -> int:
    return B_COLS if issubclass(cls, FeatureSelector) else M


def cuts(cls: type[Selector[Any, Any]]) -> list[int]:
    """Batch boundaries that respect groups (3 features a group)."""
    n = total(cls)
    return [0, 3, 6, n] if issubclass(cls, FeatureSelector) else [0, 7, 8, 25, n]


@pytest.mark.parametrize(("cls", "params"), CASES)
def test_encode_decode_is_the_identity(cls: Any, params: dict[str, Any]) -> None:
    sel = fresh(cls, params)
    learn(sel, 0, total(cls))
    blob = encoded(sel)
    dec = codec.decode(blob)
    assert dec.selector == cls.name
    assert codec.encode(dec.selector, dec.params, dec.state) == blob


@pytest.mark.parametrize(("cls", "params"), CASES)
def test_resume_then_continue_equals_uninterrupted(cls: Any, params: dict[str, Any]) -> None:
    straight = fresh(cls, params)
    learn(straight, 0, total(cls))
    c = cuts(cls)
    first = fresh(cls, params)
    learn(first, 0, c[1])
    dec = codec.decode(encoded(first))
    resumed = cls.resume(cls.params_type.from_mapping(dec.params), dec.state)
    learn(resumed, c[1], total(cls))
    if issubclass(cls, InstanceSelector) and not cls.batch_invariant:
        again = fresh(cls, params)
        learn(again, 0, c[1])
        learn(again, c[1], total(cls))
        assert encoded(resumed) == encoded(again)
    else:
        assert encoded(resumed) == encoded(straight)


@pytest.mark.parametrize(("cls", "params"), BATCH_INVARIANT_CASES)
def test_a_batch_equals_its_items_one_by_one(cls: Any, params: dict[str, Any]) -> None:
    whole = fresh(cls, params)
    out_whole = learn(whole, 0, total(cls))
    parts = fresh(cls, params)
    out_parts = []
    c = cuts(cls)
    step = 3 if getattr(cls, "uses_groups", False) else 1
    for lo in range(0, total(cls), step):
        out_parts += learn(parts, lo, lo + step)
    assert encoded(whole) == encoded(parts)
    if issubclass(cls, FeatureSelector):
        assert out_whole == out_parts
    assert c  # the same boundaries are used by the resume test


@pytest.mark.parametrize(("cls", "params"), CASES)
def test_inputs_are_left_alone(cls: Any, params: dict[str, Any]) -> None:
    if issubclass(cls, FeatureSelector):
        X, y, names = feature_data()
        X0, y0 = X.copy(), y.copy()
        sel = cls.start(cls.params_type.from_mapping(params), y)
        sel.learn_features(names, X, groups_for(cls, names))
        assert np.array_equal(X, X0) and np.array_equal(y, y0)
    else:
        X, y, names = instance_data()
        X0, y0 = X.copy(), y.copy()
        sel = cls.start(cls.params_type.from_mapping(params), names)
        sel.learn_instances(X, y if cls.supervised else None)
        assert np.array_equal(X, X0) and np.array_equal(y, y0)


@pytest.mark.parametrize(("cls", "params"), CASES)
def test_selected_names_only_seen_features(cls: Any, params: dict[str, Any]) -> None:
    sel = fresh(cls, params)
    learn(sel, 0, total(cls))
    universe = set(feature_data()[2] if issubclass(cls, FeatureSelector) else instance_data()[2])
    assert set(sel.selected()) <= universe
    assert len(set(sel.selected())) == len(sel.selected())
    assert [f.name for f in sel.selected_features()] == list(sel.selected())


@pytest.mark.parametrize(("cls", "params"), FEATURE_CASES)
def test_constant_column_is_rejected_as_constant(cls: Any, params: dict[str, Any]) -> None:
    sel = fresh(cls, params)
    decisions = learn(sel, 0, B_COLS)
    constant = [d for d in decisions if d.feature == "x9"]
    assert constant and not constant[0].accepted and constant[0].reason == Reason.CONSTANT


@pytest.mark.parametrize(
    "cls", sorted(REGISTRY.values(), key=lambda c: c.name), ids=lambda c: c.name
)
def test_docstrings_have_examples_and_references(cls: Any) -> None:
    doc = inspect.getdoc(cls) or ""
    module_doc = inspect.getdoc(inspect.getmodule(cls)) or ""
    assert "Examples" in doc and ">>>" in doc
    assert "References" in doc or "References" in module_doc


@pytest.mark.parametrize(
    "cls", sorted(REGISTRY.values(), key=lambda c: c.name), ids=lambda c: c.name
)
def test_every_constraint_rejects_a_generated_bad_value(cls: Any) -> None:
    ptype = cls.params_type
    for f in dataclasses.fields(ptype):
        rule = ptype.constraints.get(f.name)
        if rule is None:
            continue
        with pytest.raises(InvalidParameter) as info:
            ptype.from_mapping({f.name: rule.invalid_example()})
        assert info.value.parameter == f.name
        assert f.name in str(info.value) and ptype.algorithm in str(info.value)


@pytest.mark.parametrize(
    "cls", sorted(REGISTRY.values(), key=lambda c: c.name), ids=lambda c: c.name
)
def test_params_schema_lists_every_field_with_its_default(cls: Any) -> None:
    ptype = cls.params_type
    schema = ptype.json_schema()
    for f in dataclasses.fields(ptype):
        assert f.name in schema["properties"]
        if f.name in ptype.required_fields():
            assert f.name in schema["required"]
            with pytest.raises(InvalidParameter) as info:
                ptype.from_mapping({})
            assert info.value.parameter in ptype.required_fields()
        else:
            assert schema["properties"][f.name]["default"] == f.default


# --------------------------------------------------------------------------- catalogue


@pytest.mark.parametrize(
    "cls", sorted(REGISTRY.values(), key=lambda c: c.name), ids=lambda c: c.name
)
def test_every_parameter_has_a_description(cls: Any) -> None:
    # A new parameter adds a line to its Params class's ``descriptions``, beside its
    # constraint; GET /v1/algorithms shows it in the parameter's schema.
    schema = cls.params_type.json_schema()
    for f in dataclasses.fields(cls.params_type):
        text = schema["properties"][f.name].get("description")
        assert isinstance(text, str) and text.strip(), f"{cls.name}.{f.name} has no description"


@pytest.mark.parametrize(
    "cls", sorted(REGISTRY.values(), key=lambda c: c.name), ids=lambda c: c.name
)
def test_every_algorithm_names_what_its_scores_mean(cls: Any) -> None:
    for params in cls.test_params():
        p = cls.params_type.from_mapping(params)
        kind = cls.score_kind(p)
        assert kind.kind and isinstance(kind.higher_is_better, bool)
        decision = cls.decision_score_kind(p)
        if issubclass(cls, FeatureSelector):
            assert decision is not None and decision.kind
        else:
            assert decision is None  # instance streams make no scored decisions
    if cls.score_by is not None:
        # Every value of the deciding parameter has its kind.
        name, kinds = cls.score_by
        assert set(kinds) == set(cls.params_type.constraints[name].options)


@pytest.mark.parametrize(("cls", "params"), FEATURE_CASES)
def test_a_checkpoint_sees_the_columns_and_can_stop_the_batch(
    cls: Any, params: dict[str, Any]
) -> None:
    seen: list[int] = []
    sel = fresh(cls, params)
    X, _, names = feature_data()
    groups = groups_for(cls, names)
    before = encoded(sel)
    sel.learn_features(names, X, groups, checkpoint=seen.append)
    # Called between columns (or groups), counting the columns complete, in order.
    assert seen and seen == sorted(seen) and seen[0] == 0 and seen[-1] < len(names)
    assert len(set(seen)) > 1

    class Stop(Exception):
        pass

    def stop(done: int) -> None:
        if done > 0:
            raise Stop

    sel = fresh(cls, params)
    with pytest.raises(Stop):
        sel.learn_features(names, X, groups, checkpoint=stop)
    # The batch stopped before changing the state (the engine restores it anyway).
    assert encoded(sel) == before
    # Without a checkpoint, the selector goes on as if none had been given.
    sel = fresh(cls, params)
    sel.learn_features(names, X, groups)


@pytest.mark.parametrize(
    ("cls", "params"), [c for c in INSTANCE_CASES if c.values[0].batch_invariant]
)
def test_a_checked_batch_of_instances_equals_the_batch(
    cls: Any, params: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from featurestream.selectors import base

    monkeypatch.setattr(base, "_CHECKED_BLOCK", 7 * D)  # blocks of 7 instances
    X, y, _ = instance_data()
    labels = y if cls.supervised else None
    whole, checked = fresh(cls, params), fresh(cls, params)
    expected = whole.learn_instances(X, labels)
    seen: list[int] = []
    got = checked.learn_instances(X, labels, checkpoint=seen.append)
    assert seen[:3] == [0, 7, 14] and seen == sorted(seen)
    assert got == expected and encoded(checked) == encoded(whole)
