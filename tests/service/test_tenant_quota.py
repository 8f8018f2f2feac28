"""The per-tenant stream quota under concurrent creates, against real server processes.

Two tenants (API keys on); 40 creates at once with ``max_streams_per_tenant``
5 create exactly 5 streams, whichever processes they reach, and the rest get
the quota problem (429). A listing shows the tenant's own streams only, and
streams created before tenant indexes existed are indexed when a process
starts.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from featurestream.api.auth import hash_key
from tests.faults.harness import Processes, ServerProcess

pytestmark = [pytest.mark.redis, pytest.mark.slow]

KEYS = {"acme": "key-of-acme", "beta": "key-of-beta"}
QUOTA = 5
CREATES = 40


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys"
    path.write_text("".join(f"{t}:{hash_key(k)}\n" for t, k in KEYS.items()))
    return path


def auth(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[tenant]}"}


def create(url: str, tenant: str, sid: str) -> httpx.Response:
    body = {"id": sid, "algorithm": "ofs", "params": {"num_features": 2}}
    body["feature_names"] = ["a", "b", "c"]
    return httpx.post(url + "/v1/streams", json=body, headers=auth(tenant), timeout=30)


def listed(url: str, tenant: str) -> list[str]:
    r = httpx.get(url + "/v1/streams", headers=auth(tenant), timeout=30)
    assert r.status_code == 200, r.text
    return sorted(s["id"] for s in r.json()["streams"])


def servers(
    processes: Processes, store_url: str, prefix: str, keys_file: Path, count: int
) -> list[ServerProcess]:
    env = {
        "FEATURESTREAM_API_KEYS_FILE": str(keys_file),
        "FEATURESTREAM_MAX_STREAMS_PER_TENANT": str(QUOTA),
    }
    return processes.start(count, store_url, prefix, env=env)


@pytest.mark.parametrize("store", ["redis", "memory"])
def test_concurrent_creates_never_exceed_the_tenant_quota(
    processes: Processes, redis_url: str, key_prefix: str, keys_file: Path, store: str
) -> None:
    # Redis: two processes share the quota. Memory: one process (its store is its own).
    count = 2 if store == "redis" else 1
    started = servers(
        processes, redis_url if store == "redis" else "memory://", key_prefix, keys_file, count
    )
    urls = [s.url for s in started]
    assert create(urls[0], "beta", "b-own").status_code == 201
    with ThreadPoolExecutor(CREATES) as pool:
        answers = list(pool.map(lambda i: create(urls[i % count], "acme", f"s{i}"), range(CREATES)))
    codes = sorted(r.status_code for r in answers)
    assert codes.count(201) == QUOTA, codes
    refused = [r for r in answers if r.status_code != 201]
    assert {r.status_code for r in refused} == {429}
    assert {r.json()["type"] for r in refused} == {"/problems/quota-exceeded"}
    created = sorted(r.json()["id"] for r in answers if r.status_code == 201)
    for url in urls:
        assert listed(url, "acme") == created
        assert listed(url, "beta") == ["b-own"]
    # The other tenant's quota is its own.
    for i in range(QUOTA - 1):
        assert create(urls[-1], "beta", f"b{i}").status_code == 201
    assert create(urls[0], "beta", "one-too-many").status_code == 429
    # A delete frees a slot, in every process.
    assert (
        httpx.delete(urls[0] + f"/v1/streams/{created[0]}", headers=auth("acme")).status_code == 204
    )
    assert create(urls[-1], "acme", "again").status_code == 201
    assert create(urls[0], "acme", "over").status_code == 429
