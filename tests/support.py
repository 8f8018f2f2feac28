"""Helpers shared by the tests (not fixtures): test data and small builders."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).parent / "data"


@cache
def expected() -> dict[str, Any]:
    return dict(json.loads((DATA / "expected.json").read_text()))


@cache
def _load(name: str) -> np.ndarray:
    return np.loadtxt(DATA / name, delimiter=",", skiprows=1)


def wdbc() -> tuple[np.ndarray, np.ndarray]:
    """(X feature-major (30, 569), y) of the public feature-stream vector."""
    D = _load("wdbc.csv")
    return np.ascontiguousarray(D[:, :-1].T), D[:, -1].copy()


def discrete() -> tuple[np.ndarray, np.ndarray]:
    """(X feature-major (30, 800) integer codes, y) of the public discrete vector."""
    D = _load("discrete.csv")
    return np.ascontiguousarray(D[:, :-1].T), D[:, -1].copy()


def instances() -> tuple[np.ndarray, np.ndarray]:
    """(X (2000, 100), y) of the public instance-stream vector."""
    D = _load("instances.csv")
    return np.ascontiguousarray(D[:, :-1]), D[:, -1].copy()


def names(count: int, prefix: str = "f") -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]
