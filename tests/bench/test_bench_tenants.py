"""``featurestream bench tenants``: a real server, other tenants' streams, then the timings."""

from __future__ import annotations

import json

import pytest

from featurestream.bench import main
from featurestream.bench.tenants import measure, report

pytestmark = pytest.mark.redis


def test_tenants_benchmark_times_creates_and_listings_and_cleans_up(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result = measure(redis_url, others=30, tenants=3, samples=5, workers=2)
    assert result.other_streams == 30 and result.other_tenants == 3
    for figures in (result.create, result.list, result.create_alone, result.list_alone):
        assert figures.samples == 5
        assert 0 < figures.p50 <= figures.p99 <= figures.max
    text = report(result, as_json=False)
    assert "30 streams of 3 other tenants" in text and len(text.splitlines()) == 6
    assert json.loads(report(result, as_json=True))["create"]["samples"] == 5
    # The command line, on the embedded store.
    assert main(["tenants", "--store", "memory://", "--others", "4", "--samples", "2"]) == 0
    out = capsys.readouterr().out
    assert "4 streams of 100 other tenants" in out


def test_tenants_benchmark_refuses_bad_counts() -> None:
    with pytest.raises(SystemExit):
        main(["tenants", "--samples", "0"])
