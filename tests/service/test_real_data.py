"""Real data through a real server process: untestable tests on digits, OFS on raw breast cancer.

Digits (scikit-learn's bundled copy: integer pixels 0..16, 10 classes) with
Fast-OSFS and G2: almost no conditional test has 5 instances per degree of
freedom. The default keeps the reference rule and says so in a warning;
``untestable: "dependent"`` keeps what cannot be tested against.

Breast cancer as a raw CSV, replayed by the ``featurestream`` command into an
OFS stream: features measured in thousands next to fractions. Standardised by
default (``scale: "standard"``), OFS's prequential mistakes stay low.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from sklearn.datasets import load_digits

from tests.support import DATA, ServeProcess


@pytest.fixture(scope="module")
def server() -> Iterator[ServeProcess]:
    s = ServeProcess("memory://").start()
    yield s
    s.kill()


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_digits(return_X_y=True)
    return X.T.astype(np.float64), y.astype(np.float64)


def _send_digits(c: httpx.Client, sid: str, X: np.ndarray) -> list[dict[str, object]]:
    bodies = []
    for k, lo in enumerate(range(0, 64, 16)):
        feats = [{"name": f"p{i}", "values": X[i].tolist()} for i in range(lo, lo + 16)]
        r = c.post(
            f"/v1/streams/{sid}/features", json={"producer": "t", "seq": k + 1, "features": feats}
        )
        assert r.status_code == 200, r.text
        bodies.append(r.json())
    return bodies


def test_digits_g2_default_warns_in_status_and_in_the_crossing_response(
    server: ServeProcess, digits: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = digits
    with httpx.Client(base_url=server.url, timeout=60) as c:
        r = c.post(
            "/v1/streams",
            json={
                "id": "digits-default",
                "algorithm": "fast_osfs",
                "params": {"test": "g2"},
                "target": y.tolist(),
            },
        )
        assert r.status_code == 201, r.text
        assert r.json()["params"]["untestable"] == "independent"
        bodies = _send_digits(c, "digits-default", X)
        # Exactly the request that crossed 10% untestable tests carries the warning.
        warned = [b for b in bodies if "warnings" in b]
        assert len(warned) == 1
        status = c.get("/v1/streams/digits-default/status").json()
    assert status["tests_untestable"] * 10 > status["tests_performed"] > 0
    (warning,) = status["warnings"]
    # The message counts the tests as of its request; the code is the same.
    assert [w["code"] for w in warned[0]["warnings"]] == [warning["code"]]  # type: ignore[attr-defined]
    assert warning["code"] == "untestable-tests"
    message = warning["message"]
    assert "too few instances per degree of freedom" in message
    assert "fewer levels per feature" in message and "more instances" in message
    assert 'untestable: "dependent"' in message
    assert status["selected_count"] == 1


def test_digits_g2_dependent_keeps_what_cannot_be_tested(
    server: ServeProcess, digits: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = digits
    with httpx.Client(base_url=server.url, timeout=60) as c:
        r = c.post(
            "/v1/streams",
            json={
                "id": "digits-dependent",
                "algorithm": "fast_osfs",
                "params": {"test": "g2", "untestable": "dependent"},
                "target": y.tolist(),
            },
        )
        assert r.status_code == 201, r.text
        bodies = _send_digits(c, "digits-dependent", X)
        selected = [
            f["name"] for f in c.get("/v1/streams/digits-dependent/selected").json()["features"]
        ]
        status = c.get("/v1/streams/digits-dependent/status").json()
    decisions = [d for b in bodies for d in b["decisions"]]  # type: ignore[attr-defined]
    assert not any(d["reason"] == "redundant" or d["evicted"] for d in decisions)
    assert len(selected) > 40
    assert status["tests_untestable"] > 0.9 * status["tests_performed"]
    # The selection predicts as well as every pixel (kNN, 5 stratified folds).
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.neighbors import KNeighborsClassifier

    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    rows = X.T[:, [int(n[1:]) for n in selected]]
    assert cross_val_score(KNeighborsClassifier(), rows, y, cv=cv).mean() > 0.95


def test_untestable_value_is_refused(server: ServeProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        r = c.post(
            "/v1/streams",
            json={"algorithm": "osfs", "params": {"untestable": "yes"}, "target": [0, 1, 0, 1]},
        )
        assert r.status_code == 422
        assert "untestable" in r.text
        assert c.get("/v1/streams").json()["streams"] == [] or all(
            s["algorithm"] != "osfs" for s in c.get("/v1/streams").json()["streams"]
        )


def _replay(server: ServeProcess, sid: str, params: dict[str, object]) -> dict[str, object]:
    cmd = [
        sys.executable, "-m", "featurestream", "replay", str(DATA / "wdbc.csv"),
        "--algorithm", "ofs", "--target", "y", "--params", json.dumps(params),
        "--stream-id", sid, "--url", server.url, "--json", "--quiet",
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    with httpx.Client(base_url=server.url, timeout=30) as c:
        status: dict[str, object] = c.get(f"/v1/streams/{sid}/status").json()
    # The command reports the same prequential count as the stream's status.
    shown = json.loads(out.stdout)
    assert (shown["mistakes"], shown["instances_seen"]) == (status["mistakes"], 569)
    return status


def test_replay_raw_breast_cancer_csv_into_ofs_has_few_mistakes(server: ServeProcess) -> None:
    status = _replay(server, "bc-ofs", {"num_features": 10, "scale": "standard"})
    assert status["instances_seen"] == 569
    assert status["scale"] == "standard"
    rate = int(status["mistakes"]) / 569  # type: ignore[call-overload]
    assert rate <= 0.15, rate
    # The default, max-abs scaling, also learns from the raw values.
    default = _replay(server, "bc-ofs-maxabs", {"num_features": 10})
    assert default["scale"] == "maxabs"
    rate = int(default["mistakes"]) / 569  # type: ignore[call-overload]
    assert rate <= 0.2, rate
    # The published OFS on the raw values: worse than always answering "benign" (37%).
    raw = _replay(server, "bc-ofs-raw", {"num_features": 10, "scale": "none"})
    assert int(raw["mistakes"]) / 569 > 0.3  # type: ignore[call-overload]
