"""Targets (docs/algorithms.md, "Targets"): target_type, class labels and the multi-class rules.

Relabelling the classes (any permutation of the label values, or strings
instead of numbers) must give exactly the same decisions and selection for
every algorithm that accepts multi-class targets; two classes must give the
binary results whatever their labels.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_breast_cancer, load_digits, load_wine

from featurestream import codec
from featurestream.errors import InvalidInput
from featurestream.selectors import REGISTRY
from featurestream.selectors.targets import resolve_target

WINE_X, WINE_Y = load_wine(return_X_y=True)
_DIGITS_X, _DIGITS_Y = load_digits(return_X_y=True)
# A shuffled subset keeps the digits runs short; every class is present.
_ORDER = np.random.default_rng(7).permutation(len(_DIGITS_Y))[:400]
# 24 of the 64 pixels (the middle rows): OSFS's conditioning sets grow with the
# number of relevant features, and 24 keep each run well under a second.
DIGITS_X, DIGITS_Y = _DIGITS_X[_ORDER][:, 20:44], _DIGITS_Y[_ORDER].astype(int)

FEATURE_RUNS: list[tuple[str, dict[str, Any]]] = [
    ("saola", {}),
    ("saola", {"bound": "max", "alpha": 0.05}),
    ("group_saola", {}),
    ("osfs", {"max_k": 2}),
    ("fast_osfs", {"max_k": 2}),
    ("alpha_investing", {}),
]
DISCRETE_RUNS: list[tuple[str, dict[str, Any]]] = [
    ("saola", {"test": "su"}),
    ("fast_osfs", {"test": "g2", "max_k": 2}),
    ("osfs", {"test": "chi2", "max_k": 1}),
]


def feature_run(algorithm: str, params: dict[str, Any], X: np.ndarray, labels: Any) -> Any:
    """Decisions and selection of a feature stream over the columns of X, target ``labels``."""
    cls: Any = REGISTRY[algorithm]
    t = resolve_target(list(labels))
    sel = cls.start(cls.params_type.from_mapping(params), t.y, t.n_classes)
    names = [f"f{i}" for i in range(X.shape[1])]
    groups = [f"g{i // 5}" for i in range(X.shape[1])] if cls.uses_groups else None
    out = []
    for lo in range(0, len(names), 5):  # a few requests, as a client sends them
        hi = min(lo + 5, len(names))
        part = None if groups is None else groups[lo:hi]
        for d in sel.learn_features(names[lo:hi], X[:, lo:hi].T, part):
            out.append(
                (d.feature, d.accepted, d.reason, d.by, d.score, [e.feature for e in d.evicted])
            )
    return t.target_type, out, sel.selected_features()


def relabel(y: np.ndarray, perm: list[int], as_strings: bool) -> list[Any]:
    return [f"class {perm[int(v)]}" if as_strings else perm[int(v)] for v in y]


# ------------------------------------------------------------------ auto resolution


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ([0, 1, 1, 0], ("binary", (0, 1))),
        ([3, 7, 7], ("binary", (3, 7))),
        ([5, 5, 5], ("binary", (5,))),
        ([0, 1, 2], ("multiclass", (0, 1, 2))),
        (list(range(100)), ("multiclass", tuple(range(100)))),
        (list(range(101)), ("continuous", ())),
        ([0.5, 1.0, 2.0], ("continuous", ())),
        ([1.0, 2.0, 1.0], ("binary", (1, 2))),
        (["no", "yes", "no"], ("multiclass", ("no", "yes"))),
        (["b", "a", "c"], ("multiclass", ("a", "b", "c"))),
    ],
)
def test_auto_resolves_like_type_of_target(
    labels: list[Any], expected: tuple[str, tuple[Any, ...]]
) -> None:
    t = resolve_target(labels)
    assert (t.target_type, t.classes) == expected
    # Multi-class rules from K = 3 on; two classes use the binary rule.
    assert t.n_classes == (
        len(t.classes) if t.target_type == "multiclass" and len(t.classes) >= 3 else 0
    )


def test_declared_types_are_checked() -> None:
    assert resolve_target([0, 1, 2], "continuous").target_type == "continuous"
    assert resolve_target([0.5, 1.5, 2.5], "multiclass").classes == (0.5, 1.5, 2.5)
    with pytest.raises(InvalidInput, match="at most 2 classes"):
        resolve_target([0, 1, 2], "binary")
    with pytest.raises(InvalidInput, match="must be numbers"):
        resolve_target(["a", "b"], "continuous")
    with pytest.raises(InvalidInput, match="not a mix"):
        resolve_target(["a", 1])
    with pytest.raises(InvalidInput, match="target_type must be one of"):
        resolve_target([0, 1], "ordinal")


def test_binary_targets_are_coded_in_sorted_order_whatever_the_labels() -> None:
    assert resolve_target([-1, 1, 1]).y.tolist() == [0.0, 1.0, 1.0]
    assert resolve_target([2, 1, 2]).y.tolist() == [1.0, 0.0, 1.0]
    assert resolve_target(np.array([7, 5])).y.tolist() == [1.0, 0.0]
    assert resolve_target(["yes", "no"], "binary").y.tolist() == [1.0, 0.0]
    assert resolve_target([20, 10, 30]).y.tolist() == [1.0, 0.0, 2.0]


# ------------------------------------------------------------------ relabelling


@pytest.mark.parametrize(("algorithm", "params"), FEATURE_RUNS)
@settings(max_examples=4, deadline=None)
@given(perm=st.permutations(range(3)), as_strings=st.booleans())
def test_relabelling_wine_changes_nothing(
    algorithm: str, params: dict[str, Any], perm: list[int], as_strings: bool
) -> None:
    base = feature_run(algorithm, params, WINE_X, WINE_Y.astype(int))
    assert base[0] == "multiclass"
    assert feature_run(algorithm, params, WINE_X, relabel(WINE_Y, perm, as_strings)) == base


@pytest.mark.slow  # ten classes: the slowest relabelling runs (the wine ones stay fast)
@pytest.mark.parametrize(("algorithm", "params"), FEATURE_RUNS[:1] + FEATURE_RUNS[3:])
@settings(max_examples=2, deadline=None)
@given(perm=st.permutations(range(10)), as_strings=st.booleans())
def test_relabelling_digits_changes_nothing(
    algorithm: str, params: dict[str, Any], perm: list[int], as_strings: bool
) -> None:
    base = feature_run(algorithm, params, DIGITS_X, DIGITS_Y)
    assert feature_run(algorithm, params, DIGITS_X, relabel(DIGITS_Y, perm, as_strings)) == base


@pytest.mark.parametrize(("algorithm", "params"), DISCRETE_RUNS)
@settings(max_examples=2, deadline=None)
@given(perm=st.permutations(range(10)), as_strings=st.booleans())
def test_relabelling_digits_with_discrete_tests_changes_nothing(
    algorithm: str, params: dict[str, Any], perm: list[int], as_strings: bool
) -> None:
    # Pixels binned to 3 levels: with all 17, almost no conditional test has
    # 5 instances per degree of freedom.
    X = DIGITS_X // 6
    base = feature_run(algorithm, params, X, DIGITS_Y)
    assert base[2]
    assert feature_run(algorithm, params, X, relabel(DIGITS_Y, perm, as_strings)) == base


def test_wine_as_classes_is_not_wine_as_numbers() -> None:
    """The issue's attack: SAOLA read 0, 1, 2 as ordered numbers."""
    as_numbers = resolve_target(WINE_Y, "continuous")
    cls: Any = REGISTRY["saola"]
    numbers = cls.start(cls.params_type(), as_numbers.y)
    numbers.learn_features([f"f{i}" for i in range(13)], WINE_X.T)
    classes = feature_run("saola", {}, WINE_X, WINE_Y.astype(int))[2]
    permuted = feature_run("saola", {}, WINE_X, relabel(WINE_Y, [2, 0, 1], False))[2]
    assert classes == permuted
    assert [f.name for f in classes] != list(numbers.selected())


