"""Class targets against a real ``featurestream serve`` process on Redis, through the SDK.

Issue #16, point 1: SAOLA on wine read the classes 0, 1, 2 as ordered numbers,
so relabelling them (or naming them) changed the selection. With target types
(docs/algorithms.md, "Targets") the labels travel as given (strings in JSON),
the stream shows its resolved type and classes, and every relabelling selects
the same features.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from sklearn.datasets import load_wine

from featurestream_client import Client
from featurestream_client.errors import FeatureStreamError
from tests.client.live import has_websocket_route
from tests.support import ServeProcess

pytestmark = [pytest.mark.redis]

X, Y = load_wine(return_X_y=True)
NAMES = [f"f{i}" for i in range(X.shape[1])]
RELABELLINGS: list[list[Any]] = [
    [0, 1, 2],
    [2, 0, 1],
    [1, 2, 0],
    ["barolo", "grignolino", "barbera"],
    ["z", "a", "m"],
]


@pytest.fixture
def serve(redis_url: str, key_prefix: str) -> Iterator[ServeProcess]:
    server = ServeProcess(redis_url, key_prefix).start()
    yield server
    server.stop()


def labels(mapping: list[Any]) -> list[Any]:
    return [mapping[int(v)] for v in Y]


def test_relabelled_wine_selects_the_same_features_on_a_served_process(
    serve: ServeProcess,
) -> None:
    with Client(serve.url) as c:
        for algorithm, params in [
            ("saola", {}),
            ("fast_osfs", {}),
            ("alpha_investing", {}),
            ("group_saola", {}),
        ]:
            results = []
            for k, mapping in enumerate(RELABELLINGS):
                s = c.create_stream(algorithm, target=labels(mapping), params=params)
                assert s.refresh().target_type == "multiclass"
                assert list(s.refresh().classes or ()) == sorted(mapping)
                if algorithm == "group_saola":
                    groups = [
                        (f"g{g}", (X[:, g : g + 3], NAMES[g : g + 3])) for g in range(0, 13, 3)
                    ]
                    out: Any = s.add_groups(groups)
                else:
                    out = s.add_features(X, names=NAMES, chunk_columns=4)
                results.append(
                    (
                        [(d.name, d.accepted, d.reason, d.by) for d in out.decisions],
                        list(out.selected),
                    )
                )
                assert results[k] == results[0], (algorithm, mapping)
            assert results[0][1], algorithm


def test_grafting_and_ofs_refuse_multiclass_streams_naming_the_ones_that_accept_them(
    serve: ServeProcess,
) -> None:
    with httpx.Client(base_url=serve.url, timeout=30) as h:
        r = h.post("/v1/streams", json={"algorithm": "grafting", "target": labels(["a", "b", "c"])})
        assert r.status_code == 422, r.text
        assert (
            "alpha_investing, fast_osfs, fires, group_saola, kbest, ofs_a3m, ofs_density, osfs, "
            "ossfs_dd, saola" in r.json()["detail"]
        )
        r = h.post(
            "/v1/streams",
            json={"algorithm": "ofs", "feature_names": NAMES, "params": {"num_features": 3},
                  "target_type": "multiclass"},
        )  # fmt: skip
        assert r.status_code == 422 and "fires" in r.json()["detail"], r.text
        # Nothing was created.
        assert h.get("/v1/streams").json()["streams"] == []
        # Two string classes are fine for Grafting: the binary rule.
        two = ["yes" if v == 0 else "no" for v in Y]
        r = h.post("/v1/streams", json={"algorithm": "grafting", "target": two, "id": "g2"})
        assert r.status_code == 201, r.text
        assert r.json()["target_type"] == "multiclass" and r.json()["classes"] == ["no", "yes"]
        r = h.post(
            "/v1/streams",
            json={"algorithm": "saola", "target": [0.5, 1.5, 2.0], "target_type": "binary"},
        )
        assert r.status_code == 422 and "at most 2 classes" in r.json()["detail"], r.text
        r = h.post("/v1/streams", json={"algorithm": "saola", "target": ["a", 1, 2]})
        assert r.status_code == 422 and "not a mix" in r.json()["detail"], r.text


def test_rough_set_selectors_on_a_served_process(serve: ServeProcess) -> None:
    """K-OFSD refuses three classes and a continuous target, naming the algorithms that
    accept classes; OFS-A3M and OFS-Density select alike under any class names."""
    with httpx.Client(base_url=serve.url, timeout=30) as h:
        r = h.post("/v1/streams", json={"algorithm": "k_ofsd", "target": labels(["a", "b", "c"])})
        assert r.status_code == 422 and "ofs_density" in r.json()["detail"], r.text
        r = h.post(
            "/v1/streams",
            json={"algorithm": "k_ofsd", "target": (X[:, 0] / 7).tolist(),
                  "target_type": "continuous"},
        )  # fmt: skip
        assert r.status_code == 422 and "continuous target" in r.json()["detail"], r.text
        r = h.post("/v1/streams", json={"algorithm": "ofs_a3m", "target": [0.5, 1.5, 2.5]})
        assert r.status_code == 422 and "learns classes" in r.json()["detail"], r.text
        assert h.get("/v1/streams").json()["streams"] == []
    with Client(serve.url) as c:
        two = [0 if v == 0 else 1 for v in Y]
        s = c.create_stream("k_ofsd", target=two, params={"k": 3})
        out = s.add_features(X, names=NAMES, chunk_columns=5)
        assert list(out.selected) and s.status()["dep_last"] > 0.5
        for algorithm in ("ofs_a3m", "ofs_density"):
            results = []
            for mapping in RELABELLINGS:
                s = c.create_stream(algorithm, target=labels(mapping))
                out = s.add_features(X, names=NAMES, chunk_columns=4)
                results.append(
                    ([(d.name, d.accepted, d.reason) for d in out.decisions], list(out.selected))
                )
            assert results[0][1] and all(r == results[0] for r in results), algorithm


def test_instance_streams_take_string_labels_in_json_bodies(serve: ServeProcess) -> None:
    order = np.random.default_rng(1).permutation(len(Y))
    Xs, ys = X[order], Y[order]
    runs = []
    with httpx.Client(base_url=serve.url, timeout=30) as h:
        for k, mapping in enumerate(RELABELLINGS):
            sid = f"fires-{k}"
            r = h.post(
                "/v1/streams",
                json={"id": sid, "algorithm": "fires", "feature_names": NAMES,
                      "params": {"num_features": 4}},
            )  # fmt: skip
            assert r.status_code == 201 and r.json()["target_type"] == "auto", r.text
            for lo in range(0, len(ys), 40):
                body = {
                    "X": Xs[lo : lo + 40].tolist(),
                    "y": [mapping[int(v)] for v in ys[lo : lo + 40]],
                }
                r = h.post(f"/v1/streams/{sid}/instances", json=body)
                assert r.status_code == 200, r.text
            info = h.get(f"/v1/streams/{sid}").json()
            assert info["target_type"] == "multiclass"
            assert info["classes"] == sorted(mapping)
            runs.append(h.get(f"/v1/streams/{sid}/selected").json()["features"])
            # A label the stream never saw in a later batch is a new class (K grows)
            # but a mix of strings and numbers is refused, and nothing changes.
            version = info["version"]
            bad = {
                "X": Xs[:2].tolist(),
                "y": [mapping[0], 7 if isinstance(mapping[0], str) else "x"],
            }
            r = h.post(f"/v1/streams/{sid}/instances", json=bad)
            assert r.status_code == 422, r.text
            assert h.get(f"/v1/streams/{sid}").json()["version"] == version
    assert all(run == runs[0] for run in runs)


def test_sdk_sends_string_targets_as_given(serve: ServeProcess) -> None:
    with Client(serve.url) as c:
        s = c.create_stream("saola", target=np.array(labels(["red", "white", "rose"])))
        assert s.refresh().classes == ("red", "rose", "white")
        numeric = c.create_stream("saola", target=Y, target_type="continuous")
        assert numeric.refresh().target_type == "continuous" and numeric.refresh().classes is None
        with pytest.raises(FeatureStreamError):
            c.create_stream("saola", target=Y, target_type="ordinal")


def test_sdk_sends_string_labels_of_instances_over_http_and_websocket(
    serve: ServeProcess,
) -> None:
    order = np.random.default_rng(2).permutation(len(Y))
    Xs = X[order]
    names = np.array(["barolo", "grignolino", "barbera"])[Y[order]]
    with Client(serve.url) as c:
        http = c.create_stream("fires", feature_names=NAMES, params={"num_features": 4})
        a = http.add_instances(Xs, names, batch_size=40)
        assert http.refresh().classes == ("barbera", "barolo", "grignolino")
        codes = c.create_stream("fires", feature_names=NAMES, params={"num_features": 4})
        b = codes.add_instances(Xs, Y[order], batch_size=40)
        assert list(a.selected) == list(b.selected)
        if has_websocket_route():
            ws = c.create_stream("fires", feature_names=NAMES, params={"num_features": 4})
            out = ws.stream_instances(Xs, names, batch_size=40)
            assert list(out.selected) == list(a.selected)
