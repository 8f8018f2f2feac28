"""History, stability and evaluation through the SDK, against ``featurestream serve`` on Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import numpy as np
import pandas as pd
import pytest
import redis as redis_lib
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.naive_bayes import GaussianNB

from featurestream.evaluation.stability import consecutive_jaccard, nogueira
from featurestream_client import (
    AsyncClient,
    Client,
    Evaluation,
    EvaluationUnavailable,
    History,
    HistoryTrimmed,
    InvalidInput,
    Stream,
    VersionNotFound,
)
from tests import support
from tests.support import ServeProcess

pytestmark = pytest.mark.redis


@pytest.fixture
def server(redis_url: str, key_prefix: str) -> Iterator[ServeProcess]:
    env = {"FEATURESTREAM_EVENT_RETENTION": "100"}
    s = ServeProcess(redis_url, key_prefix, env=env).start()
    yield s
    s.kill()


def _feed(stream: Stream) -> dict[int, list[str]]:
    X, _ = support.wdbc()
    after: dict[int, list[str]] = {0: []}
    for start in range(0, 30, 2):
        names = [f"x{j}" for j in range(start, start + 2)]
        r = stream.add_features(X[start : start + 2].T, names=names)
        after[r.version] = list(r.selected)
    return after


def test_sdk_reads_history_selection_at_a_version_and_stability(server: ServeProcess) -> None:
    _, y = support.wdbc()
    sid = f"h-{uuid.uuid4().hex[:8]}"
    with Client(server.url, timeout=30) as client:
        stream = client.create_stream("saola", target=y, id=sid)
        after = _feed(stream)
        current = max(after)
        for v, names in after.items():
            assert sorted(stream.selected(version=v).names) == sorted(names)
        with pytest.raises(VersionNotFound):
            stream.selected(version=current + 1)

        history = stream.history()
        assert isinstance(history, History) and history.version == current
        moved = [v for v in sorted(after)[1:] if set(after[v]) != set(after[v - 1])]
        assert [c.version for c in history] == moved
        for c in history:
            assert set(c.added) == set(after[c.version]) - set(after[c.version - 1])
            assert set(c.removed) == set(after[c.version - 1]) - set(after[c.version])
            assert c.size == len(after[c.version])
        # Page by page (2 per page) gives the same list.
        assert list(stream.history(limit=2)) == list(history)[:2]
        assert list(stream.history(after_version=moved[0])) == list(history)[1:]

        frame = history.to_frame()
        assert list(frame.columns) == ["version", "at", "added", "removed", "size", "drifts"]
        assert frame["version"].tolist() == moved
        assert str(frame["at"].dt.tz) == "UTC"
        assert frame["at"].is_monotonic_increasing
        assert isinstance(frame, pd.DataFrame)

        stab = stream.stability(last=5)
        sels = [set(after[v]) for v in moved[-5:]]
        assert list(stab.versions) == moved[-5:]
        assert list(stab.jaccard) == pytest.approx(consecutive_jaccard(sels))
        assert stab.features == 30 - 2 * sum(1 for v in after if v > moved[-1])
        universe = [f"x{j}" for j in range(stab.features)]
        assert stab.nogueira == pytest.approx(nogueira(sels, universe))

    async def run() -> None:
        async with AsyncClient(server.url, timeout=30) as aclient:
            astream = await aclient.get_stream(sid)
            assert (await astream.history()) == history
            assert sorted((await astream.selected(version=1)).names) == sorted(after[1])
            assert (await astream.stability(last=5)) == stab

    anyio.run(run)


def test_sdk_raises_history_trimmed_past_the_retained_log(server: ServeProcess) -> None:
    X, y = support.wdbc()
    with Client(server.url, timeout=30) as client:
        stream = client.create_stream("saola", target=y)
        for i in range(105):
            stream.add_features(X[i % 30 : i % 30 + 1].T + 0.001 * i, names=[f"c{i}"])
        with pytest.raises(HistoryTrimmed):
            stream.selected(version=2)
        with pytest.raises(HistoryTrimmed):
            stream.history(after_version=2)
        assert stream.selected(version=50).version == 50
        assert all(c.version > 5 for c in stream.history())


def test_sdk_evaluates_feature_and_instance_streams(server: ServeProcess) -> None:
    X, y = support.wdbc()
    with Client(server.url, timeout=60) as client:
        stream = client.create_stream("saola", target=y)
        r = stream.add_features(X.T, names=[f"x{j}" for j in range(30)])
        cols = [int(n[1:]) for n in r.selected]
        got = stream.evaluation("naive_bayes", folds=3)
        assert isinstance(got, Evaluation) and got.kind == "cross_validation"
        seed = int(np.random.SeedSequence([0, 0]).generate_state(1)[0])
        cv = StratifiedKFold(n_splits=3, shuffle=True, random_state=seed)
        expected = cross_val_score(GaussianNB(), X[cols].T, y, cv=cv).tolist()
        assert list(got.fold_scores) == expected
        assert got.features == len(cols) and got.best_single is not None
        with pytest.raises(InvalidInput):
            stream.evaluation("forest")

        ofs = client.create_stream(
            "ofs", feature_names=[f"x{j}" for j in range(30)], params={"num_features": 5}
        )
        ofs.add_instances(X.T, y)
        pre = ofs.evaluation()
        assert pre.kind == "prequential" and pre.raw["instances"] == X.shape[1]
        assert pre.score is not None and 0.5 < pre.score <= 1.0
        assert pre.recent is not None and pre.recent["instances"] == X.shape[1]

        fsds = client.create_stream(
            "fsds", feature_names=[f"x{j}" for j in range(30)], params={"num_features": 5}
        )
        with pytest.raises(EvaluationUnavailable):
            fsds.evaluation()


def test_stability_reads_only_the_log_entries_of_its_last_changes(
    redis_server_factory: Any, key_prefix: str
) -> None:
    """``/stability?last=2`` on a long log reads the entries of its latest changes, not all.

    A private Redis logs every command (slow log threshold 0), so the XRANGE reads
    of the log that one ``/stability`` makes are counted from their COUNT arguments.
    """
    redis = redis_server_factory(
        appendonly=False, extra=("--slowlog-log-slower-than", "0", "--slowlog-max-len", "4096")
    )
    server = ServeProcess(redis.url, key_prefix).start()
    try:
        rng = np.random.default_rng(7)
        a, b = rng.normal(size=200), rng.normal(size=200)
        y = (a + b > 0).astype(int)
        with Client(server.url, timeout=30) as client:
            stream = client.create_stream("alpha_investing", target=y)
            for i in range(300):
                stream.add_features(rng.normal(size=(200, 1)), names=[f"noise{i}"])
            for name, column in (("a", a), ("b", b)):
                stream.add_features(column[:, None], names=[name])
            current = stream.selected().version
            changes = [c.version for c in stream.history()]
            assert changes[-2:] == [current - 1, current]  # a and b were selected

            admin = redis_lib.Redis.from_url(redis.url)
            admin.slowlog_reset()
            stab = stream.stability(last=2)
            assert list(stab.versions) == [current - 1, current]
            read = admin.slowlog_get(4096)
        xranges = [e["command"].split() for e in read if e["command"].startswith(b"XRANGE")]
        assert xranges, read
        entries_asked = sum(int(cmd[cmd.index(b"COUNT") + 1]) for cmd in xranges)
        # Before: the whole log, 256 entries a read (302 entries, two reads).
        assert entries_asked <= 2, xranges
    finally:
        server.kill()
