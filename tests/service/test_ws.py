"""Instance streams and selection subscriptions over WebSocket (in process, memory and Redis)."""

from __future__ import annotations

import asyncio
import io
import itertools
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from starlette.testclient import WebSocketTestSession
from starlette.websockets import WebSocketDisconnect

from featurestream import codec
from featurestream.api import create_app
from featurestream.config import Settings
from featurestream.errors import StoreUnavailable
from featurestream.selectors import FSDS, OFS, FSDSParams, OFSParams
from featurestream.store import open_store
from featurestream.store.keys import stream_keys
from featurestream.store.memory import InMemoryStore
from featurestream.store.redis import RedisStore
from tests import support

D = 20
NAMES = support.names(D, "x")
OFS_PARAMS: dict[str, Any] = {"num_features": 5}
FSDS_PARAMS: dict[str, Any] = {"num_features": 4, "sketch_size": 6}


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def npz(a: Any) -> bytes:
    """A sparse frame: ``scipy.sparse.save_npz`` of the rows (labels, if any, last)."""
    import scipy.sparse as sp

    buf = io.BytesIO()
    sp.save_npz(buf, sp.csr_matrix(a))
    return buf.getvalue()


def data(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, D))
    y = np.where(X[:, 0] + 0.5 * X[:, 3] + 0.1 * rng.normal(size=rows) > 0, 1.0, -1.0)
    return X, y


def create(client: TestClient, sid: str, algorithm: str = "ofs", params: Any = None) -> None:
    body = {
        "id": sid,
        "algorithm": algorithm,
        "params": OFS_PARAMS if params is None else params,
        "feature_names": NAMES,
    }
    r = client.post("/v1/streams", json=body)
    assert r.status_code == 201, r.text


def connect(client: TestClient, sid: str, **query: Any) -> Any:
    qs = "&".join(f"{k}={v}" for k, v in query.items())
    return client.websocket_connect(f"/v1/streams/{sid}/ws" + (f"?{qs}" if qs else ""))


def first_selection(ws: WebSocketTestSession) -> dict[str, Any]:
    msg = ws.receive_json()
    assert msg["type"] == "selection", msg
    return dict(msg)


def collect(ws: WebSocketTestSession, answers: int) -> tuple[list[Any], list[Any]]:
    """Read until ``answers`` acks/errors arrived: (answers, selection messages)."""
    out: list[Any] = []
    selections: list[Any] = []
    while len(out) < answers:
        msg = ws.receive_json()
        if msg["type"] == "selection":
            selections.append(msg)
        else:
            assert msg["type"] in ("ack", "error"), msg
            out.append(msg)
    return out, selections


def state_blob(client: TestClient, sid: str) -> bytes:
    store = client.app.state.engine.store  # type: ignore[attr-defined]
    return bytes(client.portal.call(store.load, sid).blob)  # type: ignore[union-attr]


