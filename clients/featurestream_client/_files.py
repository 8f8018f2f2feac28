"""Data files of the ``featurestream replay`` command: .csv, .npy and .parquet."""

from __future__ import annotations

import csv
import importlib
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float64]


class CliError(Exception):
    """A failure explained in one line (bad file, bad option, refused request)."""


class Table:
    """A data file read: column names, feature values, and the target column as read."""

    def __init__(self, names: list[str], data: Matrix, target: Any = None) -> None:
        self.names = names
        self.data = data
        #: The target column: float64 when every cell is a number, else the cells as str.
        self.target = target


def _read_csv_cells(path: Path, delimiter: str, encoding: str) -> tuple[list[str], list[list[str]]]:
    try:
        return _cells(path, delimiter, encoding)
    except UnicodeDecodeError as exc:
        raise CliError(
            f"{path}: byte 0x{exc.object[exc.start]:02x} at offset {exc.start} is not "
            f"{exc.encoding} text; give the file's encoding with --encoding (e.g. latin-1)."
        ) from None
    except LookupError:
        raise CliError(f"--encoding {encoding!r} is not an encoding Python knows.") from None
    except csv.Error as exc:
        # A cell longer than the csv module takes, a quote left open...: no number anyway.
        raise CliError(f"{path}: not a readable .csv file ({exc}).") from None


def _cells(path: Path, delimiter: str, encoding: str) -> tuple[list[str], list[list[str]]]:
    # "utf-8" reads a byte-order mark as part of the first name: it is skipped.
    codec = "utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") else encoding
    with path.open(newline="", encoding=codec) as fh:
        reader = csv.reader(fh, delimiter=delimiter)
        header = next(reader, None)
        if not header or not any(cell.strip() for cell in header):
            raise CliError(f"{path}: the file is empty (a header row of column names comes first).")
        names = [cell.strip() for cell in header]
        width = len(names)
        rows: list[list[str]] = []
        for row in reader:
            if not row:  # a blank line
                continue
            if len(row) != width:
                hint = ""
                if width == 1 and delimiter == ",":
                    hint = " (one column in the header: is the delimiter ';' or a tab? --delimiter)"
                raise CliError(
                    f"{path}: line {reader.line_num} has {len(row)} cells; the header has "
                    f"{width}{hint}."
                )
            rows.append([cell.strip() for cell in row])
    if not rows:
        raise CliError(f"{path}: no data rows after the header.")
    return names, rows


def _load_csv(
    path: Path, delimiter: str, drop: Sequence[str], target: str | None, encoding: str
) -> Table:
    names, rows = _read_csv_cells(path, delimiter, encoding)
    _check_unique(path, names)
    gone = set(_column_index(names, d, "--drop") for d in drop)
    t_index = None if target is None else _column_index(names, target, "--target")
    if t_index is not None and t_index in gone:
        raise CliError(f"column {names[t_index]!r} is both dropped and the target.")
    keep = [i for i in range(len(names)) if i not in gone and i != t_index]
    values = np.empty((len(rows), len(keep)), dtype=np.float64)
    for r, row in enumerate(rows):
        for c, i in enumerate(keep):
            values[r, c] = _number(path, row[i], r, names[i], labels_given=target is not None)
    labels = None
    if t_index is not None:
        cells = [row[t_index] for row in rows]
        for r, cell in enumerate(cells):
            if not cell:
                raise CliError(
                    f"{path}: line {r + 2}, target column {names[t_index]!r} is empty (data "
                    f"row {r + 1}): every row needs a label; drop the unlabelled rows first."
                )
        if all(_is_number(cell) for cell in cells):
            labels = np.array([float(cell) for cell in cells], dtype=np.float64)
        else:
            labels = np.array(cells, dtype=str)
    return Table([names[i] for i in keep], values, labels)