# ------------------------------------------------------------------ two classes


BC_X, BC_Y = load_breast_cancer(return_X_y=True)


@pytest.mark.parametrize(
    ("algorithm", "params"),
    [*FEATURE_RUNS, ("grafting", {}), ("grafting", {"loss": "squared"})],
)
def test_two_string_classes_decide_as_the_numeric_binary_target(
    algorithm: str, params: dict[str, Any]
) -> None:
    """K = 2 takes the binary rule (one indicator, alpha unchanged) whatever the labels."""
    X = BC_X[:, :12]
    numeric = feature_run(algorithm, params, X, BC_Y.astype(int))
    strings = feature_run(algorithm, params, X, ["malignant" if v == 0 else "benign" for v in BC_Y])
    swapped = feature_run(algorithm, params, X, ["b" if v == 0 else "a" for v in BC_Y])
    assert numeric[0] == "binary" and strings[0] == swapped[0] == "multiclass"

    def decisions(run: Any) -> Any:
        # The scores of a swapped binary target may differ in the last bit (1 - y is
        # not y); the decisions and the selection may not.
        return [(*d[:4], d[5]) for d in run[1]], [f.name for f in run[2]]

    assert decisions(strings) == decisions(numeric) == decisions(swapped)


# ------------------------------------------------------------------ refusals and state


