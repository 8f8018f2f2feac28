"""``featurestream bench --quick``: every data set and selector, end to end, stays runnable.

Asserts what the results say (coverage, identical selections, recall), never
how fast anything was.
"""

from __future__ import annotations

import json

import pytest

from featurestream.bench import main
from featurestream.bench.datasets import FEATURE_SPECS, INSTANCE_SPECS
from featurestream.bench.suite import ONLY_ON
from featurestream.selectors import REGISTRY
from featurestream.selectors.base import FeatureSelector

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture(scope="module")
def quick_results(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    path = tmp_path_factory.mktemp("bench") / "quick.json"
    code = main(["--quick", "--store", redis_url, "--json", str(path)])
    assert code == 0
    return json.loads(path.read_text())


def test_quick_runs_every_selector_on_every_dataset_of_its_kind(quick_results: dict) -> None:
    runs = {(r["dataset"], r["algorithm"], r["mode"]) for r in quick_results["results"]}
    for name, cls in REGISTRY.items():
        sets = FEATURE_SPECS if issubclass(cls, FeatureSelector) else INSTANCE_SPECS
        for dataset in ONLY_ON.get(name, tuple(sets)):
            assert (dataset, name, "in-process") in runs
            assert (dataset, name, "service") in runs
    assert all(r["error"] is None for r in quick_results["results"])
    assert all(r["complete"] for r in quick_results["results"])


def test_service_and_in_process_select_the_same(quick_results: dict) -> None:
    results = quick_results["results"]
    service = [r for r in results if r["mode"] == "service"]
    assert service
    for r in service:
        assert r["identical"] is True, (r["dataset"], r["algorithm"])
        twin = next(
            x
            for x in results
            if x["mode"] == "in-process"
            and (x["dataset"], x["algorithm"]) == (r["dataset"], r["algorithm"])
        )
        assert r["selection"] == twin["selection"]
        assert r["items"] == twin["items"] == r["planned"]


def test_results_carry_recall_and_server_measurements(quick_results: dict) -> None:
    meta = quick_results["meta"]
    assert meta["quick"] is True and meta["server_spawned"] is True
    for r in quick_results["results"]:
        assert 0.0 <= r["recall"] <= 1.0
        assert r["selected"] == len(r["selection"])
        if r["mode"] == "service":
            assert r["bytes_sent"] > 0
            assert r["peak_rss_bytes"] > 0 and r["rss_note"] is None
            assert r["ratio"] is not None
    # The planted features are strong: SAOLA finds nearly all of them on every quick set.
    saola = [r for r in quick_results["results"] if r["algorithm"] == "saola"]
    assert saola and all(r["recall"] >= 0.8 for r in saola)
    # And FIRES on both instance sets: the planted features decide the label.
    fires = [r for r in quick_results["results"] if r["algorithm"] == "fires"]
    assert len(fires) == 4 and all(r["recall"] >= 0.8 for r in fires)
