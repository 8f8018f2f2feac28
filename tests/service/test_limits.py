"""Configured limits: each answered with a precise problem, and nothing applied."""

from __future__ import annotations

import io
import socket
import time
from collections.abc import Iterator

import numpy as np
import pytest
from fastapi.testclient import TestClient

from featurestream.api import create_app
from featurestream.config import Settings
from tests.support import ServeProcess


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


@pytest.fixture
def limited(settings: Settings) -> Iterator[TestClient]:
    tight = settings.model_copy(
        update={
            "max_columns_per_request": 3,
            "max_instances_per_request": 4,
            "max_name_length": 8,
            "max_streams_per_tenant": 2,
        }
    )
    with TestClient(create_app(tight)) as client:
        yield client


def create_ofs(client: TestClient, names: list[str]) -> None:
    """Instance stream "o": OFS keeping one feature of ``names``."""
    body = {"id": "o", "algorithm": "ofs", "params": {"num_features": 1}, "feature_names": names}
    assert client.post("/v1/streams", json=body).status_code == 201


def problem_of(r: object, status: int, suffix: str) -> dict[str, object]:
    assert r.status_code == status, r.text  # type: ignore[attr-defined]
    body = r.json()  # type: ignore[attr-defined]
    assert body["type"] == f"/problems/{suffix}" and body["status"] == status
    return dict(body)


def test_columns_per_request(limited: TestClient) -> None:
    limited.post("/v1/streams", json={"id": "f", "algorithm": "saola", "target": [1.0, 2, 3, 4, 5]})
    cols = [{"name": f"c{i}", "values": [float(i), 1, 2, 3, 4]} for i in range(4)]
    body = problem_of(
        limited.post("/v1/streams/f/features", json={"features": cols}), 413, "limit-exceeded"
    )
    assert body["limit"] == "max_columns_per_request" and body["maximum"] == 3
    r = limited.post(
        "/v1/streams/f/features",
        content=npy(np.ones((5, 4))),
        headers={"content-type": "application/x-npy"},
    )
    problem_of(r, 413, "limit-exceeded")
    assert limited.post("/v1/streams/f/features", json={"features": cols[:3]}).status_code == 200
    assert limited.get("/v1/streams/f/status").json()["features_seen"] == 3


def test_feature_name_length(limited: TestClient) -> None:
    limited.post("/v1/streams", json={"id": "f", "algorithm": "saola", "target": [1.0, 2, 3, 4, 5]})
    r = limited.post(
        "/v1/streams/f/features",
        json={"features": [{"name": "x" * 9, "values": [1.0, 2, 3, 4, 6]}]},
    )
    problem_of(r, 422, "invalid-input")
    r = limited.post(
        "/v1/streams/f/features",
        json={"features": [{"name": "bad\nname", "values": [1.0, 2, 3, 4, 6]}]},
    )
    problem_of(r, 422, "invalid-input")
    assert limited.get("/v1/streams/f/status").json()["features_seen"] == 0


def test_instances_per_request_and_per_frame(limited: TestClient) -> None:
    create_ofs(limited, ["a", "b"])
    X, y = np.ones((5, 2)), np.ones(5)
    problem_of(
        limited.post("/v1/streams/o/instances", json={"X": X.tolist(), "y": y.tolist()}),
        413,
        "limit-exceeded",
    )
    with limited.websocket_connect("/v1/streams/o/ws?producer=p") as ws:
        assert ws.receive_json()["type"] == "selection"
        ws.send_bytes(npy(np.column_stack([X, y])))
        ws.send_bytes(npy(np.column_stack([X[:4], y[:4]])))
        first = ws.receive_json()
        while first["type"] == "selection":
            first = ws.receive_json()
        assert first["type"] == "error" and first["error"]["type"] == "/problems/limit-exceeded"
        second = ws.receive_json()
        while second["type"] == "selection":
            second = ws.receive_json()
        assert second["type"] == "ack" and second["instances_seen"] == 4


def test_streams_per_tenant(limited: TestClient) -> None:
    for i in range(2):
        r = limited.post(
            "/v1/streams", json={"id": f"s{i}", "algorithm": "saola", "target": [1, 2, 3]}
        )
        assert r.status_code == 201
    body = problem_of(
        limited.post("/v1/streams", json={"id": "s2", "algorithm": "saola", "target": [1, 2, 3]}),
        429,
        "quota-exceeded",
    )
    assert body["maximum"] == 2
    assert limited.delete("/v1/streams/s0").status_code == 204
    assert (
        limited.post(
            "/v1/streams", json={"id": "s2", "algorithm": "saola", "target": [1, 2, 3]}
        ).status_code
        == 201
    )


@pytest.mark.slow
def test_a_stalled_body_times_out_with_408() -> None:
    server = ServeProcess("memory://", env={"FEATURESTREAM_BODY_TIMEOUT": "0.5"}).start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(
                b"POST /v1/streams HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b'Content-Length: 1000\r\n\r\n{"algorithm": '
            )
            t0 = time.monotonic()
            reply = s.recv(65536).decode()
            waited = time.monotonic() - t0
            while "\r\n\r\n" not in reply or reply.endswith("\r\n\r\n"):
                chunk = s.recv(65536).decode()
                if not chunk:
                    break
                reply += chunk
        assert reply.startswith("HTTP/1.1 408"), reply[:200]
        assert "/problems/request-timeout" in reply
        assert 0.4 < waited < 5
    finally:
        server.kill()


def test_a_compressed_npz_may_not_expand_beyond_the_body_limit(settings: Settings) -> None:
    # 2 MiB of zeros compress to a few KiB; uncompressed they exceed the 1 MiB limit.
    import scipy.sparse as sp

    small = settings.model_copy(update={"max_request_bytes": 1 << 20})
    buf = io.BytesIO()
    sp.save_npz(buf, sp.csr_matrix(np.ones((1, 2))), compressed=True)
    bomb = io.BytesIO()
    sp.save_npz(
        bomb,
        sp.csr_matrix((np.zeros(1 << 18), np.zeros(1 << 18, np.int32), [0, 1 << 18]), shape=(1, 3)),
        compressed=True,
    )
    assert len(bomb.getvalue()) < 100_000
    with TestClient(create_app(small)) as client:
        create_ofs(client, ["a"])
        headers = {"content-type": "application/x-npz", "X-Label-Column": "last"}
        r = client.post("/v1/streams/o/instances", content=bomb.getvalue(), headers=headers)
        problem = problem_of(r, 413, "limit-exceeded")
        assert problem["limit"] == "max_request_bytes"
        with client.websocket_connect("/v1/streams/o/ws") as ws:
            assert ws.receive_json()["type"] == "selection"
            ws.send_bytes(bomb.getvalue())
            ws.send_bytes(buf.getvalue())  # a small, good frame: [1] with label 1
            answers = []
            while len(answers) < 2:
                msg = ws.receive_json()
                if msg["type"] != "selection":
                    answers.append(msg)
        assert answers[0]["type"] == "error"
        assert answers[0]["error"]["type"] == "/problems/limit-exceeded"
        assert answers[1]["type"] == "ack" and answers[1]["instances_seen"] == 1
