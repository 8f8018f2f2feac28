"""The sync client over HTTP against a live server, on the memory store and on Redis."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import featurestream_client as fc
from featurestream.selectors import SAOLA, SAOLAParams
from featurestream_client import Client
from tests import support
from tests.client.live import LiveServer

NAMES = support.names(30)


def serial_saola(X: np.ndarray, y: np.ndarray, names: list[str], **params: float) -> SAOLA:
    """The selector run in process on columns of X (n x b), for comparison."""
    sel = SAOLA.start(SAOLAParams(**params), y)
    sel.learn_features(names, np.ascontiguousarray(X.T))
    return sel


# ---------------------------------------------------------------- streams


def test_create_describe_list_and_delete_a_stream(client: Client, sid: str) -> None:
    _, y = support.wdbc()
    s = client.create_stream("saola", target=y, params={"alpha": 0.05}, id=sid)
    assert s.id == sid and s.info is not None
    assert s.info.kind == "features" and s.info.n_instances == 569 and s.info.version == 0
    assert s.info.params["alpha"] == 0.05 and s.info.params["test"] == "fisher_z"
    assert sid in {info.id for info in client.streams()}
    assert client.get_stream(sid).info == s.info
    s.delete()
    with pytest.raises(fc.StreamNotFound) as exc:
        client.get_stream(sid)
    assert exc.value.status == 404 and exc.value.stream_id == sid


def test_created_stream_without_id_gets_a_generated_one(client: Client) -> None:
    s = client.create_stream("saola", target=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert s.id.startswith("s-")
    assert client.get_stream(s.id).info is not None
    s.delete()


def test_algorithms_lists_kinds_and_defaults(client: Client) -> None:
    algos = {a.name: a for a in client.algorithms()}
    assert algos["saola"].kind == "features" and algos["ofs"].kind == "instances"
    assert algos["saola"].defaults["alpha"] == 0.01
    assert algos["group_saola"].supports_groups


def test_string_labels_become_codes(client: Client, sid: str) -> None:
    s = client.create_stream("saola", target=["no", "yes", "yes", "no", "yes", "no"], id=sid)
    assert s.info is not None and s.info.n_instances == 6


# ---------------------------------------------------------------- features


def test_dense_columns_decide_like_the_selector_in_process(
    client: Client, sid: str, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    s = client.create_stream("saola", target=y, params={"alpha": 0.01}, id=sid)
    result = s.add_features(X, names=NAMES)
    case = support.expected()["feature_streams"]["saola"]
    assert list(result.selected) == [f"f{i}" for i in case["selected"]]
    assert [d.name for d in result.decisions] == NAMES
    serial = serial_saola(X, y, NAMES, alpha=0.01)
    assert list(result.selected) == list(serial.selected())
    assert result.version == 1 and result.seqs == (1,) and not result.replayed
    sel = s.selected()
    assert sel.names == list(result.selected) and sel.version == 1
    assert all(f.score is not None for f in sel.features)


def test_chunked_requests_equal_one_request(
    client: Client, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    outcomes = []
    for kwargs in ({}, {"chunk_columns": 1}, {"chunk_columns": 7}, {"chunk_bytes": 3 * 569 * 8}):
        s = client.create_stream("saola", target=y)
        result = s.add_features(X, names=NAMES, **kwargs)
        outcomes.append((result.decisions, result.selected, s.selected().features))
        expected_requests = {
            "chunk_columns": lambda k: -(-30 // k),
            "chunk_bytes": lambda k: 10,
        }
        if kwargs:
            key, value = next(iter(kwargs.items()))
            assert len(result.seqs) == expected_requests[key](value)
            assert result.seqs == tuple(range(1, len(result.seqs) + 1))
            assert result.version == len(result.seqs)
        s.delete()
    assert all(o == outcomes[0] for o in outcomes[1:])


def test_header_budget_splits_binary_requests(
    live: LiveServer, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    with Client(live.url, max_header_bytes=40) as c:
        s = c.create_stream("saola", target=y)
        result = s.add_features(X, names=NAMES)
        # 'f0,'..'f9,' take 3 bytes, 'f10,'.. 4: 12 + 10 + 8 names per 40-byte header.
        assert len(result.seqs) == 3
        assert [d.name for d in result.decisions] == NAMES
        assert list(result.selected) == ["f21", "f27"]


def test_dataframe_and_sparse_inputs_decide_like_dense_arrays(
    client: Client, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    # Sparsify: zero the smaller half of each column, so the sparse path carries real gaps.
    Xs = np.where(np.median(X, axis=0) < X, X, 0.0)
    outcomes = []
    for data, names in (
        (Xs, NAMES),
        (pd.DataFrame(Xs, columns=NAMES), None),
        (sp.csr_matrix(Xs), NAMES),
        (sp.csc_matrix(Xs), NAMES),
        (Xs.tolist(), NAMES),
    ):
        s = client.create_stream("saola", target=y, params={"alpha": 0.05})
        result = s.add_features(data, names=names, chunk_columns=8)
        outcomes.append((result.decisions, result.selected))
        s.delete()
    assert all(o == outcomes[0] for o in outcomes[1:])
    assert outcomes[0][1] == tuple(serial_saola(Xs, y, NAMES, alpha=0.05).selected())


def test_names_that_cannot_travel_in_a_header_go_inside_an_npz(
    client: Client, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    odd = [f"f{i}, mean" if i % 2 else f" f{i}é " for i in range(30)]
    a = client.create_stream("saola", target=y)
    b = client.create_stream("saola", target=y)
    plain = a.add_features(X, names=NAMES)
    fancy = b.add_features(X, names=odd)
    assert [d.name for d in fancy.decisions] == odd
    assert [d.accepted for d in fancy.decisions] == [d.accepted for d in plain.decisions]
    assert list(fancy.selected) == [odd[NAMES.index(n)] for n in plain.selected]


def test_unnamed_columns_get_the_servers_seq_names(client: Client) -> None:
    y = np.arange(10.0)
    s = client.create_stream("saola", target=y)
    dense = s.add_features(np.column_stack([y, -y]))
    sparse = s.add_features(sp.csr_matrix(np.column_stack([y * 0, y**2])))
    p = s.producer
    assert [d.name for d in dense.decisions] == [f"{p}:1:0", f"{p}:1:1"]
    assert [d.name for d in sparse.decisions] == [f"{p}:2:0", f"{p}:2:1"]
    assert sparse.decisions[0].reason == "constant"


def test_groups_from_mapping_or_pairs_are_never_split(
    client: Client, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    case = support.expected()["feature_streams"]["group_saola"]
    groups = {
        g: pd.DataFrame(X[:, idx], columns=[f"f{i}" for i in idx])
        for g, idx in zip(case["group_names"], case["groups"], strict=True)
    }
    results = []
    for payload, chunk in ((groups, None), (list(groups.items()), 7), (groups, 1)):
        s = client.create_stream("group_saola", target=y, params=case["params"])
        result = s.add_groups(payload, chunk_columns=chunk)
        results.append(result)
        events = [e for e in s.iter_events() if e.type == "batch"]
        # A request holds whole groups: every batch's names are a union of groups.
        for e in events:
            assert len(e.names) % 5 == 0
        s.delete()
    assert [f"f{i}" for i in case["selected"]] == list(results[0].selected)
    assert all(r.decisions == results[0].decisions for r in results)
    assert [len(r.seqs) for r in results] == [1, 6, 6]
    assert {d.group for d in results[0].decisions} == set(case["group_names"])


def test_unnamed_group_columns_are_named_after_the_group(client: Client) -> None:
    rng = np.random.default_rng(1)
    y = rng.normal(size=40)
    s = client.create_stream("group_saola", target=y)
    result = s.add_groups([("a", np.column_stack([y, rng.normal(size=40)]))])
    assert [d.name for d in result.decisions] == ["a:0", "a:1"]
    named = s.add_groups({"b": (np.column_stack([-y, y**2]), ["neg", "square"])})
    assert [(d.name, d.group) for d in named.decisions] == [("neg", "b"), ("square", "b")]


# ---------------------------------------------------------------- instances


def test_instances_over_http_match_the_public_ofs_vector(client: Client) -> None:
    case = support.expected()["instance_streams"]["ofs"]
    X, y = support.instances()
    s = client.create_stream("ofs", feature_names=support.names(100, "x"), params=case["params"])
    result = s.add_instances(X, y, batch_size=400)
    assert result.instances_seen == 2000 and result.seqs == (1, 2, 3, 4, 5)
    assert list(result.selected) == [f"x{i}" for i in case["selected"]]
    assert s.status()["instances_seen"] == 2000


def test_unsupervised_instances_and_dataframes(client: Client) -> None:
    case = support.expected()["instance_streams"]["fsds"]
    X, _ = support.instances()
    names = support.names(100, "x")
    a = client.create_stream("fsds", feature_names=names, params=case["params"])
    b = client.create_stream("fsds", feature_names=names, params=case["params"])
    ra = a.add_instances(X, batch_size=50)
    rb = b.add_instances(pd.DataFrame(X, columns=names), batch_size=50)
    assert ra.selected == rb.selected == tuple(f"x{i}" for i in case["selected"])
    assert len(ra.seqs) == 40


# ---------------------------------------------------------------- reads


def test_events_pages_and_iterator_agree(
    client: Client, wdbc_rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = wdbc_rows
    s = client.create_stream("saola", target=y)
    s.add_features(X, names=NAMES, chunk_columns=10)
    everything = list(s.iter_events(page_size=7))
    assert everything == list(s.events(limit=10_000).events)
    assert [e.type for e in everything].count("batch") == 3
    assert {e.producer for e in everything} == {s.producer}
    page = s.events(limit=5)
    rest = s.events(after=page.next, limit=10_000)
    assert list(page.events) + list(rest.events) == everything
    assert list(s.iter_events(after=everything[-1].id)) == []


def test_status_counts_features(client: Client, wdbc_rows: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = wdbc_rows
    s = client.create_stream("saola", target=y)
    s.add_features(X, names=NAMES)
    status = s.status()
    assert status["features_seen"] == 30 and status["version"] == 1


# ---------------------------------------------------------------- local checks


@pytest.mark.parametrize(
    ("data", "names"),
    [
        (np.array([[1.0, np.nan]] * 6), None),
        (np.ones((6, 2)), ["a", "a"]),
        (np.ones((6, 2)), ["a"]),
        (np.ones((5, 2)), None),
        ([[1.0, 2.0], [3.0]], None),
        (np.array([["a"]] * 6), None),
        (pd.DataFrame({"a": ["x"] * 6}), None),
        (np.ones((6, 0)), None),
    ],
    ids=["nan", "duplicate", "name-count", "length", "ragged", "strings", "text-frame", "empty"],
)
def test_bad_input_is_refused_before_anything_is_sent(
    client: Client, data: object, names: list[str] | None
) -> None:
    s = client.create_stream("saola", target=np.arange(6.0))
    with pytest.raises(fc.InvalidInput) as exc:
        s.add_features(data, names=names)
    assert exc.value.status is None  # found by the client
    assert isinstance(exc.value, ValueError)
    assert s.selected().version == 0 and s.next_seq == 1


def test_wrong_kind_is_refused_locally_when_the_kind_is_known(client: Client) -> None:
    s = client.create_stream("ofs", feature_names=["a", "b"], params={"num_features": 1})
    with pytest.raises(fc.WrongStreamKind):
        s.add_features(np.ones((3, 1)))
    f = client.create_stream("saola", target=np.arange(4.0))
    with pytest.raises(fc.WrongStreamKind):
        f.add_instances(np.ones((3, 2)), np.ones(3))
