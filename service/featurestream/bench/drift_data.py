"""Instance streams whose relevant features are known at every instance and switch at known times.

The ground truth of ``featurestream bench drift``. A stream is a run of
segments, each with its own *concept*: which features matter and how. A
concept of d features has ``relevant`` (5) original features, ``copies`` (20)
redundant features, each a noisy copy of one original (the originals take
turns: copy i belongs to original i mod 5), and noise, the other d - 25
features, N(0, 1) and independent of everything. Which features play which
role is drawn at random per segment, and a new segment's originals and copies
are drawn among the previous segment's noise features (while d leaves room:
d >= 50 for the defaults), so the old truth and the new one share no feature.

Supervised concepts (``binary`` and ``multiclass``): the originals are
N(0, 1); z = sum_r w_r x_r + ``label_noise`` e with random signs w_r = +-1;
the binary label is 1[z > 0], the 3-class label cuts z at its terciles (each
class a third of the instances). A copy of x_r is (x_r + ``copy_noise`` e') /
sqrt(1 + ``copy_noise``^2), unit variance like every other feature, so it
correlates 0.89 with its original (``copy_noise`` 0.5) and a little less with
the label.

The unsupervised concept (``unsupervised``, for FSDS; no labels): the
originals carry a rank-2 structure, x_R = u A^T + e with u ~ N(0, I_2) and
the row r of A = ``loading`` (cos t_r, sin t_r), the angles t_r evenly spread
over half a turn from a random start; so each original has variance
``loading``^2 + 1 and the five share two directions. The copies are
standardised as above (unit variance), so they hold the structure at a
smaller scale than their originals.

The truth at instance t is the concept of its segment: ``groups`` gives each
feature its group, the index (0 to 4) of the original it is or copies, or -1
for a noise feature (see ``drift_score`` for how groups count in F1). An
``abrupt`` switch changes the concept between two instances. A ``gradual``
switch mixes the two over ``transition`` instances centred on the switch
time: instance t of the window comes from the new concept with a probability
rising linearly from 0 to 1 across it, so about half the window precedes the
switch time; the truth still changes at the switch time itself.
``stationary`` is one segment.

Everything is a deterministic function of the spec and its seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

TARGETS = ("binary", "multiclass", "unsupervised")
SWITCHES = ("abrupt", "gradual", "stationary")
# The terciles of N(0, 1): z below -Q, between, above Q each hold a third.
TERCILE = 0.4307272992954576


@dataclass(frozen=True)
class DriftSpec:
    """Shape of a switching stream: its segments, its features and its target."""

    target: str = "binary"
    switch: str = "abrupt"
    segments: int = 2
    segment: int = 20_000  # instances per segment
    d: int = 100
    relevant: int = 5
    copies: int = 20
    transition: int = 2_000  # gradual switches: width of the mixing window
    copy_noise: float = 0.5
    label_noise: float = 0.5
    loading: float = 2.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}; got {self.target!r}")
        if self.switch not in SWITCHES:
            raise ValueError(f"switch must be one of {SWITCHES}; got {self.switch!r}")
        if self.relevant < 1 or self.copies < 0 or self.relevant + self.copies > self.d:
            raise ValueError("need 1 <= relevant and relevant + copies <= d")
        if self.segments < 1 or self.segment < 1:
            raise ValueError("segments and segment must be at least 1")
        if self.switch == "gradual" and not 0 < self.transition <= self.segment:
            raise ValueError("a gradual switch needs 0 < transition <= segment")

    @property
    def n(self) -> int:
        return self.segment * (1 if self.switch == "stationary" else self.segments)

    @property
    def switches(self) -> tuple[int, ...]:
        """The instances at which the truth changes (0-based: the first of the new concept)."""
        if self.switch == "stationary":
            return ()
        return tuple(self.segment * s for s in range(1, self.segments))


@dataclass(frozen=True)
class Concept:
    """One segment's truth and the numbers its instances are drawn with."""

    groups: IntArray  # per feature: its group (0 .. relevant - 1) or -1 (noise)
    originals: IntArray  # the feature of each group's original, by group
    signs: FloatArray  # supervised: w_r; unsupervised: unused
    angles: FloatArray  # unsupervised: t_r; supervised: unused


@dataclass(frozen=True)
class DriftStream:
    """A generated stream: its instances, labels, concepts and where each applies."""

    spec: DriftSpec
    X: FloatArray
    y: IntArray | None
    concepts: tuple[Concept, ...]
    names: tuple[str, ...]

    def concept_at(self, t: int) -> Concept:
        """The truth at instance t (0-based): the concept of its segment."""
        return self.concepts[sum(1 for s in self.spec.switches if t >= s)]


