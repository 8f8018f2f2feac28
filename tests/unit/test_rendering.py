"""Rendering a features write: the one-pass renderer equals the per-decision documents,
the server process's one freeze of its start-up objects, and the client's lazy
decisions."""

from __future__ import annotations

import dataclasses
import inspect
import os
import pickle
import subprocess
import sys
from collections import Counter

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from featurestream.engine import wire
from featurestream.engine.outcome import tally_of
from featurestream.selectors.decisions import Decision, Eviction, Reason
from featurestream_client.models import Decision as ClientDecision
from featurestream_client.models import Decisions, FeaturesResult

names = st.text(min_size=1, max_size=6)
reasons = st.sampled_from(list(Reason))
evictions = st.builds(Eviction, feature=names, reason=reasons, by=st.none() | names)
decisions = st.builds(
    Decision,
    feature=names,
    accepted=st.booleans(),
    reason=st.none() | reasons,
    by=st.none() | names,
    score=st.none() | st.floats(allow_nan=True, allow_infinity=True),
    evicted=st.lists(evictions, max_size=3).map(tuple),
    group=st.none() | names,
)


def _expected(d: Decision) -> tuple[dict[str, object], list[dict[str, object]]]:
    """The documents of one decision, as the API contract lays them out."""
    doc: dict[str, object] = {
        "name": d.feature,
        "accepted": d.accepted,
        "evicted": [e.feature for e in d.evicted],
        "reason": d.reason,
        "score": d.score,
    }
    event: dict[str, object] = {
        "type": "accepted" if d.accepted else "rejected",
        "names": [d.feature],
        "reason": d.reason,
        "score": d.score,
    }
    for key in ("by", "group"):
        if getattr(d, key) is not None:
            doc[key] = event[key] = getattr(d, key)
    evictions = [
        {"type": "evicted", "names": [e.feature], "reason": e.reason, "by": e.by} for e in d.evicted
    ]
    return doc, [event, *evictions]


@given(st.lists(decisions, max_size=20))
def test_render_decisions_gives_the_contracts_documents(ds: list[Decision]) -> None:
    docs, events = wire.render_decisions(ds)
    assert orjson.dumps(docs) == orjson.dumps([_expected(d)[0] for d in ds])
    assert orjson.dumps(events) == orjson.dumps([e for d in ds for e in _expected(d)[1]])
    # One decision at a time gives the same documents as the batch.
    assert orjson.dumps(docs) == orjson.dumps([wire.decision(d) for d in ds])
    assert orjson.dumps(events) == orjson.dumps([e for d in ds for e in wire.decision_events(d)])


@given(st.lists(decisions, max_size=20))
def test_a_decision_is_a_frozen_dataclass_of_its_fields(ds: list[Decision]) -> None:
    # Decision fills its fields itself (a faster __init__ than the generated one):
    # it is still the dataclass the rest of the code relies on.
    for d in ds:
        fields = {f.name: getattr(d, f.name) for f in dataclasses.fields(Decision)}
        assert fields == dataclasses.asdict(d) | {"evicted": d.evicted}
        positional = Decision(d.feature, d.accepted, d.reason, d.by, d.score, d.evicted, d.group)
        assert positional == d and hash(positional) == hash(d)
        # repr: a NaN score is not equal to itself once unpickled (another float object).
        assert repr(pickle.loads(pickle.dumps(d))) == repr(d)
        assert dataclasses.replace(d, accepted=not d.accepted).accepted is not d.accepted
        with pytest.raises(dataclasses.FrozenInstanceError):
            d.accepted = True  # type: ignore[misc]
    assert Decision("a", True) == Decision("a", True, None, None, None, (), None)


def test_decisions_init_takes_every_field_with_its_default() -> None:
    # Decision's __init__ is written by hand: it must follow the fields.
    params = list(inspect.signature(Decision.__init__).parameters.values())[1:]
    fields = dataclasses.fields(Decision)
    assert [p.name for p in params] == [f.name for f in fields]
    assert [p.default for p in params] == [
        inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default for f in fields
    ]


