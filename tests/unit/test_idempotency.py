"""The content digest kept with a seq's stored response (engine/idempotency.py)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from featurestream.api.producers import is_producer
from featurestream.api.tenancy import valid_stream_id
from featurestream.engine.idempotency import content_digest, replayed, seal, unseal
from featurestream.errors import SeqReused, SequenceConflict


def test_the_digest_follows_the_content_not_its_encoding() -> None:
    X = np.arange(6.0).reshape(2, 3)
    same = [
        content_digest("instances", X, None),
        content_digest("instances", X.astype(np.float32), None),
        content_digest("instances", np.asfortranarray(X), None),
    ]
    assert len(set(same)) == 1
    others = [
        content_digest("features", X, None),  # another kind of write
        content_digest("instances", X.T, None),  # another shape
        content_digest("instances", X, np.ones(2)),  # labels
        content_digest("instances", X + 1e-12, None),
    ]
    assert len({*others, same[0]}) == len(others) + 1
    m = sp.csr_matrix(X)
    assert content_digest("x", m) == content_digest("x", sp.csc_matrix(X))
    assert content_digest("x", ["a", "b"], None) != content_digest("x", ["a,b"], None)
    assert content_digest("x", None, ["a"]) != content_digest("x", ["a"], None)


def test_a_sealed_response_replays_only_for_its_content() -> None:
    digest = content_digest("features", np.ones((1, 3)))
    stored = seal(digest, b'{"version": 1}')
    assert unseal(stored) == (digest, b'{"version": 1}')
    assert replayed(stored, digest, "p", 1, 2) == b'{"version": 1}'
    other = content_digest("features", np.zeros((1, 3)))
    with pytest.raises(SeqReused) as exc:
        replayed(stored, other, "p", 1, 2)
    assert isinstance(exc.value, SequenceConflict)
    assert str(exc.value).startswith("seq reused with different content")
    assert exc.value.fields() == {"producer": "p", "expected_seq": 2}


def test_the_digest_is_xxh3_128_of_the_kind_then_each_part() -> None:
    from xxhash import xxh3_128

    X = np.arange(6.0).reshape(2, 3)
    expected = xxh3_128(b"instances" + b"A[2, 3]" + X.tobytes() + b"N").digest()
    assert content_digest("instances", X, None) == expected
    # A scipy.sparse part: its CSR arrays, indices widened to int64.
    m = sp.csr_matrix(X)
    csr = b"C[2, 3]" + m.indptr.astype(np.int64).tobytes() + m.indices.astype(np.int64).tobytes()
    assert content_digest("x", m) == xxh3_128(b"x" + csr + m.data.tobytes()).digest()


def test_a_response_stored_before_digests_replays_as_before() -> None:
    legacy = b'{"version": 3, "seq": 1}'
    assert unseal(legacy) == (None, legacy)
    assert replayed(legacy, content_digest("x"), "p", 1, 2) == legacy


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("loader-1", True),
        ("é" * 256, True),
        ("", False),
        ("x" * 257, False),
        ("p\n", False),
        ("p\r", False),
        ("a\tb", False),
        ("a\x00b", False),
        ("a\x7f", False),
        ("a\x85", False),
        (None, False),
        (3, False),
    ],
)
def test_one_rule_for_producer_names(value: object, ok: bool) -> None:
    assert is_producer(value) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [("churn", True), ("a.b", True), ("...", True), (".", False), ("..", False), ("a\n", False)],
)
def test_stream_ids_match_whole_and_are_reachable(value: str, ok: bool) -> None:
    assert valid_stream_id(value) is ok