def ofs_reference(frames: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    sel = OFS.start(OFSParams.from_mapping(OFS_PARAMS), NAMES)
    for X, y in frames:
        sel.learn_instances(X, y)
    return codec.encode("ofs", sel.params.to_dict(), sel.snapshot())


# --------------------------------------------------------------------------- acks


def test_acks_come_in_order_and_the_state_includes_every_frame(client: TestClient) -> None:
    create(client, "o")
    X, y = data(60)
    frames = [(X[i : i + 6], y[i : i + 6]) for i in range(0, 60, 6)]
    with connect(client, "o", producer="p") as ws:
        assert first_selection(ws)["version"] == 0
        for k, (Xf, yf) in enumerate(frames):
            if k % 2:
                ws.send_bytes(npy(np.column_stack([Xf, yf])))
            else:
                ws.send_json({"X": Xf.tolist(), "y": yf.tolist()})
        acks, selections = collect(ws, len(frames))
    assert [a["type"] for a in acks] == ["ack"] * 10
    assert [a["ack"] for a in acks] == list(range(1, 11))
    assert [a["instances_seen"] for a in acks] == list(range(6, 61, 6))
    versions = [a["version"] for a in acks]
    assert (
        versions == sorted(versions)
        and versions[-1] == client.get("/v1/streams/o").json()["version"]
    )
    assert selections and selections[-1]["selected"] == [
        f["name"] for f in client.get("/v1/streams/o/selected").json()["features"]
    ]
    assert state_blob(client, "o") == ofs_reference(frames)
    # The producer's next expected seq follows the frames (HTTP shares it).
    r = client.post("/v1/streams/o/instances", json={"producer": "p", "seq": 12, "X": [[0.0] * D]})
    assert r.status_code == 409 and r.json()["expected_seq"] == 11


def test_single_instance_frames_and_explicit_seq(client: TestClient) -> None:
    create(client, "o")
    X, y = data(3)
    with connect(client, "o") as ws:
        first_selection(ws)
        ws.send_json({"x": X[0].tolist(), "y": int(y[0]), "seq": 1})
        ws.send_json({"type": "instances", "x": X[1].tolist(), "y": float(y[1])})
        ws.send_json({"x": X[2].tolist(), "y": y[2], "seq": 7})  # frame 3 says 7
        acks, _ = collect(ws, 3)
    assert [(a["type"], a["seq" if a["type"] == "error" else "ack"]) for a in acks] == [
        ("ack", 1),
        ("ack", 2),
        ("error", 3),
    ]
    assert acks[2]["error"]["type"].endswith("/sequence-conflict")
    assert acks[2]["error"]["expected_seq"] == 3
    assert client.get("/v1/streams/o/status").json()["instances_seen"] == 2


# --------------------------------------------------------------------------- bad frames


BAD_FRAMES: list[tuple[str, Any, str]] = [
    ("nan", '{"X": [[NaN' + ", 0.0" * (D - 1) + ']], "y": [1]}', "invalid-input"),
    ("not json", "{not json", "malformed-body"),
    ("no labels", {"X": [[0.0] * D]}, "invalid-input"),
    # Any two labels are a binary target: a bad label is a third class for OFS.
    ("bad label", {"X": [[0.0] * D] * 2, "y": [2, 3]}, "invalid-input"),
    ("wrong width", {"X": [[0.0] * (D - 1)], "y": [1]}, "invalid-input"),
    ("ragged", {"X": [[0.0] * D, [0.0] * (D - 1)], "y": [1, 1]}, "invalid-input"),
    ("x and X", {"X": [[0.0] * D], "x": [0.0] * D, "y": [1]}, "invalid-input"),
    ("unknown key", {"X": [[0.0] * D], "y": [1], "z": 1}, "invalid-input"),
    ("string number", {"x": ["1"] * D, "y": 1}, "invalid-input"),
    ("npy of text", b"\x93NUMPY garbage", "invalid-input"),
    ("npy without label column", np.zeros((2, 1)), "invalid-input"),
    ("truncated npy", npy(np.zeros((3, D + 1)))[:-8], "invalid-input"),
    ("3-d npy", np.zeros((1, 2, D + 1)), "invalid-input"),
    ("zip that is no sparse matrix", b"PK\x03\x04 garbage", "invalid-input"),
    ("npz of the wrong width", npz(np.ones((2, D))), "invalid-input"),
    ("npz with a NaN", npz(np.full((1, D + 1), np.nan)), "invalid-input"),
    (
        "npz with a bad label",
        npz(np.column_stack([np.ones((2, D)), [2.0, 3.0]])),
        "invalid-input",
    ),
    ("float32 npy with a NaN", np.full((1, D + 1), np.nan, dtype=np.float32), "invalid-input"),
    (
        "float32 npy with a bad label",
        np.column_stack([np.ones((2, D)), [2.0, 3.0]]).astype(np.float32),
        "invalid-input",
    ),
    ("float32 npy of the wrong width", np.ones((2, D), dtype=np.float32), "invalid-input"),
]


def send(ws: WebSocketTestSession, frame: Any) -> None:
    """Send ``frame`` as it comes: an array as .npy, bytes, text, or a document as JSON."""
    if isinstance(frame, np.ndarray):
        ws.send_bytes(npy(frame))
    elif isinstance(frame, bytes):
        ws.send_bytes(frame)
    elif isinstance(frame, str):
        ws.send_text(frame)
    else:
        ws.send_json(frame)


@pytest.mark.parametrize(("case", "frame", "problem"), BAD_FRAMES, ids=[c[0] for c in BAD_FRAMES])
def test_bad_frame_gets_an_error_then_the_socket_still_works(
    client: TestClient, case: str, frame: Any, problem: str
) -> None:
    create(client, "o")
    X, y = data(2)
    with connect(client, "o", producer="p") as ws:
        first_selection(ws)
        ws.send_json({"X": X[:1].tolist(), "y": y[:1].tolist()})
        send(ws, frame)
        ws.send_json({"X": X[1:].tolist(), "y": y[1:].tolist()})
        answers, _ = collect(ws, 3)
    assert [m["type"] for m in answers] == ["ack", "error", "ack"]
    error = answers[1]
    assert error["seq"] == 2
    assert error["error"]["type"] == f"/problems/{problem}"
    assert error["error"]["status"] in (400, 422)
    assert answers[2]["ack"] == 3 and answers[2]["instances_seen"] == 2
    # The bad frame changed nothing: same state as the two good frames alone.
    assert state_blob(client, "o") == ofs_reference([(X[:1], y[:1]), (X[1:], y[1:])])
    # It used up seq 2: a resumed client sending it again sees the same error again.
    with connect(client, "o", producer="p", seq=2) as ws:
        first_selection(ws)
        send(ws, frame)
        again, _ = collect(ws, 1)
    assert again[0] == error
    # Other content under the same (producer, seq) is refused, never acknowledged.
    r = client.post(
        "/v1/streams/o/instances",
        json={"producer": "p", "seq": 2, "X": X[:1].tolist(), "y": y[:1].tolist()},
    )
    assert r.status_code == 409 and r.json()["type"] == "/problems/seq-reused"
    assert state_blob(client, "o") == ofs_reference([(X[:1], y[:1]), (X[1:], y[1:])])


def test_http_replay_of_a_refused_frames_seq_answers_its_problem(client: TestClient) -> None:
    create(client, "o")
    X, _ = data(3)
    bad = {"X": X.tolist(), "y": [1, 2, 3]}  # three classes: OFS takes two
    with connect(client, "o", producer="p") as ws:
        first_selection(ws)
        ws.send_json(bad)
        answers, _ = collect(ws, 1)
    error = answers[0]
    assert error["type"] == "error" and error["seq"] == 1
    # The same content over HTTP under the same (producer, seq): the stored problem.
    r = client.post("/v1/streams/o/instances", json={"producer": "p", "seq": 1, **bad})
    assert r.status_code == error["error"]["status"]
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.headers["idempotent-replay"] == "true" and r.json() == error["error"]


# --------------------------------------------------------------------------- resume


def test_reconnect_and_resume_replays_identical_acks_and_applies_once(
    client: TestClient,
) -> None:
    create(client, "o")
    X, y = data(70)
    frames = [(X[i : i + 10], y[i : i + 10]) for i in range(0, 70, 10)]
    with connect(client, "o", producer="p") as ws:
        first_selection(ws)
        for Xf, yf in frames[:5]:
            ws.send_bytes(npy(np.column_stack([Xf, yf])))
        first, _ = collect(ws, 5)
    # The client saw acks up to 3 only (say), and resumes from 4 re-sending 4..7.
    with connect(client, "o", producer="p", seq=4) as ws:
        first_selection(ws)
        for Xf, yf in frames[3:]:
            ws.send_bytes(npy(np.column_stack([Xf, yf])))
        second, _ = collect(ws, 4)
    assert second[:2] == first[3:5]
    assert [a["ack"] for a in second] == [4, 5, 6, 7]
    assert second[-1]["instances_seen"] == 70
    assert state_blob(client, "o") == ofs_reference(frames)
    # The default start is the producer's next expected seq.
    with connect(client, "o", producer="p") as ws:
        first_selection(ws)
        ws.send_bytes(npy(np.column_stack([X[:1], y[:1]])))
        (ack,), _ = collect(ws, 1)
    assert ack["ack"] == 8


def _encoded(encoding: str, X: np.ndarray, y: np.ndarray) -> tuple[bytes, Any]:
    """A frame's bytes in ``encoding``, and its X as the selector reads it."""
    A = np.column_stack([X, y])
    if encoding == "float32 npy":
        return npy(A.astype(np.float32)), X.astype(np.float32)
    if encoding == "npz":
        import scipy.sparse as sp

        return npz(A), sp.csr_matrix(X)
    return npy(A), X


# A frame of 7,000 instances holds more than 1 MiB: sent again, its digest is taken
# in a worker thread; a fresh frame's is taken where it is applied.
@pytest.mark.parametrize(
    ("encoding", "rows"), [("npy", 10), ("npy", 7_000), ("float32 npy", 10), ("npz", 10)]
)
def test_a_seq_sent_again_is_compared_by_content_and_the_connection_goes_on(
    client: TestClient, encoding: str, rows: int
) -> None:
    create(client, "o")
    X, y = data(3 * rows)
    (one, X1), (two, X2), (other, _) = (
        _encoded(encoding, X[i * rows : (i + 1) * rows], y[i * rows : (i + 1) * rows])
        for i in range(3)
    )
    y1, y2 = y[:rows], y[rows : 2 * rows]
    with connect(client, "o", producer="p") as ws:
        first_selection(ws)
        ws.send_bytes(one)
        ws.send_bytes(two)
        applied, _ = collect(ws, 2)
    assert [a.get("ack") for a in applied] == [1, 2]
    with connect(client, "o", producer="p", seq=1) as ws:
        first_selection(ws)
        ws.send_bytes(other)  # seq 1 again, other content: refused, nothing used up
        ws.send_bytes(two)  # seq 2 again, same content: a retry
        ws.send_bytes(one)  # seq 3: fresh
        answers, _ = collect(ws, 3)
    assert answers[0]["type"] == "error" and answers[0]["seq"] == 1
    assert answers[0]["error"]["type"] == "/problems/seq-reused"
    assert answers[1] == applied[1]
    assert answers[2]["ack"] == 3 and answers[2]["instances_seen"] == 3 * rows
    # A resumed connection resending all three: each answered with the very ack it had.
    with connect(client, "o", producer="p", seq=1) as ws:
        first_selection(ws)
        for frame in (one, two, one):
            ws.send_bytes(frame)
        again, _ = collect(ws, 3)
    assert again == [*applied, answers[2]]
    assert state_blob(client, "o") == ofs_reference([(X1, y1), (X2, y2), (X1, y1)])


def test_npy_frames_of_any_numeric_layout_are_read_alike(client: TestClient) -> None:
    create(client, "a")
    create(client, "b")
    rng = np.random.default_rng(3)
    A = np.column_stack([rng.integers(-3, 4, size=(12, D)), rng.integers(0, 2, size=12)])
    layouts = [A.astype(np.int32), np.asfortranarray(A.astype(np.float64)), A.astype(">f8")]
    for sid, frames in (("a", [A.astype(np.float64)] * 3), ("b", layouts)):
        with connect(client, sid) as ws:
            first_selection(ws)
            for frame in frames:
                ws.send_bytes(npy(frame))
            acks, _ = collect(ws, 3)
        assert [m["type"] for m in acks] == ["ack"] * 3
    assert state_blob(client, "a") == state_blob(client, "b")


def test_float32_frames_decide_as_their_values_in_float64(client: TestClient) -> None:
    # float32 .npy frames are read without a copy and widened by the selector; the
    # decisions are those of the same values sent as float64.
    create(client, "f32")
    X, y = data(25, seed=5)
    A = np.column_stack([X, y]).astype(np.float32)
    frames = [A[:10], A[10:20], A[20], A[21:]]  # one single-instance (1-d) frame
    with connect(client, "f32") as ws:
        first_selection(ws)
        for frame in frames:
            ws.send_bytes(npy(frame))
        acks, _ = collect(ws, len(frames))
    assert [a["type"] for a in acks] == ["ack"] * 4 and acks[-1]["instances_seen"] == 25
    wide = A.astype(np.float64)
    reference = [(wide[:10, :-1], wide[:10, -1]), (wide[10:20, :-1], wide[10:20, -1])]
    reference += [(wide[20:21, :-1], wide[20:21, -1]), (wide[21:, :-1], wide[21:, -1])]
    assert state_blob(client, "f32") == ofs_reference(reference)
    assert wide[:, :-1].tobytes() != X.tobytes()  # the float32 rounding is visible


def test_a_seq_gap_is_an_error_then_close_1008(client: TestClient) -> None:
    create(client, "o")
    X, y = data(1)
    with connect(client, "o", producer="p", seq=5) as ws:
        first_selection(ws)
        ws.send_json({"X": X.tolist(), "y": y.tolist()})
        msg = ws.receive_json()
        assert msg["type"] == "error" and msg["seq"] == 5
        assert msg["error"]["type"] == "/problems/sequence-conflict"
        assert msg["error"]["expected_seq"] == 1
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert closed.value.code == 1008
    assert client.get("/v1/streams/o/status").json()["instances_seen"] == 0


def test_http_applied_requests_are_acknowledged_on_resume(client: TestClient) -> None:
    create(client, "o")
    X, y = data(2)
    r = client.post(
        "/v1/streams/o/instances",
        json={"producer": "p", "seq": 1, "X": X[:1].tolist(), "y": y[:1].tolist()},
    )
    assert r.status_code == 200
    with connect(client, "o", producer="p", seq=1) as ws:
        first_selection(ws)
        ws.send_json({"X": X[:1].tolist(), "y": y[:1].tolist()})
        ws.send_json({"X": X[1:].tolist(), "y": y[1:].tolist()})
        acks, _ = collect(ws, 2)
    assert acks == [
        {"type": "ack", "ack": 1, "version": 1, "instances_seen": 1},
        {"type": "ack", "ack": 2, "version": 2, "instances_seen": 2},
    ]


# --------------------------------------------------------------------------- handshake


def test_unknown_stream_gets_a_404_problem_then_close_1008(client: TestClient) -> None:
    with connect(client, "missing") as ws:
        msg = ws.receive_json()
        assert msg["type"] == "error" and msg["seq"] is None
        assert msg["error"]["status"] == 404
        assert msg["error"]["type"] == "/problems/stream-not-found"
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert closed.value.code == 1008


@pytest.mark.parametrize("query", [{"seq": 0}, {"seq": "x"}, {"producer": ""}])
def test_invalid_query_gets_a_422_problem_then_close_1008(
    client: TestClient, query: dict[str, Any]
) -> None:
    create(client, "o")
    with connect(client, "o", **query) as ws:
        msg = ws.receive_json()
        assert msg["type"] == "error" and msg["error"]["type"] == "/problems/invalid-input"
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert closed.value.code == 1008


# --------------------------------------------------------------------------- subscriptions


def test_two_subscribers_both_see_a_change_made_over_http(client: TestClient) -> None:
    create(client, "o")
    X, y = data(30)
    with connect(client, "o") as a, connect(client, "o") as b:
        assert first_selection(a)["selected"] == first_selection(b)["selected"] == []
        r = client.post("/v1/streams/o/instances", json={"X": X.tolist(), "y": y.tolist()})
        assert r.status_code == 200
        body = r.json()
        for ws in (a, b):
            msg = ws.receive_json()
            assert msg["type"] == "selection"
            assert msg["version"] == body["version"] == 1
            assert msg["selected"] == body["selected"] and len(msg["selected"]) == 5


def listeners(client: TestClient, sid: str) -> int:
    store = client.app.state.engine.store  # type: ignore[attr-defined]
    if isinstance(store, InMemoryStore):
        return store.subscribers(sid)
    assert isinstance(store, RedisStore)
    return store.hub.listeners(stream_keys(store.prefix, sid).channel)


def test_closed_sockets_leave_no_subscription_behind(client: TestClient) -> None:
    create(client, "o")
    with connect(client, "o") as a, connect(client, "o") as b:
        first_selection(a)
        first_selection(b)
        assert listeners(client, "o") == 2
    with connect(client, "missing") as ws:
        ws.receive_json()
    deadline = time.monotonic() + 5
    while listeners(client, "o") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert listeners(client, "o") == 0


def test_a_producer_sees_selection_changes_of_other_connections(client: TestClient) -> None:
    create(client, "o")
    X, y = data(30)
    with connect(client, "o", producer="a") as a, connect(client, "o", producer="b") as b:
        first_selection(a)
        first_selection(b)
        b.send_json({"X": X.tolist(), "y": y.tolist()})
        (ack,), mine = collect(b, 1)
        assert ack["ack"] == 1 and mine[0]["version"] == 1
        theirs = a.receive_json()
        assert theirs == mine[0]


def test_feature_stream_socket_sends_selections_and_refuses_frames(
    client: TestClient, wdbc: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc
    r = client.post("/v1/streams", json={"id": "f", "algorithm": "saola", "target": y.tolist()})
    assert r.status_code == 201
    with connect(client, "f") as ws:
        # A connection that names no producer is told the one it got, and its first seq.
        support.check_first_message(first_selection(ws))
        ws.send_json({"x": [1.0], "y": 1})
        msg = ws.receive_json()
        assert msg["type"] == "error" and msg["error"]["type"] == "/problems/wrong-stream-kind"
        seen = []
        for i in range(30):
            feats = [{"name": f"f{i}", "values": X[i].tolist()}]
            r = client.post("/v1/streams/f/features", json={"features": feats})
            if r.json()["decisions"][0]["accepted"] or r.json()["decisions"][0]["evicted"]:
                seen.append((r.json()["version"], r.json()["selected"]))
        got = []
        while len(got) < len(seen):
            msg = ws.receive_json()
            got.append((msg["version"], msg["selected"]))
    assert got == seen


def test_a_selection_larger_than_the_limit_comes_as_a_notice(settings: Settings) -> None:
    """Over ws_selection_max_features, a selection message names its version and size
    only (the first message too); the client reads the rest with GET /selected."""
    bounded = settings.model_copy(update={"ws_selection_max_features": 3})
    with TestClient(create_app(bounded)) as client:
        create(client, "o")  # OFS selecting 5
        X, y = data(30)
        with connect(client, "o", producer="p") as mine, connect(client, "o") as theirs:
            assert first_selection(mine)["selected"] == first_selection(theirs)["selected"] == []
            mine.send_json({"X": X.tolist(), "y": y.tolist()})
            (ack,), selections = collect(mine, 1)
            notice = {"type": "selection", "version": 1, "size": 5, "truncated": True}
            assert ack["ack"] == 1 and selections == [notice]
            assert theirs.receive_json() == notice
        with connect(client, "o", producer="p") as again:
            assert again.receive_json() == {**notice, "producer": "p", "seq": 2}
        assert len(client.get("/v1/streams/o/selected").json()["features"]) == 5


# --------------------------------------------------------------------------- algorithms


def test_ofs_one_frame_of_m_equals_m_single_instance_frames(client: TestClient) -> None:
    create(client, "one")
    create(client, "many")
    X, y = data(25)
    with connect(client, "one") as ws:
        first_selection(ws)
        ws.send_bytes(npy(np.column_stack([X, y])))
        collect(ws, 1)
    with connect(client, "many") as ws:
        first_selection(ws)
        for i in range(25):
            ws.send_json({"x": X[i].tolist(), "y": y[i]})
        collect(ws, 25)
    assert state_blob(client, "one") == state_blob(client, "many")
    a = client.get("/v1/streams/one/selected").json()["features"]
    b = client.get("/v1/streams/many/selected").json()["features"]
    assert a == b


def test_sparse_frames_decide_exactly_as_dense_frames(client: TestClient) -> None:
    # Sparse frames (.npz, labels in the last column) reach OFS as sparse rows;
    # the state equals that of the same rows sent dense, bit for bit.
    create(client, "dense")
    create(client, "sparse")
    X, y = data(40, seed=3)
    X[np.abs(X) < 0.8] = 0.0  # about half the entries are zeros
    frames = [(X[i : i + 8], y[i : i + 8]) for i in range(0, 40, 8)]
    with connect(client, "dense") as ws:
        first_selection(ws)
        for Xf, yf in frames:
            ws.send_bytes(npy(np.column_stack([Xf, yf])))
        collect(ws, len(frames))
    with connect(client, "sparse", producer="p") as ws:
        first_selection(ws)
        for Xf, yf in frames:
            ws.send_bytes(npz(np.column_stack([Xf, yf])))
        acks, _ = collect(ws, len(frames))
    assert [a["type"] for a in acks] == ["ack"] * 5
    assert [a["instances_seen"] for a in acks] == [8, 16, 24, 32, 40]
    assert state_blob(client, "sparse") == state_blob(client, "dense") == ofs_reference(frames)
    # FSDS takes sparse frames too (unsupervised: no label column).
    create(client, "s", "fsds", FSDS_PARAMS)
    with connect(client, "s") as ws:
        first_selection(ws)
        ws.send_bytes(npz(X[:10]))
        (ack,), _ = collect(ws, 1)
    assert ack["instances_seen"] == 10
    sel = FSDS.start(FSDSParams.from_mapping(FSDS_PARAMS), NAMES)
    sel.learn_instances(X[:10])
    assert state_blob(client, "s") == codec.encode("fsds", sel.params.to_dict(), sel.snapshot())


def test_fsds_records_the_frame_boundaries(client: TestClient) -> None:
    create(client, "s", "fsds", FSDS_PARAMS)
    X, _ = data(20)
    sizes = [3, 5, 1, 7, 4]
    bounds = np.cumsum([0, *sizes])
    with connect(client, "s", producer="p") as ws:
        first_selection(ws)
        for lo, hi in itertools.pairwise(bounds):
            ws.send_bytes(npy(X[lo:hi]))  # unsupervised: no label column
        acks, _ = collect(ws, len(sizes))
    assert [a["instances_seen"] for a in acks] == list(bounds[1:])
    events = client.get("/v1/streams/s/events", params={"limit": 1000}).json()["events"]
    batches = [e for e in events if e["type"] == "batch"]
    assert [e["instances"] for e in batches] == sizes
    assert [e["seq"] for e in batches] == [1, 2, 3, 4, 5]
    assert all(e["producer"] == "p" for e in batches)
    sel = FSDS.start(FSDSParams.from_mapping(FSDS_PARAMS), NAMES)
    for lo, hi in itertools.pairwise(bounds):
        sel.learn_instances(X[lo:hi])
    assert state_blob(client, "s") == codec.encode("fsds", sel.params.to_dict(), sel.snapshot())


# --------------------------------------------------------------------------- backpressure


@pytest.fixture
def slow_client(settings: Settings) -> Iterator[TestClient]:
    """A server whose commits take 20 ms, with at most 4 frames in flight per socket."""
    bounded = settings.model_copy(update={"ws_max_inflight": 4, "ws_group_max_frames": 64})
    store = open_store(bounded)
    commit = store.commit

    async def slow_commit(*args: Any, **kwargs: Any) -> int:
        await asyncio.sleep(0.02)
        return await commit(*args, **kwargs)

    store.commit = slow_commit  # type: ignore[method-assign]
    with TestClient(create_app(bounded, store=store)) as c:
        yield c


def test_backpressure_bounds_the_frames_in_flight(slow_client: TestClient) -> None:
    client = slow_client
    create(client, "o")
    X, y = data(40)
    with connect(client, "o") as ws:
        first_selection(ws)
        for i in range(40):  # all sent at once, without waiting for acks
            ws.send_bytes(npy(np.column_stack([X[i : i + 1], y[i : i + 1]])))
        acks, _ = collect(ws, 40)
    assert [a["ack"] for a in acks] == list(range(1, 41))
    stats = client.app.state.ws_sessions.stats  # type: ignore[attr-defined]
    # The server never held more than 4 unanswered frames, and did reach the bound...
    assert stats.max_inflight == 4
    # ...and committed several frames at a time (fewer commits than frames).
    assert stats.frames == 40 and stats.groups < 40
    assert client.get("/v1/streams/o").json()["version"] == stats.groups
    assert state_blob(client, "o") == ofs_reference(
        [(X[i : i + 1], y[i : i + 1]) for i in range(40)]
    )


# --------------------------------------------------------------------------- closing


def test_store_unavailable_closes_1013_and_applies_nothing(settings: Settings) -> None:
    store = open_store(settings)

    async def down(*args: Any, **kwargs: Any) -> int:
        raise StoreUnavailable("the store is down")

    with TestClient(create_app(settings, store=store)) as client:
        create(client, "o")
        X, y = data(1)
        store.commit = down  # type: ignore[method-assign]
        with connect(client, "o") as ws:
            first_selection(ws)
            ws.send_json({"X": X.tolist(), "y": y.tolist()})
            msg = ws.receive_json()
            assert msg["type"] == "error" and msg["error"]["type"] == "/problems/store-unavailable"
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_json()
        assert closed.value.code == 1013
        assert client.get("/v1/streams/o/status").json()["instances_seen"] == 0


def test_server_shutdown_answers_what_was_read_then_closes_1001(client: TestClient) -> None:
    create(client, "o")
    X, y = data(3)
    sessions = client.app.state.ws_sessions  # type: ignore[attr-defined]
    with connect(client, "o") as ws, connect(client, "o") as idle:
        first_selection(ws)
        first_selection(idle)
        for i in range(3):
            ws.send_json({"x": X[i].tolist(), "y": y[i]})
        acks, _ = collect(ws, 3)
        assert len(sessions) == 2
        client.portal.call(sessions.close_all)  # type: ignore[union-attr]
        for sock in (ws, idle):
            with pytest.raises(WebSocketDisconnect) as closed:
                while True:
                    sock.receive_json()
            assert closed.value.code == 1001
    assert len(sessions) == 0
    assert [a["ack"] for a in acks] == [1, 2, 3]
