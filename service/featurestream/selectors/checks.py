"""Input checks shared by the selectors: targets, batches, codes and labels.

Every check raises InvalidInput naming the offending request field, and runs
before a selector changes anything, so a batch is applied all or nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream.errors import InvalidInput
from featurestream.stats.finite import all_finite
from featurestream.stats.sparse import canonical_csr, is_sparse

FloatArray = npt.NDArray[np.float64]

# Largest number of levels of discrete data (codes 0..MAX_LEVELS-1); see check_codes.
MAX_LEVELS = 1024


def check_codes(A: Any, *, field: str, names: Sequence[str] | None = None) -> None:
    """Discrete data must hold integer codes 0..L-1 (docs/algorithms.md, "Discrete tests").

    ``A`` holds one column per row (a CSR matrix: its stored values are checked);
    with ``names``, the error names the first offending column and points at it.
    L is capped at MAX_LEVELS: the tests build count tables of L_a x L_b cells per
    stratum, so one stray large code would otherwise allocate gigabytes, and a
    G2/chi2 test with that many degrees of freedom is never reliable anyway.
    """
    values = np.asarray(A.data if is_sparse(A) else A, dtype=np.float64)
    if not values.size:
        return
    bad = (values < 0) | (np.floor(values) != values) | (values >= MAX_LEVELS)
    if not bad.any():
        return
    flat = int(np.argmax(bad.reshape(-1)))
    v = float(values.reshape(-1)[flat])
    where, what = field, "Discrete tests need"
    if names is not None:
        row = (
            int(np.searchsorted(A.indptr, flat, side="right")) - 1
            if is_sparse(A)
            else flat // values.shape[1]
        )
        where, what = f"{field}[{row}].values", f"Column {names[row]!r}: discrete tests need"
    if v >= 0 and v == np.floor(v):
        raise InvalidInput(
            f"{what} at most {MAX_LEVELS} levels (codes 0..{MAX_LEVELS - 1}); got a code of {v:g}.",
            field=where,
        )
    raise InvalidInput(f"{what} non-negative integer codes 0..L-1; got {v:g}.", field=where)


def binary_labels(y: npt.ArrayLike, *, field: str = "y") -> FloatArray:
    """Map labels in {0, 1} or {-1, +1} to {-1, +1}; anything else is an error."""
    arr = np.asarray(y, dtype=np.float64)
    ok = (arr == 0) | (arr == 1) | (arr == -1)
    if not ok.all() or ((arr == 0).any() and (arr == -1).any()):
        raise InvalidInput("Labels must be in {0, 1} or {-1, +1}.", field=field)
    return np.where(arr == 0, -1.0, arr)


def target_vector(y: npt.ArrayLike) -> FloatArray:
    """A feature stream's target as a float64 copy: non-empty, 1-D and finite."""
    y_arr = np.array(y, dtype=np.float64)
    if y_arr.ndim != 1 or y_arr.shape[0] < 1:
        raise InvalidInput("The target must be a non-empty 1-D array.", field="target")
    if not np.isfinite(y_arr).all():
        raise InvalidInput("The target contains NaN or infinite values.", field="target")
    return y_arr


def feature_batch(
    names: Sequence[str],
    X: npt.ArrayLike,
    n: int,
    groups: Sequence[str | None] | None,
) -> tuple[Any, Any, bool]:
    """Check b arriving columns over n instances; returns ``(A, values, sparse)``.

    ``A`` is the batch as a (b, n) float64 array, or as a CSR matrix when it came
    sparse; ``values`` holds its stored numbers (the non-zeros of a sparse batch).
    """
    sparse = is_sparse(X)
    A: Any
    if sparse:
        A = X.tocsr()  # type: ignore[union-attr]
        values = np.asarray(A.data, dtype=np.float64)
    else:
        # "+ 0.0" turns -0.0 into 0.0 (and copies): a column's state must not
        # depend on whether a zero arrived signed, or sparse (where it is absent).
        A = np.ascontiguousarray(np.asarray(X, dtype=np.float64)) + 0.0
        if A.ndim == 1:
            A = A[None, :]
        values = A
    if A.ndim != 2 or A.shape[0] != len(names):
        raise InvalidInput(
            f"Expected {len(names)} columns, got an array of shape {A.shape}.",
            field="features",
        )
    if A.shape[1] != n:
        raise InvalidInput(
            f"Each column must have {n} values (the target's length); got {A.shape[1]}.",
            field="features",
        )
    if len(set(names)) != len(names):
        raise InvalidInput("Feature names within a request must be unique.", field="features")
    if not all_finite(values):
        if sparse:
            raise InvalidInput("A column contains NaN or infinite values.", field="features")
        bad = int(np.argmax(~np.isfinite(A).all(axis=1)))
        raise InvalidInput(
            f"Column {names[bad]!r} contains NaN or infinite values.",
            field=f"features[{bad}].values",
        )
    if groups is not None and len(groups) != len(names):
        raise InvalidInput("One group entry per feature is required.", field="groups")
    return A, values, sparse


def feature_names_tuple(feature_names: Sequence[str]) -> tuple[str, ...]:
    """An instance stream's feature names: non-empty and unique."""
    names = tuple(feature_names)
    if not names:
        raise InvalidInput("feature_names must not be empty.", field="feature_names")
    if len(set(names)) != len(names):
        raise InvalidInput("feature_names must be unique.", field="feature_names")
    return names


def instance_batch(X: npt.ArrayLike, d: int) -> tuple[Any, bool]:
    """Check a batch of m instances over d features; returns ``(A, sparse)``.

    ``A`` is an (m, d) float64 array, or a canonical CSR matrix when it came sparse.
    """
    sparse = is_sparse(X)
    A: Any
    if sparse:
        A = canonical_csr(X)
        values = A.data
    else:
        A = np.asarray(X, dtype=np.float64)
        if A.ndim == 1:
            A = A[None, :]
        values = A
    if A.ndim != 2 or A.shape[1] != d:
        raise InvalidInput(
            f"Each instance must have {d} values; got an array of shape {A.shape}.",
            field="X",
        )
    if not all_finite(values):
        raise InvalidInput("X contains NaN or infinite values.", field="X")
    return A, sparse


def instance_labels(y: npt.ArrayLike, m: int) -> FloatArray:
    """The labels of a batch of m instances: one finite number each."""
    try:
        y_arr = np.asarray(y, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidInput(
            "Labels must be numbers: this stream was created before target types.", field="y"
        ) from None
    if y_arr.shape[0] != m:
        raise InvalidInput(f"Expected {m} labels, got {y_arr.shape[0]}.", field="y")
    if not np.isfinite(y_arr).all():
        raise InvalidInput("y contains NaN or infinite values.", field="y")
    return y_arr


__all__ = [
    "MAX_LEVELS",
    "binary_labels",
    "check_codes",
    "feature_batch",
    "feature_names_tuple",
    "instance_batch",
    "instance_labels",
    "target_vector",
]