@pytest.mark.parametrize("algorithm", ["grafting"])
def test_grafting_refuses_a_multiclass_target_naming_the_algorithms_that_accept_it(
    algorithm: str,
) -> None:
    cls: Any = REGISTRY[algorithm]
    t = resolve_target(WINE_Y.astype(int))
    with pytest.raises(InvalidInput, match="saola") as exc:
        cls.start(cls.params_type(), t.y, t.n_classes)
    accepting = (
        "alpha_investing, fast_osfs, fires, group_saola, kbest, ofs_a3m, ofs_density, osfs, "
        "ossfs_dd"
    )
    assert f"{accepting}, saola" in str(exc.value)
    assert "grafting" not in str(exc.value).split("accept multi-class targets:")[1]


def test_ofs_refuses_a_third_class_and_takes_two_string_labels() -> None:
    cls: Any = REGISTRY["ofs"]
    names = [f"f{i}" for i in range(30)]
    sel = cls.start(cls.params_type(num_features=5), names, "auto")
    with pytest.raises(InvalidInput, match="accept multi-class targets: alpha_investing"):
        sel.learn_instances(BC_X[:3], ["a", "b", "c"])
    assert sel.instances_seen == 0
    numeric = cls.start(cls.params_type(num_features=5), names, "")
    numeric.learn_instances(BC_X, BC_Y)
    for labels in (np.where(BC_Y == 1, "pos", "neg"), np.where(BC_Y == 1, "a", "b"), 1 - BC_Y):
        typed = cls.start(cls.params_type(num_features=5), names, "auto")
        typed.learn_instances(BC_X, labels)
        assert typed.selected() == numeric.selected()


@settings(max_examples=4, deadline=None)
@given(perm=st.permutations(range(3)), as_strings=st.booleans())
def test_fires_one_vs_rest_ignores_the_labels(perm: list[int], as_strings: bool) -> None:
    cls: Any = REGISTRY["fires"]
    names = [f"f{i}" for i in range(13)]
    order = np.random.default_rng(3).permutation(len(WINE_Y))
    X, y = WINE_X[order], WINE_Y[order]

    def run(labels: list[Any]) -> Any:
        sel = cls.start(cls.params_type(num_features=4), names, "auto")
        for lo in range(0, len(labels), 25):
            sel.learn_instances(X[lo : lo + 25], labels[lo : lo + 25])
        return sel.selected_features(), sel.status()["target_type"]

    base = run([int(v) for v in y])
    assert base[1] == "multiclass"
    assert run(relabel(y, perm, as_strings)) == base


