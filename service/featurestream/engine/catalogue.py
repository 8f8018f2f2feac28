"""What the engine knows of the algorithms: the catalogue, and input checks common to them."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Sequence

from featurestream.engine.results import AlgorithmInfo
from featurestream.errors import InvalidInput
from featurestream.selectors import REGISTRY


def algorithms() -> list[AlgorithmInfo]:
    """Every algorithm a stream can be created with, by name."""
    out = []
    for name, cls in sorted(REGISTRY.items()):
        ptype = cls.params_type
        doc = inspect.getdoc(cls) or ""
        defaults = {
            f.name: f.default
            for f in dataclasses.fields(ptype)
            if f.default is not dataclasses.MISSING
        }
        out.append(
            AlgorithmInfo(
                name=name,
                kind=cls.kind,
                title=ptype.algorithm,
                summary=doc.split("\n\n", 1)[0].replace("\n", " "),
                params_schema=ptype.json_schema(),
                defaults=defaults,
                supports_groups=bool(getattr(cls, "uses_groups", False)),
                supervised=supervised(name),
            )
        )
    return out


def supervised(algorithm: str) -> bool:
    """Whether the algorithm's streams learn from labels.

    Instance streams of a supervised algorithm carry labels (the last column);
    feature streams always do, as the target given at creation.
    """
    cls = REGISTRY.get(algorithm)
    if cls is None or cls.kind == "features":
        return True
    return bool(getattr(cls, "supervised", True))


def check_names(names: Sequence[str], *, field: str, max_length: int) -> None:
    """Feature names are non-empty printable strings, at most ``max_length``, no repeats."""
    for i, name in enumerate(names):
        if (
            not isinstance(name, str)
            or not name
            or len(name) > max_length
            or not name.isprintable()
        ):
            raise InvalidInput(
                f"Feature names must be non-empty printable strings of at most "
                f"{max_length} characters; item {i} is {str(name)[:40]!r}.",
                field=f"{field}[{i}]",
            )
    if len(set(names)) != len(names):
        seen: set[str] = set()
        dup = next(n for n in names if n in seen or seen.add(n))  # type: ignore[func-returns-value]
        raise InvalidInput(f"Feature name {dup!r} appears twice in the request.", field=field)


__all__ = ["algorithms", "check_names", "supervised"]
