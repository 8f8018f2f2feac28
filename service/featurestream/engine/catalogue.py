"""What the engine knows of the algorithms: the catalogue, and input checks common to them."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from featurestream.engine.results import AlgorithmInfo
from featurestream.errors import InvalidInput
from featurestream.selectors import REGISTRY, FeatureSelector, InstanceSelector, Params, Selector
from featurestream.selectors.targets import check_target_type, refuse_multiclass, resolve_target


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
        # The score kinds of the default parameters (those without a default do not
        # decide them: give the fields that need a value any valid one).
        params = ptype.from_mapping(cls.test_params()[0])
        score = cls.score_kind(params)
        decision = cls.decision_score_kind(params)
        by = None
        if cls.score_by is not None:
            by = {cls.score_by[0]: {value: k.kind for value, k in cls.score_by[1].items()}}
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
                score_kind=score.kind,
                higher_is_better=score.higher_is_better,
                score_by_magnitude=score.by_magnitude,
                score_kind_by=by,
                decision_score_kind=None if decision is None else decision.kind,
                decision_higher_is_better=None if decision is None else decision.higher_is_better,
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


def resolve(algorithm: str, params: Mapping[str, Any] | None) -> tuple[type[Selector], Params]:  # type: ignore[type-arg]
    """The selector class of ``algorithm`` and its checked parameters."""
    cls = REGISTRY.get(algorithm)
    if cls is None:
        close = closest(algorithm, sorted(REGISTRY))
        hint = f" Did you mean {' or '.join(repr(n) for n in close)}?" if close else ""
        raise InvalidInput(
            f"Unknown algorithm {algorithm!r}.{hint} Expected one of {sorted(REGISTRY)}.",
            field="algorithm",
        )
    return cls, cls.params_type.from_mapping(params)


def closest(name: str, known: Sequence[str], n: int = 3) -> list[str]:
    """The known names nearest to ``name`` (case and ``-`` ignored), best first.

    >>> closest("SAOLA", ["osfs", "saola", "group_saola"])
    ['saola', 'group_saola']
    >>> closest("fast-osfs", ["fast_osfs", "osfs"])
    ['fast_osfs', 'osfs']
    """
    norm = {k.lower().replace("-", "_"): k for k in known}
    key = name.lower().replace("-", "_").strip()
    found = difflib.get_close_matches(key, list(norm), n=n, cutoff=0.6)
    return [norm[f] for f in found]


def starter(
    cls: type[Selector],  # type: ignore[type-arg]
    resolved: Params,
    target: Sequence[float | str] | None,
    feature_names: Sequence[str] | None,
    *,
    max_name_length: int,
    target_type: str = "auto",
) -> tuple[Callable[[], Selector], dict[str, Any]]:  # type: ignore[type-arg]
    """Check a create request's target or feature names against the algorithm's kind.

    Returns how to start the selector (to call in a worker thread) and what the
    stream resource shows of its size (``n_instances``, or ``n_features`` and the
    ``feature_names`` of an instance stream) and target (``target_type``, and
    ``classes`` for class targets; docs/algorithms.md, "Targets").
    """
    algorithm = cls.name
    check_target_type(target_type)
    if issubclass(cls, FeatureSelector):
        if target is None:
            raise InvalidInput(f"{algorithm} streams need a target.", field="target")
        if feature_names is not None:
            raise InvalidInput(
                f"{algorithm} is a feature-stream algorithm; feature_names is for "
                "instance streams.",
                field="feature_names",
            )
        t = resolve_target(target, target_type)
        if t.n_classes and not cls.accepts_multiclass:
            refuse_multiclass(algorithm, len(t.classes))
        shown: dict[str, Any] = {"n_instances": int(t.y.shape[0]), "target_type": t.target_type}
        if t.target_type != "continuous":
            shown["classes"] = list(t.classes)
        return partial(cls.start, resolved, t.y, t.n_classes), shown
    assert issubclass(cls, InstanceSelector)
    if feature_names is None:
        raise InvalidInput(f"{algorithm} streams need feature_names.", field="feature_names")
    if target is not None:
        raise InvalidInput(
            f"{algorithm} is an instance-stream algorithm; it takes no target.", field="target"
        )
    check_names(feature_names, field="feature_names", max_length=max_name_length)
    names = list(feature_names)
    shown = {"n_features": len(names), "feature_names": names}
    if not supervised(algorithm):
        if target_type != "auto":
            raise InvalidInput(
                f"{algorithm} is unsupervised: its instances carry no labels, so it takes "
                "no target_type.",
                field="target_type",
            )
        return partial(cls.start, resolved, names), shown
    if target_type == "multiclass" and not cls.accepts_multiclass:
        refuse_multiclass(algorithm, None, field="target_type")
    start = partial(cls.start, resolved, names, target_type=target_type)
    return start, {**shown, "target_type": target_type}


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


def warm_kernels() -> None:
    """Load the selectors' compiled kernels (OFS) for every kind of batch; see
    :func:`featurestream.selectors.ofs.warm_kernels`."""
    from featurestream.selectors.ofs import warm_kernels as warm_ofs

    warm_ofs()


__all__ = [
    "algorithms",
    "check_names",
    "supervised",
    "warm_kernels",
]