def test_fires_keeps_the_binary_rule_for_numeric_binary_labels() -> None:
    cls: Any = REGISTRY["fires"]
    names = [f"f{i}" for i in range(30)]
    legacy = cls.start(cls.params_type(num_features=5), names, "")
    typed = cls.start(cls.params_type(num_features=5), names, "auto")
    for lo in range(0, 569, 100):
        legacy.learn_instances(BC_X[lo : lo + 100], BC_Y[lo : lo + 100])
        typed.learn_instances(BC_X[lo : lo + 100], BC_Y[lo : lo + 100])
    assert typed.selected_features() == legacy.selected_features()
    assert typed.state.mu.shape == (1, 30)


def test_class_labels_round_trip_through_the_codec_and_old_states_decode() -> None:
    cls: Any = REGISTRY["fires"]
    sel = cls.start(cls.params_type(num_features=3), [f"f{i}" for i in range(13)], "auto")
    sel.learn_instances(WINE_X[::5], [["rouge", "blanc", "rosé"][int(v)] for v in WINE_Y[::5]])
    blob = codec.encode("fires", sel.params.to_dict(), sel.state)
    back = codec.decode(blob).state
    assert back.classes == ("blanc", "rosé", "rouge") and back.target_type == "multiclass"
    assert np.array_equal(back.mu, sel.state.mu)
    # A state stored before target types has none of the new fields: it decodes to
    # the old behaviour (numeric binary labels, one model; one target column).
    old = cls.start(cls.params_type(num_features=3), [f"f{i}" for i in range(13)], "")
    blob = without_fields(
        codec.encode("fires", old.params.to_dict(), old.state),
        ("target_type", "classes", "first_label"),
    )
    legacy = codec.decode(blob).state
    assert legacy.target_type == "" and legacy.classes == ()
    saola: Any = REGISTRY["saola"]
    s = saola.start(saola.params_type(), WINE_Y.astype(float))
    blob = without_fields(codec.encode("saola", {}, s.state), ("n_classes",))
    assert codec.decode(blob).state.n_classes == 0


def without_fields(blob: bytes, names: tuple[str, ...]) -> bytes:
    """An encoded state as a version without ``names`` in its State stored it."""
    header, body = codec.decode_header(blob)
    assert all(n in header["fields"] for n in names)
    for n in names:
        del header["fields"][n]
    raw = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<4sHI", codec.MAGIC, codec.FORMAT_VERSION, len(raw)) + raw + blob[body:]


# --------------------------------------------------------------------------- fast path


def _outcome(f: Any) -> Any:
    """What a call gives: its result, or the InvalidInput it raises (message and field)."""
    try:
        return ("ok", f())
    except InvalidInput as e:
        return ("refused", str(e), e.field)


def _same_target(a: Any, b: Any) -> None:
    assert a[0] == b[0]
    if a[0] == "refused":
        assert a == b
        return
    ta, tb = a[1], b[1]
    assert (ta.target_type, ta.classes, ta.n_classes) == (tb.target_type, tb.classes, tb.n_classes)
    assert [type(c) for c in ta.classes] == [type(c) for c in tb.classes]
    assert ta.y.dtype == tb.y.dtype and ta.y.tobytes() == tb.y.tobytes()


_NUMBERS = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0, 3.0, 0.5, 2.0**53, -(2.0**60), float("nan")]),
    st.integers(-3, 150).map(float),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
)


