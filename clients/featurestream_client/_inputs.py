"""Reading what users send: arrays, DataFrames, sparse matrices, checked on the client.

Values must be numbers and finite; a DataFrame's columns are matched to a
stream's features by name; rows in shapes people often send by habit (a dict,
a Series) are refused with what to send instead. Bad input fails here and
changes nothing on the server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from featurestream_client.errors import InvalidInput

Matrix = npt.NDArray[np.float64]


def is_pandas(obj: Any) -> bool:
    return type(obj).__module__.split(".", 1)[0] == "pandas"


def is_sparse(obj: Any) -> bool:
    return (
        type(obj).__module__.split(".", 1)[0] == "scipy"
        and hasattr(obj, "tocsc")
        and hasattr(obj, "nnz")
    )


# Below this many values the plain check is as fast as any.
_SMALL = 4096


def _all_finite(values: Matrix) -> bool:
    """Whether every value is finite, for a large float64 array in one pass.

    A NaN or an infinity makes every sum it enters NaN or infinite, so finite
    row sums (one BLAS pass) prove the whole array finite without the mask as
    large as the array that ``np.isfinite`` writes; only when a sum overflows
    (finite values near the float64 limit) is every value checked. The server
    checks what it receives the same way; the SDK keeps its own copy because
    it installs without the server.

    >>> _all_finite(np.full((100, 100), 1e308)), _all_finite(np.array([1.0, np.nan] * 4096))
    (True, False)
    """
    a = np.asarray(values)
    if a.dtype != np.float64 or a.size < _SMALL or a.ndim not in (1, 2):
        return bool(np.isfinite(a).all())
    with np.errstate(over="ignore", invalid="ignore"):
        sums = a @ np.ones(a.shape[1]) if a.ndim == 2 else np.add.reduce(a)
    return bool(np.isfinite(sums).all()) or bool(np.isfinite(a).all())


def finite_or_raise(values: Matrix, names: Sequence[str] | None, what: str) -> None:
    if values.size and not _all_finite(values):
        axis_bad = ~np.isfinite(values)
        if values.ndim == 2:
            col = int(np.argmax(axis_bad.any(axis=0)))
            label = names[col] if names is not None and col < len(names) else f"#{col}"
            raise InvalidInput(f"{what} {label!r} contains NaN or infinite values.")
        raise InvalidInput(f"{what} contains NaN or infinite values.")


def float_matrix(obj: Any, what: str) -> Matrix:
    try:
        arr = np.asarray(obj)
    except Exception as exc:  # ragged nested lists and the like
        raise InvalidInput(f"{what} is not a rectangular array of numbers: {exc}") from None
    if arr.dtype.kind == "b":
        arr = arr.astype(np.float64)
    if arr.dtype.kind not in "fiu":
        raise InvalidInput(f"{what} must hold numbers; got dtype {arr.dtype}.")
    return np.asarray(arr, dtype=np.float64)


def is_frame(obj: Any) -> bool:
    return is_pandas(obj) and hasattr(obj, "columns")


def align_frame(frame: Any, expected: Sequence[str], stream_id: str) -> Any:
    """The columns of DataFrame ``frame`` in the order of ``expected`` (a stream's names).

    Columns are matched by name, never by position. Unknown or missing names
    are refused with the list of each, the way scikit-learn refuses them.
    """
    have = [str(c) for c in frame.columns]
    if have == list(expected):
        return frame
    known = set(expected)
    given = set(have)
    unseen = [c for c in have if c not in known]
    missing = [c for c in expected if c not in given]
    if len(given) != len(have):
        twice = sorted({c for c in have if have.count(c) > 1})
        raise InvalidInput(f"The DataFrame's columns {twice} appear more than once.")
    if unseen or missing:
        lines = [f"The DataFrame's column names do not match the features of stream {stream_id!r}."]
        if unseen:
            lines.append(f"Feature names unseen at creation: {_listing(unseen)}")
        if missing:
            lines.append(f"Feature names seen at creation, yet now missing: {_listing(missing)}")
        lines.append(
            "Rename or select the columns (df[names]); an array (df.to_numpy()) is matched "
            "by position instead."
        )
        raise InvalidInput("\n".join(lines))
    by_name = dict(zip(have, frame.columns, strict=True))
    return frame[[by_name[name] for name in expected]]


def _listing(names: Sequence[str], most: int = 20) -> str:
    shown = ", ".join(repr(n) for n in names[:most])
    return shown + (f", ... ({len(names) - most} more)" if len(names) > most else "")


def refuse_row_shapes(X: Any) -> None:
    """Refuse, with what to send instead, the rows people often pass by habit."""
    if isinstance(X, Mapping):
        raise InvalidInput(
            "X is a dict (one row as {name: value}, River-style). Send rows as a pandas "
            "DataFrame (pd.DataFrame([row]); its columns are matched to the stream's "
            "features by name) or as a list of rows in the stream's feature order "
            "([[row[name] for name in names]])."
        )
    if is_pandas(X) and not hasattr(X, "columns") and hasattr(X, "index"):
        raise InvalidInput(
            "X is a pandas Series. If it is one row (e.g. df.iloc[i]), send "
            "series.to_frame().T (a one-row DataFrame, matched by name) or df.iloc[[i]]; "
            "a Series is never read as a row, nor as a column of instances."
        )
    if isinstance(X, list | tuple) and X and isinstance(X[0], Mapping):
        raise InvalidInput(
            "X is a list of dicts (rows as {name: value}). Send pd.DataFrame(rows): its "
            "columns are matched to the stream's features by name."
        )


def frame_matrix(frame: Any, what: str) -> tuple[Matrix, list[str]]:
    """A pandas DataFrame (or Series) as a float64 matrix and its column names."""
    if not hasattr(frame, "columns"):  # a Series: one column
        frame = frame.to_frame()
    names = [str(c) for c in frame.columns]
    for col, dtype in zip(names, frame.dtypes, strict=True):
        kind = getattr(dtype, "kind", "O")
        if kind not in "fiub":
            raise InvalidInput(f"{what} column {col!r} is not numeric (dtype {dtype}).")
    try:
        values = frame.to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{what} cannot be read as numbers: {exc}") from None
    return np.asarray(values, dtype=np.float64), names


__all__ = [
    "Matrix",
    "align_frame",
    "finite_or_raise",
    "float_matrix",
    "frame_matrix",
    "is_frame",
    "is_pandas",
    "is_sparse",
    "refuse_row_shapes",
]
