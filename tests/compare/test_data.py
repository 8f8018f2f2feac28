"""The data sets of ``featurestream compare``: built-in ones, files, arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, load_wine, make_classification

from featurestream.compare.data import BUILTIN, builtin, from_arrays, load, madelon
from featurestream.errors import InvalidInput


@pytest.mark.parametrize(
    ("name", "loader", "classes"),
    [("breast_cancer", load_breast_cancer, 2), ("wine", load_wine, 3), ("digits", load_digits, 10)],
)
def test_builtin_sets_are_scikit_learns(name: str, loader: object, classes: int) -> None:
    bunch = loader()  # type: ignore[operator]
    d = builtin(name)
    np.testing.assert_array_equal(d.X, bunch.data)
    np.testing.assert_array_equal(d.y, bunch.target)
    assert d.names == tuple(str(n).replace(" ", "_") for n in bunch.feature_names)
    assert (d.task, len(d.classes)) == ("classification", classes)
    assert d.target_type == ("binary" if classes == 2 else "multiclass")


def test_madelon_is_make_classification_with_its_columns_spread() -> None:
    d = madelon()
    assert d.X.shape == (2000, 500) and d.classes == (0, 1)
    X, y = make_classification(
        n_samples=2000,
        n_features=500,
        n_informative=5,
        n_redundant=15,
        n_repeated=0,
        n_clusters_per_class=16,
        flip_y=0.01,
        shuffle=False,
        random_state=2003,
    )
    np.testing.assert_array_equal(d.y, y)
    # The same columns, permuted; the planted ones are the generator's first 20.
    index = {n: i for i, n in enumerate(d.names)}
    planted = sorted(index[n] for n in d.planted)
    original = sorted(
        next(j for j in range(500) if np.array_equal(X[:, j], d.X[:, i])) for i in planted
    )
    assert original == list(range(20))
    # Spread over the order rather than first: not all in the first 100 columns.
    assert max(planted) > 100
    assert "madelon" in BUILTIN


def test_targets_are_coded_in_sorted_order() -> None:
    d = from_arrays("t", np.eye(4), [3, 1, 3, 1])
    assert (d.task, d.classes, d.y.tolist()) == ("classification", (1, 3), [1.0, 0.0, 1.0, 0.0])
    d = from_arrays("t", np.eye(3), ["b", "c", "a"])
    assert (d.classes, d.y.tolist(), d.target_type) == (
        ("a", "b", "c"),
        [1.0, 2.0, 0.0],
        "multiclass",
    )
    d = from_arrays("r", np.eye(3), [0.5, 1.0, 2.0])
    assert (d.task, d.target_type, d.classes) == ("regression", "continuous", ())
    # Integers with more than 20 distinct values: a continuous target.
    assert from_arrays("r", np.zeros((21, 1)), np.arange(21)).task == "regression"


def test_bad_arrays_are_refused() -> None:
    with pytest.raises(InvalidInput, match="n x d"):
        from_arrays("x", np.zeros(5), np.zeros(5))
    with pytest.raises(InvalidInput, match="finite"):
        from_arrays("x", [[0.0], [np.nan]], [0, 1])
    with pytest.raises(InvalidInput, match="target of 2 values"):
        from_arrays("x", [[0.0], [1.0]], [0, 1, 1])
    with pytest.raises(InvalidInput, match="distinct column names"):
        from_arrays("x", [[0.0, 1.0], [1.0, 0.0]], [0, 1], names=["a", "a"])


def test_files_need_a_target_and_are_read_as_replay_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("a,b,label\n1,2,yes\n3,4,no\n5,6,yes\n")
    d = load(str(path), target="label")
    assert (d.name, d.names, d.classes) == ("t", ("a", "b"), ("no", "yes"))
    np.testing.assert_array_equal(d.X, [[1, 2], [3, 4], [5, 6]])
    with pytest.raises(InvalidInput, match="--target"):
        load(str(path))
    with pytest.raises(InvalidInput, match="unknown target column"):
        load(str(path), target="nope")
    with pytest.raises(InvalidInput, match="neither a built-in data set"):
        load(str(tmp_path / "missing.csv"), target="label")


def test_the_command_line_parser_does_not_import_scikit_learn() -> None:
    """Every ``featurestream`` command builds the parser that lists ``compare``."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from featurestream._entry import build_parser\n"
        "build_parser().parse_args(['compare', 'wine'])\n"
        "print(sorted(m for m in ('sklearn', 'scipy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