@settings(max_examples=400, deadline=None)
@given(
    labels=st.lists(_NUMBERS, min_size=0, max_size=140),
    target_type=st.sampled_from(["auto", "continuous", "binary", "multiclass"]),
    as_ints=st.booleans(),
)
def test_numeric_labels_resolve_as_the_general_rules(
    labels: list[float], target_type: str, as_ints: bool
) -> None:
    """Numbers in an array or a plain list take the vectorised path; numpy scalars in a
    list take the general one. Both give the same target, bit for bit, or the same error."""
    if as_ints:
        labels = [float(int(v)) for v in labels if np.isfinite(v) and abs(v) < 2**62]
        arr: np.ndarray = np.array(labels, dtype=np.int64)
        general: list[Any] = [np.int64(v) for v in arr]
    else:
        arr = np.array(labels, dtype=np.float64)
        general = [np.float64(v) for v in labels]
    expected = _outcome(lambda: resolve_target(general, target_type))
    _same_target(_outcome(lambda: resolve_target(arr, target_type)), expected)
    plain = arr.tolist()  # plain ints or floats, as JSON gives them
    _same_target(_outcome(lambda: resolve_target(plain, target_type)), expected)


@settings(max_examples=300, deadline=None)
@given(
    labels=st.lists(
        st.sampled_from([0.0, 1.0, -1.0, 2.0, 3.0, 0.5, -0.0]), min_size=1, max_size=20
    ),
    previous=st.sampled_from([(), (0, 1), (-1, 1), (1,), (0, 1, 2), (0.5, 2)]),
    target_type=st.sampled_from(["auto", "binary", "multiclass"]),
    accepts_multiclass=st.booleans(),
)
def test_numeric_instance_labels_resolve_as_the_general_rules(
    labels: list[float],
    previous: tuple[Any, ...],
    target_type: str,
    accepts_multiclass: bool,
) -> None:
    from featurestream.selectors.batch_labels import instance_labels_typed

    first = previous[0] if previous else None

    def run(y: Any) -> Any:
        return _outcome(
            lambda: instance_labels_typed(
                "fires", accepts_multiclass, target_type, previous, first, y
            )
        )

    expected = run([np.float64(v) for v in labels])
    for y in (np.array(labels), labels):
        got = run(y)
        assert got[0] == expected[0]
        if got[0] == "refused":
            assert got == expected
            continue
        a, b = got[1], expected[1]
        assert (a.multiclass, a.target_type, a.classes, a.first) == (
            b.multiclass,
            b.target_type,
            b.classes,
            b.first,
        )
        assert [type(c) for c in a.classes] == [type(c) for c in b.classes]
        assert type(a.first) is type(b.first)
        assert a.values.tobytes() == b.values.tobytes()


# ------------------------------------------------------------------ class codes


def test_class_codes_number_the_classes_in_sorted_label_order() -> None:
    from featurestream.selectors.targets import class_codes

    assert class_codes([7, 5, 7, 9]) == ((5, 7, 9), pytest.approx(np.array([1.0, 0.0, 1.0, 2.0])))
    classes, coded = class_codes(["pos", "neg", "pos"])
    assert classes == ("neg", "pos") and coded.tolist() == [1.0, 0.0, 1.0]
    assert class_codes(np.array([2.5, -1.0]))[1].tolist() == [1.0, 0.0]
    with pytest.raises(InvalidInput, match="not a mix"):
        class_codes(["a", 1])
    with pytest.raises(InvalidInput, match="NaN"):
        class_codes([1.0, float("nan")])


@pytest.mark.parametrize(
    "labels",
    [
        [0, 1, 1, 0],
        [1, 2, 2, 1],
        [-1, 1, 1, -1],
        [5, 7, 7, 5],
        ["a", "b", "b", "a"],
        [0.5, 3.0, 3.0, 0.5],
    ],
)
def test_binary_codes_are_0_and_1_in_sorted_label_order(labels: list[Any]) -> None:
    from featurestream.selectors.targets import binary_codes

    assert binary_codes(labels).tolist() == [0.0, 1.0, 1.0, 0.0]
    assert binary_codes(np.array(labels)).tolist() == [0.0, 1.0, 1.0, 0.0]
    assert binary_codes(labels[1:3]).tolist() == [0.0, 0.0]  # one class: code 0


def test_binary_codes_refuse_a_third_class_naming_the_labels() -> None:
    from featurestream.selectors.targets import binary_codes

    with pytest.raises(InvalidInput, match=r"at most 2 classes; these labels have 3 \(1, 2, 3\)"):
        binary_codes([1, 2, 3], field="target")


