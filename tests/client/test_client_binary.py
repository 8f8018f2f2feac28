"""Feature columns travel binary: .npy named in the header, or .npz with the names inside."""

from __future__ import annotations

import contextlib
import io
import zipfile
from collections.abc import Iterator

import httpx
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from featurestream_client import Client, _data
from tests.client.live import LiveServer

ODD = ["größe, in cm", " leading", "é, accent", "β", "a,b,c", "日本語", "plain"]


@contextlib.contextmanager
def recording_client(live: LiveServer, seen: list[httpx.Request]) -> Iterator[Client]:
    """A client whose requests are appended to ``seen``."""
    hooks = {"request": [seen.append]}
    with (
        httpx.Client(base_url=live.url, timeout=30, event_hooks=hooks) as http,
        Client(live.url, http_client=http) as client,
    ):
        yield client


def sparse_columns(n: int, b: int, seed: int = 0) -> tuple[sp.csc_matrix, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n).astype(np.float64)
    M = sp.random(n, b, density=0.2, format="csc", random_state=seed)
    # A few columns that follow the target, so that some are selected.
    M = sp.hstack([M, sp.csc_matrix(y[:, None] * (1 + rng.random((n, 2))))], format="csc")
    return M, y


def json_decisions(live: LiveServer, y: np.ndarray, M: sp.csc_matrix, names: list[str]) -> list:
    """The decisions of the same columns sent as raw JSON requests (``indices``/``data``)."""
    with Client(live.url, timeout=30) as c:
        s = c.create_stream("saola", target=y)
    cols = _data.as_columns(M, names)
    out = []
    with httpx.Client(base_url=live.url, timeout=30) as h:
        for seq, lo in enumerate(range(0, cols.n_cols, 4), start=1):
            body = _data.features_json_body(
                cols, _data.Chunk(lo, min(cols.n_cols, lo + 4)), "json", seq
            )
            r = h.post(f"/v1/streams/{s.id}/features", content=body.content, headers=body.headers)
            assert r.status_code == 200, r.text
            out += [(d["name"], d["accepted"], d.get("reason")) for d in r.json()["decisions"]]
        selected = [f["name"] for f in h.get(f"/v1/streams/{s.id}/selected").json()["features"]]
    return [out, selected]


def test_sparse_columns_travel_as_npz_and_decide_like_json(live: LiveServer) -> None:
    M, y = sparse_columns(120, len(ODD) - 2)
    seen: list[httpx.Request] = []
    with recording_client(live, seen) as c:
        s = c.create_stream("saola", target=y)
        result = s.add_features(M, names=ODD, chunk_columns=4)
    posts = [r for r in seen if r.url.path.endswith("/features")]
    assert len(posts) == 2 and len(result.seqs) == 2
    assert all(r.headers["content-type"] == "application/x-npz" for r in posts)
    assert all("x-feature-names" not in r.headers for r in posts)
    # Commas, spaces, tabs and any Unicode survive: the names are inside the archive.
    assert [d.name for d in result.decisions] == ODD
    got = [[(d.name, d.accepted, d.reason) for d in result.decisions], list(result.selected)]
    assert got == json_decisions(live, y, M, ODD)
    assert result.selected


def test_dense_columns_are_npy_or_npz_by_their_names(live: LiveServer) -> None:
    M, y = sparse_columns(80, 5, seed=1)
    X = M.toarray()
    seen: list[httpx.Request] = []
    with recording_client(live, seen) as c:
        plain = c.create_stream("saola", target=y).add_features(
            pd.DataFrame(X, columns=[f"c{j}" for j in range(7)])
        )
        fancy = c.create_stream("saola", target=y).add_features(pd.DataFrame(X, columns=ODD))
    kinds = [r.headers["content-type"] for r in seen if r.url.path.endswith("/features")]
    assert kinds == ["application/x-npy", "application/x-npz"]
    assert [d.name for d in fancy.decisions] == ODD
    assert [d.accepted for d in fancy.decisions] == [d.accepted for d in plain.decisions]


def npz_body(M: sp.csc_matrix, names: object) -> bytes:
    buf = io.BytesIO()
    sp.save_npz(buf, M, compressed=False)
    member = io.BytesIO()
    np.lib.format.write_array(member, np.asarray(names), allow_pickle=True)
    with zipfile.ZipFile(buf, "a") as zf:
        zf.writestr("names.npy", member.getvalue())
    return buf.getvalue()


@pytest.mark.parametrize(
    ("names", "header", "field"),
    [
        (["a", "b", "c"], "a,b,x", "X-Feature-Names"),
        (["a", "b"], None, "body:names.npy"),
        (np.array(["a", "b", "c"], dtype=object), None, "body:names.npy"),
        (np.array([1, 2, 3]), None, "body:names.npy"),
        (["a", "b", "\n"], None, None),  # refused by the engine's name checks
    ],
)
def test_npz_names_are_checked(
    live: LiveServer, names: object, header: str | None, field: str | None
) -> None:
    M, y = sparse_columns(20, 1)
    with Client(live.url, timeout=30) as c:
        s = c.create_stream("saola", target=y)
    headers = {"content-type": "application/x-npz"}
    if header is not None:
        headers["X-Feature-Names"] = header
    with httpx.Client(base_url=live.url, timeout=30) as h:
        r = h.post(f"/v1/streams/{s.id}/features", content=npz_body(M, names), headers=headers)
        assert r.status_code == 422, r.text
        if field is not None:
            assert field in r.text
        assert h.get(f"/v1/streams/{s.id}").json()["version"] == 0
        # Agreeing names are fine.
        headers["X-Feature-Names"] = "a,b,c"
        ok = h.post(
            f"/v1/streams/{s.id}/features", content=npz_body(M, ["a", "b", "c"]), headers=headers
        )
        assert ok.status_code == 200 and [d["name"] for d in ok.json()["decisions"]] == [
            "a",
            "b",
            "c",
        ]
