"""The columns /evaluation scores: restored from what OSFS keeps, and states stored
before it kept their scales."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from featurestream import codec
from featurestream.engine.evaluation import StateView, selected_columns
from featurestream.errors import EvaluationUnavailable
from featurestream.selectors.osfs import OSFS, OSFSParams
from tests import support


def _strip(blob: bytes, names: tuple[str, ...]) -> bytes:
    """The same state as stored before the fields ``names`` existed."""
    header, body = codec.decode_header(blob)
    for name in names:
        del header["fields"][name]
    raw = json.dumps(header).encode()
    return struct.pack("<4sHI", codec.MAGIC, codec.FORMAT_VERSION, len(raw)) + raw + blob[body:]


def _view(sel: OSFS) -> StateView:
    return StateView({"kind": "features"}, "i", 1, "osfs", sel.snapshot())


def test_osfs_columns_come_back_as_sent() -> None:
    X, y = support.wdbc()
    sel = OSFS.start(OSFSParams(), y)
    for lo in range(0, 30, 5):
        sel.learn_features([f"x{j}" for j in range(lo, lo + 5)], X[lo : lo + 5])
    names, cols = selected_columns(_view(sel))
    assert names == list(sel.selected()) and names
    expected = X[[int(n[1:]) for n in names]].T
    np.testing.assert_allclose(cols, expected, rtol=1e-12, atol=1e-12 * np.abs(X).max())


def test_members_selected_before_the_scales_were_kept_cannot_be_restored() -> None:
    X, y = support.wdbc()
    sel = OSFS.start(OSFSParams(), y)
    sel.learn_features([f"x{j}" for j in range(10)], X[:10])
    early = set(sel.selected())
    assert early
    blob = codec.encode(sel.name, sel.params.to_dict(), sel.snapshot())
    old = OSFS.resume(sel.params, codec.decode(_strip(blob, ("means", "scales"))).state)
    assert old.state.scales.size == 0
    with pytest.raises(EvaluationUnavailable):
        selected_columns(_view(old))
    old.learn_features([f"x{j}" for j in range(10, 30)], X[10:30])
    sel.learn_features([f"x{j}" for j in range(10, 30)], X[10:30])
    # The same learning; the old members (still selected or not) are marked scale 0.
    assert old.selected() == sel.selected()
    np.testing.assert_array_equal(old.state.columns, sel.state.columns)
    kept = dict(zip(old.selected(), old.state.scales.tolist(), strict=True))
    assert all((scale == 0.0) == (name in early) for name, scale in kept.items())
    if early & set(old.selected()):
        with pytest.raises(EvaluationUnavailable):
            selected_columns(_view(old))
    else:
        assert selected_columns(_view(old))[0] == list(old.selected())