def _number(path: Path, cell: str, r: int, name: str, *, labels_given: bool = True) -> float:
    """The number in data row ``r`` (0-based; line ``r + 2`` of the file) of column ``name``.

    Without a target column, a column of words may be the labels: the message says so.
    """
    where = f"{path}: line {r + 2}, column {name!r}"
    if not cell:
        raise CliError(
            f"{where} is empty (data row {r + 1}). Impute the missing values first (e.g. the "
            f"column's mean or median, or a constant), or leave the column out with "
            f"--drop {name}."
        )
    try:
        value = float(cell)
    except ValueError:
        label_hint = "" if labels_given else f"; if it holds the labels, give --target {name}"
        raise CliError(
            f"{where}: {cell!r} is not a number (leave the column out with --drop {name}, or "
            f"encode it as numbers{label_hint})."
        ) from None
    if not math.isfinite(value):
        raise CliError(
            f"{path}: row {r + 1}, column {name!r}: {value} is not a finite number. Impute "
            f"the missing values first, or leave the column out with --drop {name}."
        )
    return value


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


def _check_unique(path: Path, names: list[str]) -> None:
    if len(set(names)) != len(names):
        dup = next(n for i, n in enumerate(names) if n in names[:i])
        raise CliError(f"{path}: column {dup!r} appears twice.")


def _column_index(names: list[str], column: str, option: str) -> int:
    """A column by name, or by position (an integer, negative from the end)."""
    if column in names:
        return names.index(column)
    try:
        index = int(column)
    except ValueError:
        shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        what = "target column" if option == "--target" else f"column {option}"
        raise CliError(f"unknown {what} {column!r}; the columns are {shown}.") from None
    if not -len(names) <= index < len(names):
        raise CliError(f"{option} column {index} is out of range: the file has {len(names)}.")
    return index % len(names)


def load_table(
    path_text: str,
    *,
    target: str | None = None,
    drop: Sequence[str] = (),
    delimiter: str = ",",
    encoding: str = "utf-8",
) -> Table:
    """Read a .csv, .npy or .parquet file: its feature columns and its target column.

    ``drop`` leaves columns out (ids...); the target column of a .csv file may
    hold class labels that are not numbers (kept as strings). ``encoding`` is
    that of a .csv file's text.
    """
    path = Path(path_text)
    if not path.is_file():
        raise CliError(f"{path}: no such file.")
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        sep = {"\\t": "\t", "tab": "\t"}.get(delimiter, delimiter)
        if suffix == ".tsv" and delimiter == ",":
            sep = "\t"
        if len(sep) != 1:
            raise CliError(f"--delimiter must be one character; got {delimiter!r}.")
        return _load_csv(path, sep, drop, target, encoding)
    loaders: dict[str, Callable[[Path], tuple[list[str], Matrix]]] = {
        ".npy": _load_npy,
        ".parquet": _load_parquet,
    }
    loader = loaders.get(suffix)
    if loader is None:
        raise CliError(f"{path}: unsupported file type; use .csv, .npy or .parquet.")
    names, data = loader(path)
    _check_unique(path, names)
    bad = ~np.isfinite(data)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise CliError(
            f"{path}: row {row + 1}, column {names[col]!r}: {data[row, col]} is not a finite "
            "number (impute missing values first, or --drop the column)."
        )
    gone = {_column_index(names, d, "--drop") for d in drop}
    keep = [i for i in range(len(names)) if i not in gone]
    names, data = [names[i] for i in keep], data[:, keep]
    feature_names, matrix, y = split_target(names, data, target)
    return Table(feature_names, matrix, y)


def split_target(
    names: list[str], data: Matrix, target: str | None
) -> tuple[list[str], Matrix, Matrix | None]:
    """Take the target column out: by name, or by position (an integer, negative from the end)."""
    if target is None:
        return names, data, None
    index = _column_index(names, target, "--target")
    keep = [i for i in range(len(names)) if i != index]
    return [names[i] for i in keep], data[:, keep], data[:, index].copy()


__all__ = ["CliError", "Matrix", "Table", "load_table", "split_target"]
