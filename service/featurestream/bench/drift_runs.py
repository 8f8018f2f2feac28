"""The configurations ``featurestream bench drift`` runs, and one run through the service.

A configuration is a selector with its parameters on one kind of target:
``kbest``, ``fires`` (binary and 3-class), ``ofs`` (binary: it is a binary
classifier) and ``fsds`` (unsupervised), each selecting ``num_features`` = 5
(the size of the truth), once as documented by default (no forgetting),
once with a ``half_life`` and, unless the detector is ``none``, once with a
drift watch that resets the selector (``drift``, ``on_drift: "reset"``, no
``half_life``). A run streams one generated stream into a fresh
stream of a server with the SDK, ``every`` instances per
``stream_instances`` call in frames of ``frame`` (the batches of FIRES and
FSDS), and reads the selection after each call; a run with a watch then
counts the ``drift`` events of its stream's log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from featurestream.bench.drift_data import DriftSpec, DriftStream, make_stream
from featurestream.bench.drift_score import Recovery, f1, recoveries, stationary_f1, strict_f1
from featurestream.bench.sdk import instances_read_back

#: The detectors ``--drift`` takes; ``none`` adds no reset configuration.
DETECTORS = ("page_hinkley", "adwin", "none")

#: The selectors of the harness and the targets each one takes.
SELECTORS: dict[str, tuple[str, ...]] = {
    "kbest": ("binary", "multiclass"),
    "fires": ("binary", "multiclass"),
    "ofs": ("binary",),
    "fsds": ("unsupervised",),
}


@dataclass(frozen=True)
class Config:
    """One selector with its parameters on one kind of target."""

    algorithm: str
    target: str
    params: dict[str, Any]

    @property
    def label(self) -> str:
        h = self.params.get("half_life")
        out = self.algorithm + ("" if h is None else f" half_life={h:g}")
        if self.watches:
            out += f" {self.params.get('on_drift', 'log')}={self.params['drift']}"
        return out

    @property
    def forgets(self) -> bool:
        return self.params.get("half_life") is not None

    @property
    def watches(self) -> bool:
        """Whether the stream has a drift watch (its drift events are counted)."""
        return str(self.params.get("drift", "none")) != "none"


def configurations(
    selectors: list[str],
    targets: list[str],
    half_life: float,
    num_features: int = 5,
    *,
    drift: str = "none",
) -> list[Config]:
    """Each selector on each target it takes: without forgetting, with it, and
    (``drift`` not ``none``) with a watch by ``drift`` that resets it."""
    if drift not in DETECTORS:
        raise ValueError(f"drift must be one of {DETECTORS}; got {drift!r}")
    out = []
    for target in targets:
        for name in selectors:
            if target not in SELECTORS[name]:
                continue
            base: dict[str, Any] = {"num_features": num_features}
            out.append(Config(name, target, base))
            out.append(Config(name, target, {**base, "half_life": half_life}))
            if drift != "none":
                out.append(Config(name, target, {**base, "drift": drift, "on_drift": "reset"}))
    return out


@dataclass
class RunResult:
    """One configuration on one stream: its F1 curve and what follows from it."""

    label: str
    algorithm: str
    target: str
    switch: str
    seed: int
    params: dict[str, Any]
    instances: int
    seconds: float
    curve: list[tuple[int, float]]
    strict_curve: list[tuple[int, float]]
    switches: list[int]
    recoveries: list[Recovery] = field(default_factory=list)
    stationary_f1: float | None = None
    drift_events: int | None = None  # None: the configuration watches for no drift
    drift_at: list[int] = field(default_factory=list)  # instances_seen of each detection

    @property
    def us_per_instance(self) -> float:
        return 1e6 * self.seconds / self.instances


class Streams:
    """Generated streams, kept while the configurations of one target run on them."""

    def __init__(self) -> None:
        self._kept: dict[DriftSpec, DriftStream] = {}

    def get(self, spec: DriftSpec) -> DriftStream:
        if spec not in self._kept:
            # One target's streams at a time: the runs are grouped by target.
            self._kept = {k: v for k, v in self._kept.items() if k.target == spec.target}
            self._kept[spec] = make_stream(spec)
        return self._kept[spec]


def run(url: str, config: Config, stream: DriftStream, every: int, frame: int) -> RunResult:
    """Stream ``stream`` into a fresh stream of the server at ``url`` and score each read."""
    spec = stream.spec
    target_type = {"binary": "binary", "multiclass": "multiclass"}.get(spec.target)
    back = instances_read_back(
        url,
        stream.X,
        stream.y,
        stream.names,
        config.algorithm,
        config.params,
        every=every,
        frame=frame,
        target_type=target_type,
        event_type="drift" if config.watches else None,
    )
    index = {name: j for j, name in enumerate(stream.names)}
    curve, strict = [], []
    for t, names in back.selections:
        chosen = [index[n] for n in names]
        concept = stream.concept_at(t - 1)
        curve.append((t, f1(chosen, concept)))
        strict.append((t, strict_f1(chosen, concept)))
    result = RunResult(
        config.label,
        config.algorithm,
        config.target,
        spec.switch,
        spec.seed,
        dict(config.params),
        spec.n,
        back.seconds,
        curve,
        strict,
        list(spec.switches),
    )
    if back.events is not None:
        result.drift_events = len(back.events)
        result.drift_at = [int(e["instances_seen"]) for e in back.events]
    if spec.switches:
        result.recoveries = recoveries(curve, spec.switches, spec.n)
    else:
        result.stationary_f1 = stationary_f1(curve, spec.n)
    return result


__all__ = ["DETECTORS", "SELECTORS", "Config", "RunResult", "Streams", "configurations", "run"]
