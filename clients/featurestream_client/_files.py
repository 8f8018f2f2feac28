"""Data files of the ``featurestream replay`` command: .csv, .npy and .parquet."""

from __future__ import annotations

import csv
import importlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float64]


class CliError(Exception):
    """A failure explained in one line (bad file, bad option, refused request)."""


def _load_csv(path: Path) -> tuple[list[str], Matrix]:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if not header or not any(cell.strip() for cell in header):
            raise CliError(f"{path}: the file is empty (a header row of column names comes first).")
        names = [cell.strip() for cell in header]
        width = len(names)
        rows: list[list[float]] = []
        for row in reader:
            if not row:  # a blank line
                continue
            line = reader.line_num
            if len(row) != width:
                raise CliError(f"{path}: line {line} has {len(row)} cells; the header has {width}.")
            try:
                rows.append([float(cell) for cell in row])
            except ValueError:
                col = next(i for i, cell in enumerate(row) if not _is_number(cell))
                raise CliError(
                    f"{path}: line {line}, column {names[col]!r}: {row[col]!r} is not a number."
                ) from None
    if not rows:
        raise CliError(f"{path}: no data rows after the header.")
    return names, np.asarray(rows, dtype=np.float64)


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _load_npy(path: Path) -> tuple[list[str], Matrix]:
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise CliError(f"{path}: not a readable .npy array of numbers ({exc}).") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biuf":
        raise CliError(f"{path}: the array must hold numbers; got dtype {arr.dtype}.")
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise CliError(f"{path}: the array must be 2-D (rows x columns); got shape {arr.shape}.")
    # Columns of an .npy file have no names: x0, x1, ... by position in the file.
    return [f"x{i}" for i in range(arr.shape[1])], np.asarray(arr, dtype=np.float64)


def _load_parquet(path: Path) -> tuple[list[str], Matrix]:
    try:
        pq = importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise CliError(
            "reading .parquet files needs pyarrow: pip install pyarrow (or use .csv or .npy)."
        ) from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises its own ArrowInvalid, OSError...
        raise CliError(f"{path}: not a readable parquet file ({exc}).") from None
    names = [str(n) for n in table.column_names]
    columns = []
    for name in names:
        column = table.column(name)
        try:
            values = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)
        except (TypeError, ValueError):
            raise CliError(f"{path}: column {name!r} is not numeric ({column.type}).") from None
        columns.append(values)
    if not columns or table.num_rows == 0:
        raise CliError(f"{path}: no data.")
    return names, np.column_stack(columns)


def load_table(path_text: str) -> tuple[list[str], Matrix]:
    """Column names and the ``(n, p)`` float matrix of a .csv, .npy or .parquet file."""
    path = Path(path_text)
    if not path.is_file():
        raise CliError(f"{path}: no such file.")
    loaders: dict[str, Callable[[Path], tuple[list[str], Matrix]]] = {
        ".csv": _load_csv,
        ".npy": _load_npy,
        ".parquet": _load_parquet,
    }
    loader = loaders.get(path.suffix.lower())
    if loader is None:
        raise CliError(f"{path}: unsupported file type; use .csv, .npy or .parquet.")
    names, data = loader(path)
    if len(set(names)) != len(names):
        dup = next(n for i, n in enumerate(names) if n in names[:i])
        raise CliError(f"{path}: column {dup!r} appears twice.")
    bad = ~np.isfinite(data)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise CliError(
            f"{path}: row {row + 1}, column {names[col]!r}: {data[row, col]} "
            "is not a finite number."
        )
    return names, data


def split_target(
    names: list[str], data: Matrix, target: str | None
) -> tuple[list[str], Matrix, Matrix | None]:
    """Take the target column out: by name, or by position (an integer, negative from the end)."""
    if target is None:
        return names, data, None
    if target in names:
        index = names.index(target)
    else:
        try:
            index = int(target)
        except ValueError:
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            raise CliError(f"unknown target column {target!r}; the columns are {shown}.") from None
        if not -len(names) <= index < len(names):
            raise CliError(f"target column {index} is out of range: the file has {len(names)}.")
        index %= len(names)
    keep = [i for i in range(len(names)) if i != index]
    return [names[i] for i in keep], data[:, keep], data[:, index].copy()


__all__ = ["CliError", "Matrix", "load_table", "split_target"]
