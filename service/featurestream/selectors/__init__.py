"""Online feature selectors: the registry of algorithms by name."""

from __future__ import annotations

from featurestream.selectors.base import (
    Decision,
    Eviction,
    FeatureSelector,
    InstanceSelector,
    InstanceUpdate,
    Params,
    Reason,
    SelectedFeature,
    Selector,
)
from featurestream.selectors.group_saola import GroupSAOLA, GroupSAOLAParams
from featurestream.selectors.saola import SAOLA, SAOLAParams, SAOLAState

REGISTRY: dict[str, type[Selector]] = {  # type: ignore[type-arg]
    cls.name: cls
    for cls in (SAOLA, GroupSAOLA)
}

__all__ = [
    "REGISTRY",
    "SAOLA",
    "Decision",
    "Eviction",
    "FeatureSelector",
    "GroupSAOLA",
    "GroupSAOLAParams",
    "InstanceSelector",
    "InstanceUpdate",
    "Params",
    "Reason",
    "SAOLAParams",
    "SAOLAState",
    "SelectedFeature",
    "Selector",
]
