"""How the SDK cuts an upload into requests, and how it parses large answers."""

from __future__ import annotations

import json
import pickle
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from featurestream_client import _core, _data
from featurestream_client.models import UNREAD_DECISIONS, Decision, Decisions, FeaturesResult


def _reference_plan(
    cols: _data.Columns, max_columns: int, max_bytes: int, max_header_bytes: int
) -> list[tuple[int, int]]:
    """The planner's rule, column by column: a range takes the next column while it fits."""
    out = []
    start, size, header = 0, 0, 0
    in_header = cols.names is not None and cols.names_in_header
    for j in range(cols.n_cols):
        col = cols.column_bytes(j)
        name = len(cols.names[j]) + 1 if in_header and cols.names is not None else 0
        if j > start and (
            j - start >= max_columns or size + col > max_bytes or header + name > max_header_bytes
        ):
            out.append((start, j))
            start, size, header = j, 0, 0
        size += col
        header += name
    if cols.n_cols > start:
        out.append((start, cols.n_cols))
    return out


@settings(max_examples=200, deadline=None)
@given(
    rows=st.integers(1, 6),
    b=st.integers(0, 40),
    sparse=st.booleans(),
    naming=st.sampled_from(["none", "safe", "unsafe"]),
    max_columns=st.integers(1, 12),
    max_bytes=st.integers(1, 400),
    exact=st.integers(-1, 40),
    max_header=st.integers(1, 60),
    seed=st.integers(0, 10),
)
def test_plan_follows_the_column_by_column_rule(
    rows: int,
    b: int,
    sparse: bool,
    naming: str,
    max_columns: int,
    max_bytes: int,
    max_header: int,
    seed: int,
    exact: int,
) -> None:
    rng = np.random.default_rng(seed)
    X = np.where(rng.random((rows, b)) < 0.4, rng.normal(size=(rows, b)), 0.0)
    names: list[str] | None = None
    if naming != "none":
        names = [("n" * int(rng.integers(1, 6))) + f"{j}" for j in range(b)]
        if naming == "unsafe" and b:
            names[int(rng.integers(0, b))] += ", x"
    data: Any = sp.csc_matrix(X) if sparse else X
    cols = _data.as_columns(data, names)
    if 0 <= exact < b:
        # A budget the first columns fill exactly: they fit, one more does not.
        max_bytes = sum(cols.column_bytes(j) for j in range(exact + 1))
    got = _data.plan_chunks(cols, max_columns, max_bytes, max_header)
    assert [(c.start, c.stop) for c in got] == _reference_plan(
        cols, max_columns, max_bytes, max_header
    )


def test_budgets_as_large_as_any_int_mean_no_budget() -> None:
    import sys

    cols = _data.as_columns(np.ones((3, 5)), [f"c{j}" for j in range(5)])
    for big in (sys.maxsize, 2**63, 2**80):
        got = _data.plan_chunks(cols, 2, big, big)
        assert [(c.start, c.stop) for c in got] == [(0, 2), (2, 4), (4, 5)]


def test_a_million_columns_are_planned_quickly() -> None:
    import time

    X = sp.random(5, 1_000_000, density=2e-5, format="csc", random_state=0)
    cols = _data.as_columns(X, [f"w{j}" for j in range(1_000_000)])
    t = time.process_time()
    chunks = _data.plan_chunks(cols, 20_000, 50 << 20, 1 << 20)
    assert time.process_time() - t < 1.0  # column by column it took seconds
    assert len(chunks) == 50 and chunks[-1].stop == 1_000_000


def test_decisions_build_on_reading_and_keep_what_was_built() -> None:
    raw = [{"name": f"f{i}", "accepted": i == 1, "evicted": [], "reason": "r"} for i in range(4)]
    d = Decisions(raw)
    first = d[1]
    assert isinstance(first, Decision) and first.name == "f1" and first.accepted
    assert d[1] is first  # built once
    joined = d.__add__([Decision.from_json(raw[0])])  # Decisions + a list
    assert len(joined) == 5 and joined[1] is first and joined[4].name == "f0"
    assert d.names(accepted=True) == ["f1"] and joined.names(accepted=False)[-1] == "f0"
    assert Decisions(joined)[1] is first
    assert list(d) == [Decision.from_json(r) for r in raw]


def _answer(lo: int, n: int, version: int) -> bytes:
    decisions = [
        {"name": f"f{i}", "accepted": i % 7 == 0, "evicted": [], "reason": "r", "score": i / 3}
        for i in range(lo, lo + n)
    ]
    return json.dumps({"version": version, "seq": version, "decisions": decisions}).encode()


@pytest.mark.parametrize("sizes", [[1500, 10, 2000], [5, 7], [1000]])
def test_large_answers_keep_their_decisions_as_text_until_read(sizes: list[int]) -> None:
    parsed: list[int] = []

    def parse(content: bytes) -> Any:
        parsed.append(len(content))
        return json.loads(content)

    answers, lo = [], 0
    for v, n in enumerate(sizes, start=1):
        answers.append(_answer(lo, n, v))
        lo += n
    lazy = [FeaturesResult.from_answer(a, False, parse) for a in answers]
    eager = [FeaturesResult.from_json(json.loads(a)) for a in answers]
    assert len(parsed) == len(answers)  # each answer parsed once on arrival
    joined = FeaturesResult.combine(lazy)
    assert len(joined.decisions) == sum(sizes) and joined.version == len(sizes)
    # Neither joining nor the length read a decision.
    large = sum(n >= UNREAD_DECISIONS for n in sizes)
    assert len(parsed) == len(answers)
    first = joined.decisions[0]
    assert len(parsed) == len(answers) + large  # the large ones parsed again, once
    assert joined.decisions[0] is first and joined.decisions[-1].name == f"f{sum(sizes) - 1}"
    assert joined == FeaturesResult.combine(eager)
    assert joined.accepted == FeaturesResult.combine(eager).accepted
    assert len(parsed) == len(answers) + large
    # Sequences made from unread ones stay unread; reading them gives the same decisions.
    more = FeaturesResult.combine(
        [FeaturesResult.from_answer(a, False, parse) for a in answers]
    ).decisions
    tail = [Decision("x", True)]
    assert len(more + tail) == len(more) + 1 and len(tail + more) == len(more) + 1
    assert list(more + tail) == [*joined.decisions, *tail]
    assert list(tail + more) == [*tail, *joined.decisions]
    assert more[1:3] == list(joined.decisions)[1:3]


def test_a_result_with_unread_decisions_pickles() -> None:
    answer = _answer(0, 1200, 3)
    result = FeaturesResult.from_answer(answer, True, _core.parse_json)
    again = pickle.loads(pickle.dumps(result))
    assert len(again.decisions) == 1200 and again.version == 3 and again.replayed
    assert again == FeaturesResult.from_json(json.loads(answer), True)


def test_results_combine_whatever_sequence_holds_their_decisions() -> None:
    lazy = FeaturesResult.from_answer(_answer(0, 1500, 2), False, _core.parse_json)
    plain = FeaturesResult(1, (Decision("a", True),), ())  # type: ignore[arg-type]
    joined = FeaturesResult.combine([plain, lazy])
    assert len(joined.decisions) == 1501 and joined.decisions[0].name == "a"
    assert joined.decisions[1].name == "f0" and joined.version == 2