def test_discrete_target_codes_two_classes_in_sorted_order() -> None:
    from featurestream.selectors.targets import discrete_target

    for lo, hi in ((0.0, 1.0), (1.0, 2.0), (-1.0, 1.0), (5.0, 7.0)):
        y = np.array([hi, lo, hi, hi])
        assert discrete_target(y, 0).tolist() == [1.0, 0.0, 1.0, 1.0]
    assert discrete_target(np.array([3.0, 3.0]), 0).tolist() == [0.0, 0.0]
    # Multi-class: by first appearance, so the count tables never depend on the labels.
    assert discrete_target(np.array([2.0, 0.0, 2.0, 1.0]), 3).tolist() == [0.0, 1.0, 0.0, 2.0]
    # A continuous target (more than two values, no classes) must hold codes as it is.
    y = np.array([0.0, 2.0, 1.0])
    assert discrete_target(y, 0) is y


# ------------------------------------------------------------------ discrete tests, two classes

BINARY_RELABELS: list[tuple[Any, Any]] = [
    (0, 1),
    (1, 0),
    (1, 2),
    (-1, 1),
    (5, 7),
    (7, 5),
    ("a", "b"),
    ("yes", "no"),
]


def _binned_breast_cancer() -> tuple[np.ndarray, np.ndarray]:
    """12 breast-cancer columns binned at their terciles to codes 0..2."""
    X = BC_X[:, :12]
    cuts = np.quantile(X, [1 / 3, 2 / 3], axis=0)
    return (cuts[0] < X).astype(int) + (cuts[1] < X).astype(int), BC_Y


@pytest.mark.parametrize(
    ("algorithm", "params"), [*DISCRETE_RUNS, ("osfs", {"test": "g2", "max_k": 2})]
)
def test_discrete_tests_decide_alike_for_any_two_labels(
    algorithm: str, params: dict[str, Any]
) -> None:
    """The issue's finding: chi2 of one feature was 10.24 with 0/1 and 5.12 with 1/2, and -1/+1
    was refused; every discrete test codes a two-class target itself."""
    X, y = _binned_breast_cancer()
    base = feature_run(algorithm, params, X, y)
    assert base[2]
    for lo, hi in BINARY_RELABELS:
        run = feature_run(algorithm, params, X, [hi if v else lo for v in y])
        # Swapped classes (hi < lo) may change a score in its last bit, never a decision.
        assert _decisions(run) == _decisions(base), (lo, hi)
        if (lo < hi) if type(lo) is type(hi) else True:
            assert run[1] == base[1] and run[2] == base[2], (lo, hi)


def _decisions(run: Any) -> Any:
    return (
        [(*d[:4], d[5]) for d in run[1]],
        [f.name for f in run[2]],
        [pytest.approx(d[4], rel=1e-9) for d in run[1]],
    )


def test_an_invalid_feature_code_is_refused_naming_the_feature() -> None:
    cls: Any = REGISTRY["osfs"]
    sel = cls.start(cls.params_type(test="g2"), np.array([-1.0, 1.0, 1.0, -1.0]))
    with pytest.raises(InvalidInput, match="Column 'b': discrete tests need non-negative") as exc:
        sel.learn_features(["a", "b"], np.array([[0.0, 1, 1, 0], [0.0, -1, 1, 0]]))
    assert exc.value.field == "features[1].values"
    with pytest.raises(InvalidInput, match=r"Column 'b'.*got 0\.5") as exc:
        sel.learn_features(["a", "b"], sp.csr_matrix(np.array([[0.0, 1, 1, 0], [0.0, 0, 0.5, 0]])))
    assert exc.value.field == "features[1].values"
    with pytest.raises(InvalidInput, match=r"Column 'a'.*at most 1024 levels"):
        sel.learn_features(["a"], np.array([[0.0, 5000, 1, 0]]))
    assert sel.state.features_seen == 0
