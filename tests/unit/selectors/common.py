"""Helpers shared by the selector unit tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from featurestream import codec
from featurestream.selectors import REGISTRY


def blob(sel: Any) -> bytes:
    """The selector's complete state, as the store keeps it."""
    return bytes(codec.encode(sel.name, sel.params.to_dict(), sel.snapshot()))


def resumed(raw: bytes) -> Any:
    """The selector a stored state gives back, as the server resumes it."""
    decoded = codec.decode(raw)
    cls = REGISTRY[decoded.selector]
    return cls.resume(cls.params_type.from_stored(decoded.params), decoded.state)


def assert_round_trip_and_replay(
    start: Callable[[], Any], names: Sequence[str], X: np.ndarray, bounds: Sequence[int]
) -> None:
    """Learn X's columns in the batches ``bounds`` delimit; the encoded state decodes,
    resumes to the same bytes, and a fresh replay of the same batches reproduces it."""
    sel = start()
    for a, b in itertools.pairwise(bounds):
        sel.learn_features(names[a:b], X[a:b])
    raw = blob(sel)
    back = codec.decode(raw)
    assert back.selector == sel.name
    cls = REGISTRY[sel.name]
    resumed = cls.resume(cls.params_type(**back.params), back.state)
    assert blob(resumed) == raw
    again = start()
    for a, b in itertools.pairwise(bounds):
        again.learn_features(names[a:b], X[a:b])
    assert blob(again) == raw
