"""The data sets ``featurestream compare`` runs on: built-in ones, CSV files, or arrays.

Built-in (nothing is downloaded; each is a deterministic function of the
installed scikit-learn):

* ``breast_cancer``: ``sklearn.datasets.load_breast_cancer``, 569 x 30, two classes;
* ``wine``: ``load_wine``, 178 x 13, three classes;
* ``digits``: ``load_digits``, 1,797 x 64 (8 x 8 pixel counts), ten classes;
* ``madelon``: shaped like the NIPS 2003 MADELON set, from ``make_classification``
  with a fixed seed: 2,000 x 500, two classes, 5 informative features, 15 linear
  combinations of them, 480 noise features, 16 clusters per class. The 20
  planted columns (``Dataset.planted``) are spread over the column order.

Any other name is read as a data file (.csv, .tsv, .npy, .parquet, as
``featurestream replay`` reads them) whose target column ``target`` names.

The target: class labels (every value integral with at most
:data:`MAX_CLASSES` distinct values, or labels that are not numbers) make a
classification; the classes are coded 0..K-1 in sorted order, for the server
and for the scoring alike. Any other numeric target is continuous (a
regression, scored by R^2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream.errors import InvalidInput

FloatArray = npt.NDArray[np.float64]

BUILTIN = ("breast_cancer", "wine", "digits", "madelon")
# A numeric target with integral values and at most this many distinct ones is a class target.
MAX_CLASSES = 20
MADELON_SEED = 2003
MADELON_SHAPE = (2000, 500)

__all__ = ["BUILTIN", "MAX_CLASSES", "Dataset", "builtin", "from_arrays", "load", "madelon"]


@dataclass(frozen=True)
class Dataset:
    """One data set: the feature matrix, its column names and the target.

    Attributes
    ----------
    name
        Shown in tables and plots.
    X
        n x d feature matrix (float64, finite).
    y
        The target: class codes 0..K-1 (classification) or the values (regression).
    names
        The d column names, in the data set's own order.
    task
        ``"classification"`` or ``"regression"``.
    classes
        The class labels as given, in code order (empty for a regression).
    source
        Where it came from, in words.
    planted
        Names of the columns known to carry the signal (synthetic sets), else empty.
    """

    name: str
    X: FloatArray
    y: FloatArray
    names: tuple[str, ...]
    task: str
    classes: tuple[Any, ...] = ()
    source: str = ""
    planted: tuple[str, ...] = field(default=())

    @property
    def n_instances(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def target_type(self) -> str:
        """The ``target_type`` a stream of this data set is created with."""
        if self.task == "regression":
            return "continuous"
        return "binary" if len(self.classes) == 2 else "multiclass"

    def describe(self) -> str:
        """One line: shape and target."""
        kind = "continuous" if self.task == "regression" else f"{len(self.classes)} classes"
        return f"{self.n_instances} instances x {self.n_features} features, {kind}"


def from_arrays(
    name: str,
    X: npt.ArrayLike,
    y: npt.ArrayLike,
    names: Sequence[str] | None = None,
    *,
    source: str = "arrays",
    planted: Sequence[str] = (),
) -> Dataset:
    """A :class:`Dataset` from a matrix and a target (class labels or numbers).

    Examples
    --------
    >>> X = [[0.0, 1.0], [1.0, 0.0], [0.5, 0.5], [1.0, 1.0]]
    >>> d = from_arrays("toy", X, ["b", "a", "a", "b"])
    >>> d.task, d.classes, d.y.tolist(), d.names
    ('classification', ('a', 'b'), [1.0, 0.0, 0.0, 1.0], ('x0', 'x1'))
    >>> from_arrays("r", [[0.0], [1.0], [2.0]], [0.5, 1.5, 2.25]).task
    'regression'
    """
    a = np.asarray(X, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 2 or a.shape[1] < 1:
        raise InvalidInput(
            f"{name}: expected an n x d matrix with n >= 2 and d >= 1, got shape {a.shape}.",
            field="X",
        )
    if not np.all(np.isfinite(a)):
        raise InvalidInput(f"{name}: the features must be finite numbers.", field="X")
    labels = np.asarray(y)
    if labels.ndim != 1 or labels.shape[0] != a.shape[0]:
        raise InvalidInput(
            f"{name}: expected a target of {a.shape[0]} values, got shape {labels.shape}.",
            field="y",
        )
    column_names = tuple(str(n) for n in names) if names is not None else None
    if column_names is None:
        column_names = tuple(f"x{i}" for i in range(a.shape[1]))
    if len(column_names) != a.shape[1] or len(set(column_names)) != len(column_names):
        raise InvalidInput(
            f"{name}: expected {a.shape[1]} distinct column names, got {len(column_names)}.",
            field="names",
        )
    task, classes, codes = _target(name, labels)
    return Dataset(
        name=name,
        X=a,
        y=codes,
        names=column_names,
        task=task,
        classes=classes,
        source=source,
        planted=tuple(planted),
    )


def _target(name: str, labels: npt.NDArray[Any]) -> tuple[str, tuple[Any, ...], FloatArray]:
    if labels.dtype.kind in "biuf":
        values = labels.astype(np.float64)
        if not np.all(np.isfinite(values)):
            raise InvalidInput(f"{name}: the target must be finite numbers.", field="y")
        distinct = np.unique(values)
        if np.all(values == np.round(values)) and distinct.size <= MAX_CLASSES:
            codes = np.searchsorted(distinct, values).astype(np.float64)
            return "classification", tuple(_plain(v) for v in distinct), codes
        return "regression", (), values
    text = labels.astype(str)
    distinct_text, codes_int = np.unique(text, return_inverse=True)
    return "classification", tuple(str(v) for v in distinct_text), codes_int.astype(np.float64)


def _plain(v: float) -> int | float:
    return int(v) if float(v).is_integer() else float(v)


def madelon(
    n_instances: int = MADELON_SHAPE[0],
    n_features: int = MADELON_SHAPE[1],
    seed: int = MADELON_SEED,
) -> Dataset:
    """The madelon-like set (module docstring): planted columns spread by a seeded permutation.

    Examples
    --------
    >>> d = madelon(200, 40)
    >>> d.X.shape, len(d.planted), d.task, d.classes
    ((200, 40), 20, 'classification', (0, 1))
    >>> bool(np.array_equal(madelon(200, 40).X, d.X))
    True
    """
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=n_instances,
        n_features=n_features,
        n_informative=5,
        n_redundant=15,
        n_repeated=0,
        n_classes=2,
        n_clusters_per_class=16,
        flip_y=0.01,
        class_sep=1.0,
        hypercube=True,
        shuffle=False,
        random_state=seed,
    )
    # make_classification puts the 5 informative and 15 redundant columns first; a stream
    # in that order would hand every selector the signal before the noise.
    order = np.random.default_rng(seed).permutation(n_features)
    names = [f"f{i:03d}" for i in range(n_features)]
    planted = sorted(names[int(np.flatnonzero(order == j)[0])] for j in range(20))
    return from_arrays(
        "madelon",
        X[:, order],
        y,
        names,
        source=f"make_classification, madelon-like, {n_instances} x {n_features}, seed {seed}",
        planted=planted,
    )


def builtin(name: str) -> Dataset:
    """A built-in data set by name (module docstring)."""
    if name == "madelon":
        return madelon()
    from sklearn import datasets

    loaders = {
        "breast_cancer": datasets.load_breast_cancer,
        "wine": datasets.load_wine,
        "digits": datasets.load_digits,
    }
    if name not in loaders:
        raise InvalidInput(
            f"Unknown built-in data set {name!r}; one of {', '.join(BUILTIN)}.", field="data"
        )
    bunch = loaders[name]()
    names = [str(n).replace(" ", "_") for n in bunch.feature_names]
    return from_arrays(name, bunch.data, bunch.target, names, source=f"sklearn.datasets {name}")


def load(spec: str, *, target: str | None = None, drop: Sequence[str] = ()) -> Dataset:
    """A built-in name, or a data file whose target column is ``target``."""
    if spec in BUILTIN:
        return builtin(spec)
    from pathlib import Path

    from featurestream_client._files import CliError, load_table

    path = Path(spec)
    if not path.is_file():
        raise InvalidInput(
            f"{spec!r} is neither a built-in data set ({', '.join(BUILTIN)}) nor a file.",
            field="data",
        )
    if target is None:
        raise InvalidInput(f"{spec}: name its target column with --target COL.", field="target")
    try:
        table = load_table(spec, target=target, drop=drop)
    except CliError as exc:
        raise InvalidInput(str(exc), field="data") from None
    return from_arrays(path.stem, table.data, table.target, table.names, source=str(path))
