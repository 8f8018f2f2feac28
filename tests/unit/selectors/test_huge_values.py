"""Every selector on data of huge magnitude (issue 14, point 2).

Values such as +-1e300 pass the input checks (they are finite) but overflow
float64 once squared. Whatever the selector, a batch ends in one of two ways:
the state stays finite, or the batch is refused (``NumericallyUnstable`` from a
kernel's guard, or a state the engine's ``finite_state`` would refuse); never
another exception, and never a hang. A watchdog ends the test process if a
kernel spins (a spinning LAPACK call holds the GIL, so only a C-level timer
can stop it).
"""

from __future__ import annotations

import faulthandler
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from featurestream import codec
from featurestream.errors import InvalidInput, InvalidParameter, NumericallyUnstable
from featurestream.selectors import (
    FSDS,
    REGISTRY,
    FeatureSelector,
    FSDSParams,
    InstanceSelector,
    Selector,
)
from featurestream.selectors.fsds import SAFE_MAGNITUDE, fsds_scores, sketch_step

# Overflow is what these tests provoke: numpy's warnings about it are expected.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# Longer than any batch here takes; a kernel that spins exceeds it.
WATCHDOG_SECONDS = 120
HUGE = [1e300, -1e300, 1.7e308, -1.7e308, 1e160, -1e160, 3e154]
ORDINARY = [0.0, 1.0, -1.0, 2.0, 0.5, -3.25]

CASES = [
    pytest.param(cls, params, id=f"{name}-{i}")
    for name, cls in sorted(REGISTRY.items())
    for i, params in enumerate(cls.test_params())
]
N_ROWS, D = 16, 4


@pytest.fixture(autouse=True)
def watchdog() -> Iterator[None]:
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def matrices(rows: int, cols: int) -> st.SearchStrategy[np.ndarray]:
    """Huge and ordinary values mixed (at least one huge)."""
    cells = st.lists(
        st.sampled_from(HUGE + ORDINARY), min_size=rows * cols, max_size=rows * cols
    ).filter(lambda v: any(abs(x) > 1e150 for x in v))
    return cells.map(lambda v: np.array(v, dtype=np.float64).reshape(rows, cols))


def apply(sel: Selector[Any, Any], batch: Any) -> str:
    """Apply a batch as the engine does: 'finite', or 'refused' with the state unchanged."""
    before = sel.snapshot()
    try:
        if isinstance(sel, FeatureSelector):
            names, X, groups = batch
            sel.learn_features(names, X, groups)
        else:
            X, y = batch
            sel.learn_instances(X, y)
    except NumericallyUnstable:
        sel.state = before
        return "refused"
    except InvalidInput:
        # Integer codes only (the discrete tests), or labels the selector refuses.
        sel.state = before
        return "refused"
    if codec.nonfinite(sel.snapshot()) is not None:
        sel.state = before
        return "refused"
    return "finite"


def feature_batch(cls: type[Selector[Any, Any]], X: np.ndarray, tag: str) -> Any:
    names = [f"{tag}{i}" for i in range(X.shape[0])]
    groups = [f"g{tag}{i // 2}" for i in range(X.shape[0])] if cls.uses_groups else None
    return names, X, groups


@pytest.mark.parametrize(("cls", "params"), CASES)
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_huge_values_give_a_finite_state_or_a_refusal(
    cls: type[Selector[Any, Any]], params: dict[str, Any], data: st.DataObject
) -> None:
    p = cls.params_type.from_mapping(params)
    rng = np.random.default_rng(0)
    if issubclass(cls, FeatureSelector):
        y = rng.integers(0, 2, N_ROWS).astype(float)
        if data.draw(st.booleans(), label="huge target"):
            y = np.where(y > 0, 1e300, -1e300)
        try:
            sel: Selector[Any, Any] = cls.start(p, y)
        except InvalidInput:
            return  # codes or labels only: such a target is refused
        if codec.nonfinite(sel.snapshot()) is not None:
            return  # the engine refuses to create such a stream
        attack = feature_batch(cls, data.draw(matrices(3, N_ROWS), label="columns"), "h")
        normal = feature_batch(cls, rng.integers(0, 3, (3, N_ROWS)).astype(float), "n")
    else:
        assert issubclass(cls, InstanceSelector)
        sel = cls.start(p, [f"d{i}" for i in range(D)])
        labels = rng.integers(0, 2, N_ROWS).astype(float) if cls.supervised else None
        attack = (data.draw(matrices(N_ROWS, D), label="instances"), labels)
        normal = (rng.normal(size=(N_ROWS, D)), labels)
    assert apply(sel, attack) in ("finite", "refused")
    # Whatever happened, the stream goes on with ordinary data, promptly and finitely.
    assert apply(sel, normal) in ("finite", "refused")
    assert codec.nonfinite(sel.snapshot()) is None


