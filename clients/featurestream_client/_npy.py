"""The binary bodies: ``.npy`` of float64 rows or columns, ``.npz`` of sparse ones."""

from __future__ import annotations

import functools
import io
import zipfile
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

NPY = "application/x-npy"
NPZ = "application/x-npz"


def npy_frame(X: npt.NDArray[Any], labels: npt.NDArray[Any] | None = None) -> bytearray:
    """The ``.npy`` of the float64 rows of X, with ``labels`` as a last column if given.

    The values are written once, straight into the bytes that are sent (a
    WebSocket frame takes them as they are), instead of being stacked, made
    contiguous and serialised, a copy each. The bytes are those ``np.save``
    writes for the stacked array:

    >>> X, y = np.arange(6.0).reshape(3, 2), np.array([1.0, 0.0, 1.0])
    >>> buf = io.BytesIO(); np.save(buf, np.column_stack([X, y]))
    >>> bytes(npy_frame(X, y)) == buf.getvalue()
    True
    """
    m, d = X.shape
    cols = d if labels is None else d + 1
    header = _npy_header(m, cols)
    out = bytearray(len(header) + 8 * m * cols)
    out[: len(header)] = header
    values = np.frombuffer(out, dtype="<f8", offset=len(header)).reshape(m, cols)
    values[:, :d] = X
    if labels is not None:
        values[:, d] = labels
    return out


@functools.lru_cache(maxsize=64)
def _npy_header(m: int, cols: int) -> bytes:
    """The version 1.0 ``.npy`` header of a C-order (m, cols) float64 array."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f8", "fortran_order": False, "shape": (m, cols)}
    )
    return buf.getvalue()


def npy_bytes(arr: npt.NDArray[Any]) -> bytes:
    """The ``.npy`` of a 2-D array as float64, for a request body (httpx wants bytes)."""
    return bytes(npy_frame(arr))


def npz_bytes(csc: Any, names: Sequence[str] | None = None) -> bytes:
    """``scipy.sparse.save_npz`` of ``csc`` (uncompressed), with ``names.npy`` when named."""
    import scipy.sparse

    buf = io.BytesIO()
    # Uncompressed: zlib costs more time than the bytes it saves are worth.
    scipy.sparse.save_npz(buf, csc, compressed=False)
    if names is not None:
        member = io.BytesIO()
        np.lib.format.write_array(member, np.array(names, dtype=str), allow_pickle=False)
        with zipfile.ZipFile(buf, "a") as zf:
            zf.writestr(NAMES_MEMBER, member.getvalue())
    return buf.getvalue()


#: The member of an .npz body of feature columns that holds their names.
NAMES_MEMBER = "names.npy"


__all__ = ["NAMES_MEMBER", "NPY", "NPZ", "npy_bytes", "npy_frame", "npz_bytes"]