def _tally_one_by_one(events: list[dict[str, object]]) -> Counter[str]:
    """The per-event count of a change's events, as /metrics defines it."""
    c: Counter[str] = Counter()
    for ev in events:
        if ev["type"] == "batch":
            c["features_processed"] += int(ev.get("count", 0))  # type: ignore[call-overload]
            c["instances_processed"] += int(ev.get("instances", 0))  # type: ignore[call-overload]
        else:
            c[f"decisions_{ev['type']}"] += 1
    return c


batch_events = st.fixed_dictionaries(
    {"type": st.just("batch")},
    optional={"count": st.integers(0, 10**6), "instances": st.integers(0, 10**6)},
)


@given(st.lists(st.lists(decisions, max_size=8), max_size=4), batch_events)
def test_tally_counts_what_each_event_says(
    groups: list[list[Decision]], batch: dict[str, object]
) -> None:
    # A features write (its batch event first) and a group of frames (a batch event each).
    feature_write = [batch, *wire.render_decisions([d for g in groups for d in g])[1]]
    frames = [e for g in groups for e in (batch, *wire.render_decisions(g)[1])]
    for events in (
        feature_write,
        frames,
        [],
        wire.render_decisions(groups[0] if groups else [])[1],
    ):
        assert tally_of(events) == _tally_one_by_one(events)


def test_a_server_process_freezes_what_exists_at_start_up_once() -> None:
    code = (
        "import gc; from featurestream.api.app import app_from_env; "
        "before = gc.get_freeze_count(); app_from_env(); print(before, gc.get_freeze_count())"
    )
    env = {**os.environ, "FEATURESTREAM_STORE_URL": "memory://"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-500:]
    before, after = map(int, out.stdout.split())
    assert before == 0 and after > 10_000


RAW = [
    {"name": "a", "accepted": True, "evicted": [], "reason": None, "score": 0.5},
    {"name": "b", "accepted": False, "evicted": [], "reason": "redundant", "score": 0.1, "by": "a"},
    {"name": "c", "accepted": True, "evicted": ["a"], "reason": None, "score": None},
]


def test_decisions_are_built_when_read_and_compare_as_a_tuple() -> None:
    ds = Decisions(RAW)
    assert len(ds) == 3 and repr(ds) == "Decisions(3 decisions)"
    assert ds._built == {}  # nothing built yet
    assert ds.names() == ["a", "b", "c"] and ds.names(accepted=False) == ["b"]
    assert ds._built == {}
    second = ds[1]
    assert second == ClientDecision("b", False, (), "redundant", 0.1, "a")
    assert ds[1] is second and ds[-2] is second  # built once
    expected = tuple(ClientDecision.from_json(x) for x in RAW)
    assert ds == expected and ds == list(expected) and expected == tuple(ds)
    assert ds != expected[:2] and ds[1:] == expected[1:] and isinstance(ds[1:], Decisions)
    assert hash(ds) == hash(expected)
    both = expected[:1] + ds
    assert isinstance(both, Decisions) and both == expected[:1] + expected
    assert ds + Decisions(RAW[:1]) == expected + expected[:1]


def test_a_features_result_keeps_the_decisions_of_every_chunk_in_order() -> None:
    parts = [
        FeaturesResult.from_json({"version": 1, "seq": 1, "decisions": RAW[:2], "selected": ["a"]}),
        FeaturesResult.from_json({"version": 2, "seq": 2, "decisions": RAW[2:], "selected": ["c"]}),
    ]
    whole = FeaturesResult.combine(parts)
    assert [d.name for d in whole.decisions] == ["a", "b", "c"]
    assert whole.accepted == ["a", "c"] and whole.rejected == ["b"]
    assert whole.seqs == (1, 2) and whole.selected == ("c",)
    assert "decisions=3 (2 accepted)" in repr(whole)