def test_fsds_takes_the_attack_of_the_issue_and_stays_exact_enough() -> None:
    sel = FSDS.start(FSDSParams(num_features=2), ["a", "b", "c"])
    sel.learn_instances(np.array([[1e300, -1e300, 1e300]]))
    B = sel.state.sketch
    assert codec.nonfinite(sel.state) is None
    # One row: B B^T = x x^T, so B is +-x (the sign of a singular vector is free).
    np.testing.assert_allclose(np.abs(B[:, 0]), [1e300, 1e300, 1e300], rtol=1e-12)
    np.testing.assert_allclose(sel.state.scores, np.full(3, 1 / (3**0.5 * 3**0.5 * 1e300)))
    sel.learn_instances(np.array([[1.0, 2.0, 3.0], [2.0, 0.0, 1.0]]))
    assert codec.nonfinite(sel.state) is None


def test_fsds_on_scaled_data_gives_the_exact_sketch_and_scores() -> None:
    """Data beyond SAFE_MAGNITUDE: the sketch is the unscaled one times the (power of
    two) scale, and the scores are s / (s^2 + a) evaluated exactly (s^2 ~ 1e480)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(7, 5))
    c = 2.0**800
    _, U1, s1 = sketch_step(np.zeros((5, 0)), X, 3)
    _, U2, s2 = sketch_step(np.zeros((5, 0)), X * c, 3)
    np.testing.assert_allclose(s2 / c, s1, rtol=1e-13)
    np.testing.assert_allclose(np.abs(U2), np.abs(U1), rtol=1e-12, atol=1e-14)
    for ridge in (None, 0.5):
        s_k = [Fraction(float(v)) for v in s2[:2]]
        a = 8 * s_k[-1] if ridge is None else Fraction(ridge)
        ratio = np.array([float(v / (v * v + a)) for v in s_k])
        exact = (np.abs(U2[:, :2]) * ratio).max(axis=1)
        np.testing.assert_allclose(fsds_scores(U2, s2, 2, ridge), exact, rtol=1e-13)


def test_fsds_below_the_threshold_computes_exactly_as_before() -> None:
    """No scaling below SAFE_MAGNITUDE: the plain formulas, bit for bit."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(6, 4)) * 1e100
    assert np.abs(X).max() < SAFE_MAGNITUDE
    _, _, s = sketch_step(np.zeros((4, 0)), X, 2)
    _, s_plain, _ = np.linalg.svd(X.T, full_matrices=False)
    delta = float(s_plain[1]) ** 2
    np.testing.assert_array_equal(s, np.sqrt(np.maximum(s_plain[:2] ** 2 - delta, 0.0)))


def test_fsds_never_hands_a_non_finite_sketch_to_the_svd() -> None:
    sel = FSDS.start(FSDSParams(num_features=2), ["a", "b", "c"])
    sel.learn_instances(np.array([[1.0, 2.0, 3.0]]))
    sel.state = type(sel.state)(
        feature_names=sel.state.feature_names,
        sketch_size=sel.state.sketch_size,
        sketch=np.full_like(sel.state.sketch, np.nan),
        scores=sel.state.scores,
        instances_seen=1,
        batches_seen=1,
    )
    with pytest.raises(NumericallyUnstable):
        sel.learn_instances(np.array([[1.0, 1.0, 1.0]]))


@pytest.mark.parametrize(
    ("algorithm", "params", "parameter"),
    [
        ("fsds", {"num_features": 1, "ridge": float("inf")}, "ridge"),
        ("fsds", {"num_features": 1, "ridge": 10**400}, "ridge"),
        ("ofs", {"num_features": 10**30}, "num_features"),
        ("fsds", {"num_features": 2**63}, "num_features"),
        ("alpha_investing", {"w0": float("inf")}, "w0"),
    ],
)
def test_parameters_beyond_float64_or_int64_are_invalid(
    algorithm: str, params: dict[str, Any], parameter: str
) -> None:
    with pytest.raises(InvalidParameter) as info:
        REGISTRY[algorithm].params_type.from_mapping(params)
    assert info.value.parameter == parameter


def test_an_svd_that_does_not_converge_is_a_refusal_not_a_500(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fails(*args: Any, **kwargs: Any) -> Any:
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(np.linalg, "svd", fails)
    sel = FSDS.start(FSDSParams(num_features=2), ["a", "b", "c"])
    with pytest.raises(NumericallyUnstable, match="did not converge"):
        sel.learn_instances(np.array([[1.0, 2.0, 3.0]]))
