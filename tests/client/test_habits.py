"""Issue 16, the SDK's habits: DataFrames matched by name, numpy parameters, short
results, messages that say what to send instead, the scikit-learn adapters.

Every test talks to a ``featurestream serve`` child process.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from featurestream_client import Client
from featurestream_client.errors import FeatureStreamError, InvalidInput, WrongStreamKind
from tests import support
from tests.support import ServeProcess

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def server() -> Iterator[ServeProcess]:
    proc = ServeProcess("memory://").start()
    yield proc
    proc.kill()


@pytest.fixture
def client(server: ServeProcess) -> Iterator[Client]:
    with Client(server.url, timeout=30) as c:
        yield c


def new_id() -> str:
    return f"h-{uuid.uuid4().hex[:12]}"


def rows(m: int = 300, d: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose label depends on the first column only: a selector can tell them apart."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d))
    y = (X[:, 0] + 0.1 * rng.normal(size=m) > 0).astype(np.float64)
    return X, y


# ---------------------------------------------------------------- 2. DataFrames by name


def test_instance_dataframe_columns_are_matched_by_name(client: Client) -> None:
    X, y = rows()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    # Unscaled: max-abs scaling maps the first instance to +-1 everywhere, a tie that
    # B = 1 settles by position for good, which would hide what the column order does.
    params = {"num_features": 1, "scale": "none"}
    straight = client.create_stream("ofs", feature_names=["a", "b", "c"], params=params)
    shuffled = client.create_stream("ofs", feature_names=["a", "b", "c"], params=params)
    positional = client.create_stream("ofs", feature_names=["a", "b", "c"], params=params)
    first = straight.add_instances(frame[["a", "b", "c"]], y)
    # A handle that has not read the stream yet: the SDK reads its names first.
    second = client.stream(shuffled.id).add_instances(frame[["c", "b", "a"]], y)
    assert second.selected == first.selected == ("a",)
    assert straight.selected().features == shuffled.selected().features
    # Arrays stay positional: the same columns in another order learn something else.
    third = positional.add_instances(frame[["c", "b", "a"]].to_numpy(), y)
    assert third.selected == ("c",)


def test_instance_dataframe_with_unknown_or_missing_names_is_refused(client: Client) -> None:
    X, y = rows()
    stream = client.create_stream("ofs", feature_names=["a", "b", "c"], params={"num_features": 1})
    renamed = pd.DataFrame(X, columns=["a", "B", "cc"])
    with pytest.raises(InvalidInput) as info:
        stream.add_instances(renamed, y)
    text = str(info.value)
    assert "Feature names unseen at creation: 'B', 'cc'" in text
    assert "Feature names seen at creation, yet now missing: 'b', 'c'" in text
    with pytest.raises(InvalidInput, match="yet now missing: 'c'"):
        stream.add_instances(pd.DataFrame(X[:, :2], columns=["a", "b"]), y)
    # Over the WebSocket too, and nothing was applied by any of them.
    with pytest.raises(InvalidInput, match="unseen at creation: 'B', 'cc'"):
        stream.stream_instances(renamed, y)
    assert stream.status()["instances_seen"] == 0
    assert stream.refresh().feature_names == ("a", "b", "c")


def test_feature_columns_of_a_dataframe_keep_their_names(client: Client) -> None:
    X, y = support.wdbc()
    frame = pd.DataFrame(X[:3].T, columns=["r", "s", "t"])
    stream = client.create_stream("saola", target=y)
    result = stream.add_features(frame[["t", "r"]])
    assert [d.name for d in result.decisions] == ["t", "r"]


# ---------------------------------------------------------------- 8. numpy, repr, adapters


def test_numpy_scalar_parameters_are_sent_as_numbers(client: Client) -> None:
    params = {"num_features": np.int64(2), "lam": np.float64(0.01)}
    stream = client.create_stream("ofs", feature_names=["a", "b", "c"], params=params)
    assert stream.refresh().params["num_features"] == 2
    saola = client.create_stream(
        "alpha_investing", target=[0.0, 1.0, 0.0, 1.0], params={"w0": np.float32(0.25)}
    )
    assert saola.refresh().params["w0"] == 0.25


def test_results_have_short_reprs(client: Client) -> None:
    rng = np.random.default_rng(3)
    y = rng.normal(size=50)
    stream = client.create_stream("saola", target=y)
    names = [f"a_rather_long_feature_name_number_{i:04d}" for i in range(400)]
    cols = rng.normal(size=(50, 400))
    cols[:, :20] += y[:, None]
    result = stream.add_features(cols, names, chunk_columns=50)
    text = repr(result)
    assert len(text) < 600, text
    assert "decisions=400" in text and f"({len(result.selected)})" in text
    assert len(repr(stream.selected())) < 600
    instances = client.create_stream("ofs", feature_names=names, params={"num_features": 5})
    out = instances.add_instances(cols, (y > 0).astype(float), batch_size=5)
    assert len(repr(out)) < 600 and "instances_seen=50" in repr(out)


def test_dict_and_series_rows_are_refused_with_what_to_send(client: Client) -> None:
    stream = client.create_stream("ofs", feature_names=["a", "b"], params={"num_features": 1})
    with pytest.raises(InvalidInput, match=r"River-style.*pd\.DataFrame\(\[row\]\)"):
        stream.add_instances({"a": 1.0, "b": 2.0}, [1.0])
    with pytest.raises(InvalidInput, match=r"list of dicts.*pd\.DataFrame\(rows\)"):
        stream.add_instances([{"a": 1.0, "b": 2.0}], [1.0])
    series = pd.DataFrame([[1.0, 2.0]], columns=["a", "b"]).iloc[0]
    with pytest.raises(InvalidInput, match=r"pandas Series.*to_frame\(\)\.T"):
        stream.add_instances(series, [1.0])
    with pytest.raises(InvalidInput, match="River-style"):
        stream.stream_instances([({"a": 1.0, "b": 2.0}, 1.0)])
    assert stream.status()["instances_seen"] == 0


# ---------------------------------------------------------------- 11. messages


def test_wrong_kind_message_is_grammatical_and_names_the_right_call(
    client: Client, server: ServeProcess
) -> None:
    stream = client.create_stream("ofs", feature_names=["a", "b"], params={"num_features": 1})
    answer = httpx.post(
        f"{server.url}/v1/streams/{stream.id}/features",
        json={"features": [{"name": "z", "values": [1.0]}]},
    )
    assert answer.status_code == 409, answer.text
    detail = answer.json()["detail"]
    assert "this request is for feature streams. Send it rows" in detail
    assert f"Stream '{stream.id}' is an instance stream; this request is for feature" in detail
    assert "/instances" in detail and "add_instances" in detail
    assert "instances stream" not in detail
    client.stream(stream.id).refresh()
    with pytest.raises(WrongStreamKind, match=r"is an instance stream.*add_instances"):
        stream.add_features(np.ones((2, 1)))


def test_field_paths_have_one_style(server: ServeProcess) -> None:
    body = {"target": [0, 1], "algorithm": "saola", "feature_names": ["a", 3]}
    answer = httpx.post(f"{server.url}/v1/streams", json=body)
    assert answer.status_code == 422, answer.text
    assert [e["field"] for e in answer.json()["errors"]] == ["feature_names[1]"]
    sid = new_id()
    assert (
        httpx.post(
            f"{server.url}/v1/streams", json={"id": sid, "algorithm": "saola", "target": [0, 1, 0]}
        ).status_code
        == 201
    )
    bad = {"features": [{"name": "f", "values": [1.0, 2.0, "x"]}]}
    answer = httpx.post(f"{server.url}/v1/streams/{sid}/features", json=bad)
    assert answer.status_code == 422, answer.text
    assert [e["field"] for e in answer.json()["errors"]] == ["features[0].values[2]"]


def test_malformed_json_names_its_position(server: ServeProcess) -> None:
    text = '{"algorithm": "saola",\n "target": [0, 1,, 2]}'
    answer = httpx.post(
        f"{server.url}/v1/streams", content=text, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 400, answer.text
    doc = answer.json()
    assert doc["errors"][0]["field"] == "body"
    assert "line 2, column 18 (char 40)" in doc["errors"][0]["message"]
    assert "line 2, column 18" in doc["detail"]


def test_unknown_algorithm_suggests_the_closest_names(client: Client) -> None:
    with pytest.raises(FeatureStreamError, match="Did you mean 'saola'"):
        client.create_stream("SAOLA", target=[0.0, 1.0])
    with pytest.raises(FeatureStreamError, match="Did you mean 'fast_osfs'"):
        client.create_stream("fast-osfs", target=[0.0, 1.0])


# ---------------------------------------------------------------- 8. scikit-learn adapters


def test_feature_selector_cleans_up_and_exposes_scores(
    client: Client, server: ServeProcess
) -> None:
    from featurestream_client.sklearn import FeatureStreamSelector

    X, y = support.wdbc()
    frame = pd.DataFrame(X.T, columns=support.names(X.shape[0]))
    before = {s.id for s in client.streams()}
    sel = FeatureStreamSelector(url=server.url, params={"alpha": 0.01}).fit(frame, y)
    assert {s.id for s in client.streams()} == before  # deleted once the selection was read
    assert sel.scores_.shape == (30,)
    accepted = [i for i, d in enumerate(sel.decisions_) if d.accepted]
    assert np.isfinite(sel.scores_[accepted]).all()
    assert sel.get_feature_names_out().tolist() == ["f21", "f27"]
    with pytest.raises(ValueError, match="keep_stream=True"):
        sel.partial_fit(frame.iloc[:, :2])
    kept = FeatureStreamSelector(url=server.url, keep_stream=True).fit(frame, y)
    assert kept.stream_id_ in {s.id for s in client.streams()}
    kept.close()  # keep_stream: close leaves it
    assert kept.stream_id_ in {s.id for s in client.streams()}
    client.delete_stream(kept.stream_id_)
    # partial_fit keeps its stream for the next calls, until close().
    inc = FeatureStreamSelector(url=server.url)
    inc.partial_fit(frame.iloc[:, :20], y)
    inc.partial_fit(frame.iloc[:, 20:])
    assert inc.get_feature_names_out().tolist() == ["f21", "f27"]
    inc.close()
    assert {s.id for s in client.streams()} == before


def test_instance_selector_twin_with_partial_fit(client: Client, server: ServeProcess) -> None:
    from featurestream_client.sklearn import FeatureStreamInstanceSelector

    X, y = rows(m=400, d=6, seed=5)
    frame = pd.DataFrame(X, columns=[f"c{i}" for i in range(6)])
    before = {s.id for s in client.streams()}
    params = {"num_features": np.int64(2)}
    whole = FeatureStreamInstanceSelector(url=server.url, params=params).fit(frame, y)
    assert {s.id for s in client.streams()} == before
    inc = FeatureStreamInstanceSelector(url=server.url, params=params)
    for lo in range(0, 400, 100):
        inc.partial_fit(frame.iloc[lo : lo + 100], y[lo : lo + 100])
    assert inc.instances_seen_ == 400
    assert inc.stream_id_ in {s.id for s in client.streams()}
    assert inc.selected_ == whole.selected_ and "c0" in inc.selected_
    np.testing.assert_array_equal(inc.scores_, whole.scores_)
    assert np.isfinite(inc.scores_[inc.get_support()]).all()
    assert inc.get_feature_names_out().tolist() == [n for n in frame.columns if n in inc.selected_]
    assert inc.transform(frame).shape == (400, 2)
    inc.close()
    assert {s.id for s in client.streams()} == before
    with pytest.raises(ValueError, match="instance-stream algorithm"):
        FeatureStreamInstanceSelector(url=server.url, algorithm="saola").fit(frame, y)
