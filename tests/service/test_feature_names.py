"""A feature stream's names are unique: a write naming a feature the stream has seen is
refused (422 ``invalid-input``) and changes nothing.

The Redis store looks a write's new names up and adds them to the stream's set around
its commit script, a thousand at a time. Neither may let a duplicate through, nor
leave anything of a refused write behind: the writes after it give what they give on
a stream that never saw it. Against ``featurestream serve``
child processes, on the memory store and on real Redis (one process and two).
"""

from __future__ import annotations

import numpy as np
import pytest

from featurestream_client import Client
from featurestream_client.errors import InvalidInput
from tests.support import ServeProcess

N_ROWS = 120
FIRST = 2_500  # more than two pieces of names (the Redis store checks 1,000 at a time)


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    y = rng.normal(size=N_ROWS)
    X = rng.normal(size=(N_ROWS, FIRST + 3))
    X[:, 5] += 3 * y  # a few relevant columns, so the selection is not empty
    X[:, FIRST - 1] += 2 * y
    X[:, FIRST + 1] += 4 * y
    return X, y


def _names(lo: int, hi: int) -> list[str]:
    return [f"f{i}" for i in range(lo, hi)]


def _state(stream) -> tuple[int, tuple[str, ...], int]:  # type: ignore[no-untyped-def]
    status = stream.status()
    return stream.refresh().version, stream.selected().features, status["features_seen"]


def test_a_write_repeating_a_name_is_refused_and_changes_nothing(server: ServeProcess) -> None:
    X, y = _data()
    with Client(server.url) as c:
        stream = c.create_stream("saola", target=y)
        stream.add_features(X[:, :FIRST], _names(0, FIRST))
        before = _state(stream)
        # Two new names and one of the last piece of names.
        with pytest.raises(InvalidInput, match="already in the stream: 'f2499'"):
            stream.add_features(X[:, FIRST - 1 : FIRST + 2], ["n0", "n1", "f2499"])
        assert _state(stream) == before
        with pytest.raises(InvalidInput, match="'f3'"):
            stream.add_features(X[:, 3:4], ["f3"])
        assert _state(stream) == before
        after = stream.add_features(X[:, FIRST : FIRST + 3], ["n0", "n1", "n2"])
        # The same writes on a stream that never saw the refused ones.
        plain = c.create_stream("saola", target=y)
        plain.add_features(X[:, :FIRST], _names(0, FIRST))
        expected = plain.add_features(X[:, FIRST : FIRST + 3], ["n0", "n1", "n2"])
        assert after.version == expected.version == before[0] + 1
        assert list(after.decisions) == list(expected.decisions)
        assert stream.selected().features == plain.selected().features
        assert stream.status()["features_seen"] == FIRST + 3


@pytest.mark.redis
def test_a_name_written_through_one_process_is_refused_by_another(
    redis_url: str, key_prefix: str
) -> None:
    """A write through process b repeating a name written through process a: refused,
    and the other way round."""
    X, y = _data()
    a = ServeProcess(redis_url, prefix=key_prefix).start()
    b = ServeProcess(redis_url, prefix=key_prefix).start()
    try:
        with Client(a.url) as ca, Client(b.url) as cb:
            for round_ in range(3):
                sa = ca.create_stream("saola", target=y)
                sb = cb.get_stream(sa.id)
                v = sa.add_features(X[:, :FIRST], _names(0, FIRST)).version
                with pytest.raises(InvalidInput, match="already in the stream"):
                    sb.add_features(X[:, round_ : round_ + 2], ["m0", f"f{FIRST - 1 - round_}"])
                assert sb.refresh().version == v
                assert sb.add_features(X[:, FIRST : FIRST + 1], ["m0"]).version == v + 1
                with pytest.raises(InvalidInput, match="'m0'"):
                    sa.add_features(X[:, FIRST + 1 : FIRST + 2], ["m0"])
                assert sa.refresh().version == v + 1
    finally:
        a.kill()
        b.kill()