def feature_names(d: int) -> tuple[str, ...]:
    width = max(3, len(str(d - 1)))
    return tuple(f"f{j:0{width}d}" for j in range(d))


def draw_concept(spec: DriftSpec, rng: np.random.Generator, before: Concept | None) -> Concept:
    """Roles for a segment: originals and copies first among the previous concept's noise."""
    perm = rng.permutation(spec.d)
    if before is not None:
        was_noise = before.groups[perm] < 0
        perm = np.concatenate([perm[was_noise], perm[~was_noise]])
    groups = np.full(spec.d, -1, dtype=np.int64)
    members = perm[: spec.relevant + spec.copies]
    groups[members] = np.arange(members.size) % spec.relevant
    signs = rng.choice(np.array([-1.0, 1.0]), size=spec.relevant)
    start = rng.uniform(0.0, math.pi)
    angles = start + math.pi * np.arange(spec.relevant) / spec.relevant
    return Concept(groups, perm[: spec.relevant].astype(np.int64), signs, angles)


def draw_instances(
    spec: DriftSpec, concept: Concept, n: int, rng: np.random.Generator
) -> tuple[FloatArray, IntArray | None]:
    """n instances of one concept, and their labels (None for the unsupervised target)."""
    X = rng.standard_normal((n, spec.d))
    R = concept.originals
    if spec.target == "unsupervised":
        A = spec.loading * np.column_stack([np.cos(concept.angles), np.sin(concept.angles)])
        X[:, R] = rng.standard_normal((n, 2)) @ A.T + rng.standard_normal((n, R.size))
        spread = math.sqrt(spec.loading**2 + 1.0 + spec.copy_noise**2)
    else:
        spread = math.sqrt(1.0 + spec.copy_noise**2)
    for j in np.flatnonzero(concept.groups >= 0):
        original = R[concept.groups[j]]
        if j != original:
            X[:, j] = (X[:, original] + spec.copy_noise * rng.standard_normal(n)) / spread
    if spec.target == "unsupervised":
        return X, None
    z = X[:, R] @ concept.signs + spec.label_noise * rng.standard_normal(n)
    if spec.target == "binary":
        return X, (z > 0).astype(np.int64)
    cut = TERCILE * math.sqrt(R.size + spec.label_noise**2)
    return X, np.digitize(z, [-cut, cut]).astype(np.int64)


def make_stream(spec: DriftSpec) -> DriftStream:
    """The stream of a spec: one concept per segment, switches abrupt or gradual."""
    rng = np.random.default_rng([spec.seed, TARGETS.index(spec.target)])
    concepts: list[Concept] = []
    for _ in range(1 if spec.switch == "stationary" else spec.segments):
        concepts.append(draw_concept(spec, rng, concepts[-1] if concepts else None))
    Xs, ys = [], []
    for concept in concepts:
        X, y = draw_instances(spec, concept, spec.segment, rng)
        Xs.append(X)
        ys.append(y)
    X = np.concatenate(Xs)
    y = None if spec.target == "unsupervised" else np.concatenate([v for v in ys if v is not None])
    if spec.switch == "gradual":
        _mix(spec, concepts, X, y, rng)
    return DriftStream(spec, X, y, tuple(concepts), feature_names(spec.d))


def _mix(
    spec: DriftSpec,
    concepts: list[Concept],
    X: FloatArray,
    y: IntArray | None,
    rng: np.random.Generator,
) -> None:
    """Gradual switches: each window's instances come from the new concept with rising odds."""
    half = spec.transition // 2
    for k, at in enumerate(spec.switches):
        lo, hi = at - half, at - half + spec.transition
        p_new = (np.arange(lo, hi) - lo + 0.5) / spec.transition
        new = rng.random(spec.transition) < p_new
        # Each instance of the window is redrawn from the concept it belongs to.
        for concept, mask in ((concepts[k], ~new), (concepts[k + 1], new)):
            rows = np.arange(lo, hi)[mask]
            Xc, yc = draw_instances(spec, concept, rows.size, rng)
            X[rows] = Xc
            if y is not None and yc is not None:
                y[rows] = yc


__all__ = [
    "SWITCHES",
    "TARGETS",
    "Concept",
    "DriftSpec",
    "DriftStream",
    "draw_concept",
    "draw_instances",
    "feature_names",
    "make_stream",
]
