"""Online feature selectors: the registry of algorithms by name."""

from __future__ import annotations

from featurestream.selectors.alpha_investing import AlphaInvesting, AlphaInvestingParams
from featurestream.selectors.base import FeatureSelector, InstanceSelector, Selector
from featurestream.selectors.decisions import (
    Decision,
    Eviction,
    InstanceUpdate,
    Reason,
    SelectedFeature,
)
from featurestream.selectors.fires import FIRES, FIRESParams
from featurestream.selectors.fsds import FSDS, FSDSParams
from featurestream.selectors.grafting import Grafting, GraftingParams
from featurestream.selectors.group_saola import GroupSAOLA, GroupSAOLAParams
from featurestream.selectors.k_ofsd import KOFSD, KOFSDParams
from featurestream.selectors.kbest import KBest, KBestParams
from featurestream.selectors.nrfs import NRFS, NRFSParams
from featurestream.selectors.ofs import OFS, OFSParams
from featurestream.selectors.ofs_a3m import OFSA3M, OFSA3MParams
from featurestream.selectors.ofs_density import OFSDensity, OFSDensityParams
from featurestream.selectors.osfs import OSFS, FastOSFS, FastOSFSParams, OSFSParams
from featurestream.selectors.ossfs_dd import OSSFSDD, OSSFSDDParams
from featurestream.selectors.params import Params
from featurestream.selectors.saola import SAOLA, SAOLAParams, SAOLAState

REGISTRY: dict[str, type[Selector]] = {  # type: ignore[type-arg]
    cls.name: cls
    for cls in (
        SAOLA,
        GroupSAOLA,
        OSFS,
        FastOSFS,
        AlphaInvesting,
        Grafting,
        OFS,
        FSDS,
        FIRES,
        NRFS,
        OSSFSDD,
        KOFSD,
        OFSA3M,
        OFSDensity,
        KBest,
    )
}

__all__ = [
    "FIRES",
    "FSDS",
    "KOFSD",
    "NRFS",
    "OFS",
    "OFSA3M",
    "OSFS",
    "OSSFSDD",
    "REGISTRY",
    "SAOLA",
    "AlphaInvesting",
    "AlphaInvestingParams",
    "Decision",
    "Eviction",
    "FIRESParams",
    "FSDSParams",
    "FastOSFS",
    "FastOSFSParams",
    "FeatureSelector",
    "Grafting",
    "GraftingParams",
    "GroupSAOLA",
    "GroupSAOLAParams",
    "InstanceSelector",
    "InstanceUpdate",
    "KBest",
    "KBestParams",
    "KOFSDParams",
    "NRFSParams",
    "OFSA3MParams",
    "OFSDensity",
    "OFSDensityParams",
    "OFSParams",
    "OSFSParams",
    "OSSFSDDParams",
    "Params",
    "Reason",
    "SAOLAParams",
    "SAOLAState",
    "SelectedFeature",
    "Selector",
]
