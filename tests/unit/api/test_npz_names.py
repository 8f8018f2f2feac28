"""Feature columns as .npz bodies, with their names inside the archive (``names.npy``)."""

from __future__ import annotations

import io
import pickle
import zipfile
from typing import Any

import numpy as np
import pytest
import scipy.sparse

from featurestream.api.arrays import Bounds
from featurestream.api.npz import NAMES_MEMBER, load_npz_columns, npz_names
from featurestream.errors import InvalidInput

LIMIT = Bounds(1 << 26)
M = scipy.sparse.csc_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]))  # n = 2, b = 3


def npz(names: Any = None, raw: bytes | None = None) -> bytes:
    """``save_npz`` of M, with a ``names.npy`` member (an array, or raw bytes) when given."""
    buf = io.BytesIO()
    scipy.sparse.save_npz(buf, M, compressed=False)
    if names is not None or raw is not None:
        if raw is None:
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asarray(names), allow_pickle=True)
            raw = member.getvalue()
        with zipfile.ZipFile(buf, "a") as zf:
            zf.writestr(NAMES_MEMBER, raw)
    return buf.getvalue()


def test_names_inside_the_archive_name_the_columns() -> None:
    names = ["a,b", "größe", " spaced "]
    X, got = load_npz_columns(npz(np.array(names)), LIMIT)
    assert got == names
    assert X.shape == (3, 2)  # feature-major
    assert np.array_equal(X.toarray(), M.toarray().T)


def test_without_the_member_the_header_names_stand() -> None:
    X, got = load_npz_columns(npz(), LIMIT, ["x", "y", "z"])
    assert got == ["x", "y", "z"] and X.shape == (3, 2)
    assert load_npz_columns(npz(), LIMIT)[1] is None
    assert npz_names(npz(), 3) is None


def test_the_header_and_the_member_must_agree() -> None:
    body = npz(np.array(["x", "y", "z"]))
    assert load_npz_columns(body, LIMIT, ["x", "y", "z"])[1] == ["x", "y", "z"]
    with pytest.raises(InvalidInput, match="differently") as err:
        load_npz_columns(body, LIMIT, ["x", "y", "w"])
    assert err.value.field == "X-Feature-Names"


@pytest.mark.parametrize("names", [["x", "y"], ["w", "x", "y", "z"], [["x", "y", "z"]]])
def test_one_name_per_column_in_one_dimension(names: list[Any]) -> None:
    with pytest.raises(InvalidInput, match="1-D with one name per column"):
        load_npz_columns(npz(np.array(names)), LIMIT)


def test_object_arrays_are_never_unpickled() -> None:
    obj = np.array(["x", "y", "z"], dtype=object)
    with pytest.raises(InvalidInput, match="object arrays are refused"):
        load_npz_columns(npz(obj), LIMIT)
    # A member that is a plain pickle (not .npy) is refused unread as well.
    with pytest.raises(InvalidInput, match=r"readable \.npy"):
        load_npz_columns(npz(raw=pickle.dumps(["x", "y", "z"])), LIMIT)


@pytest.mark.parametrize(
    "names", [np.array([b"x", b"y", b"z"]), np.array([1, 2, 3]), np.array([1.0, 2.0, 3.0])]
)
def test_names_must_be_str(names: np.ndarray) -> None:
    with pytest.raises(InvalidInput, match="must hold str"):
        load_npz_columns(npz(names), LIMIT)


def test_the_expanded_size_counts_the_member_too() -> None:
    body = npz(np.array(["n" * 10_000, "y", "z"]))
    with pytest.raises(Exception, match="uncompressed"):
        load_npz_columns(body, Bounds(20_000))
