"""The client's I/O-free parts: chunk planning, bodies, the frame window, numbering."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

import featurestream_client as fc
from featurestream_client import _core, _data, _groups, _inputs, _instances, _npy, _writes, ws
from featurestream_client._core import Call, Reply
from featurestream_client._writes import Chunking, Producer, StreamCore
from featurestream_client.models import Selection, StreamInfo


def run(op: Any, answer: Any) -> tuple[Any, list[Call]]:
    """Drive an operation with ``answer(call) -> Reply | Exception``: (result, calls)."""
    calls: list[Call] = []
    try:
        call = next(op)
        while True:
            calls.append(call)
            reply = answer(call)
            call = op.throw(reply) if isinstance(reply, Exception) else op.send(reply)
    except StopIteration as stop:
        return stop.value, calls


def ok(body: dict[str, Any], **headers: str) -> Reply:
    return Reply(200, headers, json.dumps(body).encode())


# ---------------------------------------------------------------- chunks and bodies


def test_chunks_respect_columns_bytes_and_header_budgets() -> None:
    cols = _data.as_columns(np.ones((10, 7)), [f"c{i}" for i in range(7)])
    spans = lambda plan: [(c.start, c.stop) for c in plan]  # noqa: E731
    assert spans(_data.plan_chunks(cols, 3, 10**9, 10**9)) == [(0, 3), (3, 6), (6, 7)]
    assert spans(_data.plan_chunks(cols, 100, 160, 10**9)) == [(0, 2), (2, 4), (4, 6), (6, 7)]
    assert spans(_data.plan_chunks(cols, 100, 10**9, 6)) == [(0, 2), (2, 4), (4, 6), (6, 7)]
    # A column larger than the budget still travels, alone.
    assert spans(_data.plan_chunks(cols, 100, 1, 10**9)) == [(i, i + 1) for i in range(7)]


def npz_parts(content: bytes) -> tuple[np.ndarray, list[str] | None]:
    """The dense matrix and the ``names.npy`` member (None without one) of an .npz body."""
    matrix = sp.load_npz(io.BytesIO(content)).toarray()
    with zipfile.ZipFile(io.BytesIO(content)) as zf:
        if "names.npy" not in zf.namelist():
            return matrix, None
        names = np.load(io.BytesIO(zf.read("names.npy")), allow_pickle=False)
    assert names.dtype.kind == "U" and names.ndim == 1
    return matrix, names.tolist()


def test_dense_bodies_are_npy_unless_a_name_cannot_be_a_header() -> None:
    X = np.arange(12.0).reshape(4, 3)
    cols = _data.as_columns(X, ["a", "b", "c"])
    body = _data.features_body(cols, _data.Chunk(1, 3), "p", 7)
    assert body.headers["Content-Type"] == "application/x-npy"
    assert body.headers["X-Feature-Names"] == "b,c" and body.headers["X-Seq"] == "7"
    assert body.headers["X-Producer"] == "p"
    np.testing.assert_array_equal(np.load(io.BytesIO(body.content)), X[:, 1:])
    for bad in ("a,b", " a", "é", "tab\there"):
        assert not _data.header_safe(bad)
        cols = _data.as_columns(X, [bad, "b", "c"])
        body = _data.features_body(cols, _data.Chunk(0, 3), "p", 1)
        # The names travel inside an .npz archive instead.
        assert body.headers["Content-Type"] == "application/x-npz"
        assert "X-Feature-Names" not in body.headers
        assert body.headers["X-Seq"] == "1" and body.headers["X-Producer"] == "p"
        matrix, names = npz_parts(body.content)
        np.testing.assert_array_equal(matrix, X)
        assert names == [bad, "b", "c"]
        doc = json.loads(_data.features_json_body(cols, _data.Chunk(0, 3), "p", 1).content)
        assert doc["features"][0] == {"name": bad, "values": X[:, 0].tolist()}
        assert doc["seq"] == 1 and doc["producer"] == "p"


def test_sparse_bodies_are_npz_with_the_names_inside() -> None:
    m = sp.coo_matrix(([3.0, 1.0, 2.0], ([2, 0, 2], [0, 0, 1])), shape=(4, 2))
    cols = _data.as_columns(m)
    body = _data.features_body(cols, _data.Chunk(0, 2), "p", 5)
    assert body.headers["Content-Type"] == "application/x-npz"
    matrix, names = npz_parts(body.content)
    np.testing.assert_array_equal(matrix, m.toarray())
    assert names is None  # unnamed: the server names them "<producer>:<seq>:<i>"
    named = _data.as_columns(m, ["größe, in cm", "β"])
    matrix, names = npz_parts(_data.features_body(named, _data.Chunk(1, 2), "p", 6).content)
    np.testing.assert_array_equal(matrix, m.toarray()[:, 1:])
    assert names == ["β"]


def test_sparse_json_bodies_carry_sorted_indices_and_default_names() -> None:
    m = sp.coo_matrix(([3.0, 1.0, 2.0], ([2, 0, 2], [0, 0, 1])), shape=(4, 2))
    cols = _data.as_columns(m)
    doc = json.loads(_data.features_json_body(cols, _data.Chunk(0, 2), "p", 5).content)
    assert doc["features"] == [
        {"name": "p:5:0", "indices": [0, 2], "data": [1.0, 3.0]},
        {"name": "p:5:1", "indices": [2], "data": [2.0]},
    ]


def test_npz_chunks_ignore_the_header_budget() -> None:
    m = sp.random(10, 50, density=0.2, format="csc", random_state=0)
    names = [f"column-{j:04d}" for j in range(50)]
    cols = _data.as_columns(m, names)
    # The names are inside the body: a header budget of 20 bytes cuts nothing.
    assert _data.plan_chunks(cols, 1000, 10**9, 20) == [_data.Chunk(0, 50)]
    dense = _data.as_columns(m.toarray(), names)
    assert len(_data.plan_chunks(dense, 1000, 10**9, 20)) == 50


def test_groups_are_planned_whole() -> None:
    groups = _groups.as_groups({"a": np.ones((4, 3)), "b": np.ones((4, 2)), "c": np.ones((4, 4))})
    plan = _groups.plan_groups(groups, 5, 10**9)
    assert [[g.name for g in req] for req in plan] == [["a", "b"], ["c"]]
    with pytest.raises(fc.InvalidInput):
        _groups.as_groups([("a", np.ones((4, 1))), ("b", np.ones((5, 1)))])
    with pytest.raises(fc.InvalidInput):
        _groups.as_groups([("a", np.ones((4, 1))), ("a", np.ones((4, 1)))])


def frames_as_lists(frames: Any) -> list[tuple[list[list[float]], list[float] | None]]:
    return [(X.tolist(), None if y is None else y.tolist()) for X, y in frames]


def test_frames_from_arrays_rows_pairs_and_batches() -> None:
    X = np.arange(10.0).reshape(5, 2)
    y = np.array([0.0, 1, 0, 1, 1])
    from_array = frames_as_lists(_instances.iter_frames(X, y, 2))
    assert from_array == [
        ([[0.0, 1.0], [2.0, 3.0]], [0.0, 1.0]),
        ([[4.0, 5.0], [6.0, 7.0]], [0.0, 1.0]),
        ([[8.0, 9.0]], [1.0]),
    ]
    assert frames_as_lists(_instances.iter_frames(zip(X, y, strict=True), None, 2)) == from_array
    batches = iter([(X[:4], y[:4]), (X[4:], y[4:])])
    assert frames_as_lists(_instances.iter_frames(batches, None, 2)) == from_array
    assert frames_as_lists(_instances.iter_frames(iter(X), None, 5)) == [(X.tolist(), None)]
    # A row of another width travels alone (for the server to refuse).
    odd = [X[0], X[1], np.ones(3), X[2]]
    assert [f[0].shape for f in _instances.iter_frames(iter(odd), None, 3)] == [
        (2, 2),
        (1, 3),
        (1, 2),
    ]
    with pytest.raises(fc.InvalidInput):
        list(_instances.iter_frames(iter([(X[0], 1.0), X[1]]), None, 2))


def test_targets_travel_as_numbers_or_as_given_labels() -> None:
    assert _core.target_list([True, False]) == [1.0, 0.0]
    # Class names are sent as they are: the server keeps them (docs/algorithms.md,
    # "Targets"); coding them here made the alphabet change the selection.
    assert _core.target_list(np.array(["yes", "no", "yes"])) == ["yes", "no", "yes"]
    for bad in ([], [1.0, float("nan")], ["a", None], np.array(["a", ""])):
        with pytest.raises(fc.InvalidInput):
            _core.target_list(bad)


# ---------------------------------------------------------------- the frame window


def test_the_window_bounds_unanswered_frames_and_resumes_from_the_first() -> None:
    batches = iter([(np.array([[float(i)]]), np.array([1.0])) for i in range(6)])
    feed = ws.InstanceFeed(batches, first_seq=10, window=2, binary=False)
    assert [f.seq for f in feed.take()] == [10, 11] and feed.take() == []
    feed.receive(json.dumps({"type": "ack", "ack": 10, "version": 3, "instances_seen": 1}))
    assert [f.seq for f in feed.take()] == [12]
    assert feed.resume_seq() == 11 and [f.seq for f in feed.unanswered()] == [11, 12]
    # After a reconnect, a repeated ack changes nothing.
    feed.receive(json.dumps({"ack": 10, "version": 3, "instances_seen": 1}))
    feed.receive(json.dumps({"ack": 11, "version": 4, "instances_seen": 2}))
    feed.receive(json.dumps({"type": "selection", "selected": ["a"], "version": 4}))
    assert feed.selection is not None and feed.selection.names == ["a"]
    assert json.loads(feed.take()[0].data) == {"seq": 13, "X": [[3.0]], "y": [1.0]}


def test_labelled_frames_are_binary_unlabelled_ones_as_the_algorithm_says() -> None:
    X = np.arange(6.0).reshape(3, 2)
    labelled = ws.InstanceFeed(iter([(X, np.array([1.0, -1.0, 1.0]))]), first_seq=1)
    frame = labelled.take()[0].data
    assert isinstance(frame, (bytes, bytearray))  # a binary frame, not a text one
    np.testing.assert_array_equal(np.load(io.BytesIO(frame)), np.column_stack([X, [1, -1, 1]]))
    # To an unsupervised stream every unlabelled frame is .npy, the first one too,
    # and the window fills at once: nothing waits for an answer.
    unlabelled = ws.InstanceFeed(iter([(X, None)] * 3), first_seq=4, supervised=False)
    frames = unlabelled.take()
    assert [f.seq for f in frames] == [4, 5, 6]
    assert all(isinstance(f.data, (bytes, bytearray)) for f in frames)
    for f in frames:
        np.testing.assert_array_equal(np.load(io.BytesIO(f.data)), X)  # type: ignore[arg-type]
    # To a supervised stream they stay JSON (it refuses them: labels are missing),
    # a refusal changes nothing about the next ones.
    refused = ws.InstanceFeed(iter([(X, None)] * 3), first_seq=1, on_error="skip")
    first = refused.take()
    assert [json.loads(f.data) for f in first] == [{"seq": i, "X": X.tolist()} for i in (1, 2, 3)]
    problem = {"status": 422, "detail": "ofs needs labels y for every instance."}
    refused.receive(json.dumps({"type": "error", "error": problem, "seq": 1}))
    assert len(refused.errors) == 1 and [f.seq for f in refused.unanswered()] == [2, 3]
    # binary=False sends every frame as JSON, whatever the algorithm.
    plain = ws.InstanceFeed(iter([(X, None)]), first_seq=1, binary=False, supervised=False)
    assert json.loads(plain.take()[0].data) == {"seq": 1, "X": X.tolist()}


def test_the_catalogue_is_read_once_and_supervised_unless_it_says_otherwise() -> None:
    listed = {
        "algorithms": [
            {"name": "fsds", "kind": "instances", "supervised": False},
            {"name": "ofs", "kind": "instances", "supervised": True},
            {"name": "legacy", "kind": "instances"},  # a server older than the field
        ]
    }
    catalogue = _core.Catalogue()
    flag, calls = run(catalogue.supervised_op("fsds"), lambda call: ok(listed))
    assert flag is False and [(c.method, c.path) for c in calls] == [("GET", "/v1/algorithms")]
    for name, expected in (("fsds", False), ("ofs", True), ("legacy", True)):
        flag, calls = run(catalogue.supervised_op(name), lambda call: ok(listed))
        assert flag is expected and calls == []
    # An algorithm the cached catalogue does not list: read it again, once.
    flag, calls = run(catalogue.supervised_op("newer"), lambda call: ok(listed))
    assert flag is True and len(calls) == 1
    assert fc.Algorithm.from_json({"name": "x", "kind": "features"}).supervised is True


def test_a_refused_frame_stops_new_frames_when_raising() -> None:
    frames = iter([(np.ones((1, 1)), np.ones(1))] * 5)
    feed = ws.InstanceFeed(frames, first_seq=1, window=3, on_error="raise")
    feed.take()
    problem = {"type": "/problems/invalid-input", "status": 422, "detail": "bad"}
    feed.receive(json.dumps({"type": "error", "error": problem, "seq": 2}))
    assert isinstance(feed.failure, fc.InvalidInput) and feed.failure.seq == 2  # type: ignore[attr-defined]
    assert feed.take() == [] and not feed.done
    feed.receive(json.dumps({"ack": 1, "version": 1, "instances_seen": 1}))
    feed.receive(json.dumps({"ack": 3, "version": 2, "instances_seen": 2}))
    assert feed.done and feed.next_seq == 4 and feed.result().seqs == (1, 3)


def test_an_error_about_the_connection_is_raised() -> None:
    feed = ws.InstanceFeed(iter([]), first_seq=1)
    problem = {"type": "/problems/stream-not-found", "status": 404, "detail": "gone"}
    with pytest.raises(fc.StreamNotFound):
        feed.receive(json.dumps({"type": "error", "error": problem, "seq": None}))
    with pytest.raises(fc.StreamNotFound):
        ws.selection_message(json.dumps({"type": "error", "error": problem, "seq": None}))


def test_websocket_urls_and_selection_messages() -> None:
    assert ws.ws_url("https://h:1/base/", "/v1/streams/a/ws", {"seq": 3, "producer": None}) == (
        "wss://h:1/base/v1/streams/a/ws?seq=3"
    )
    msg = {"selected": ["a"], "version": 2, "features": [{"name": "a", "score": 0.5}]}
    assert Selection.from_message(msg).features[0].score == 0.5
    assert Selection.from_message({"selected": ["a"], "version": 2}).names == ["a"]


# ---------------------------------------------------------------- numbering


def core(next_seq: int | None = 1) -> StreamCore:
    info = StreamInfo("s", "saola", "features", {}, 0, n_instances=3)
    return StreamCore("s", Producer("p", next_seq), Chunking(), info)


def test_a_refused_write_keeps_its_seq_and_so_does_an_unknown_outcome() -> None:
    c = core()
    refused = fc.InvalidInput("bad", status=422)
    with pytest.raises(fc.InvalidInput):
        run(c.write_op(lambda seq: Call("POST", f"/{seq}")), lambda call: refused)
    assert c.producer.next_seq == 1
    unknown = fc.ConnectionFailed("lost")
    with pytest.raises(fc.ConnectionFailed) as exc:
        run(c.write_op(lambda seq: Call("POST", f"/{seq}")), lambda call: unknown)
    # Sent again, the write keeps its seq (the server applies it at most once).
    assert c.producer.next_seq == 1 and c.producer.unknown == 1
    assert exc.value.outcome_unknown and "is unknown" in str(exc.value)
    # Another write instead: the server says the seq is taken, and it goes on after it.
    taken = fc.SeqReused("taken", status=409, problem={"expected_seq": 2, "producer": "p"})
    sent: list[str] = []

    def answer(call: Call) -> Any:
        sent.append(call.path)
        return taken if call.path == "/1" else Reply(200, {}, b"{}")

    run(c.write_op(lambda seq: Call("POST", f"/{seq}")), answer)
    assert sent == ["/1", "/2"] and c.producer.next_seq == 3 and c.producer.unknown is None


def test_resync_probes_with_a_seq_no_producer_reaches() -> None:
    c = core(None)
    gap = fc.SequenceConflict("gap", status=409, problem={"expected_seq": 8, "producer": "p"})

    def answer(call: Call) -> Any:
        if call.json is not None and call.json.get("seq") == _writes.PROBE_SEQ:
            assert call.json["features"] == [] and call.json["producer"] == "p"
            return gap
        return ok({"version": 9, "seq": 8, "decisions": [], "selected": []})

    reply, calls = run(c.write_op(lambda seq: Call("POST", "/w", json={"seq": seq})), answer)
    assert [call.json["seq"] for call in calls] == [_writes.PROBE_SEQ, 8]
    assert c.producer.next_seq == 9 and reply.json()["seq"] == 8


@given(
    m=st.integers(1, 40),
    d=st.integers(1, 30),
    labelled=st.booleans(),
    strided=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_npy_frames_are_the_bytes_numpy_saves(
    m: int, d: int, labelled: bool, strided: bool, seed: int
) -> None:
    # Written in place, a frame must be byte for byte what np.save writes for the
    # stacked rows, whatever the layout the rows came in (a slice of a wider array).
    rng = np.random.default_rng(seed)
    wide = rng.normal(size=(m, 2 * d)) * 10.0 ** rng.integers(-300, 300)
    X = wide[:, ::2] if strided else np.ascontiguousarray(wide[:, :d])
    y = rng.choice([-1.0, 1.0], size=m) if labelled else None
    buf = io.BytesIO()
    np.save(buf, X if y is None else np.column_stack([X, y]))
    assert bytes(_npy.npy_frame(X, y)) == buf.getvalue()
    assert _npy.npy_bytes(X) == bytes(_npy.npy_frame(X))


def test_finiteness_is_checked_exactly_where_sums_overflow() -> None:
    big = np.full((64, 100), 1e308)
    assert _inputs._all_finite(big)  # its row sums overflow: every value is looked at
    big[63, 99] = np.inf
    assert not _inputs._all_finite(big)
    small = np.ones((64, 100))
    small[5, 7] = np.nan
    with pytest.raises(fc.InvalidInput, match="'#7' contains NaN"):
        _inputs.finite_or_raise(small, None, "Column")
