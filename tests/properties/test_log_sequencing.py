"""The sequence rule of a log's partition: every increasing position applied once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from featurestream.engine.sequencing import Fresh, classify


@given(st.lists(st.integers(1, 10**18), min_size=1, max_size=50), st.data())
def test_redelivered_positions_apply_each_once_in_order(
    positions: list[int], data: st.DataObject
) -> None:
    log = sorted(set(positions))
    # A delivery that goes back any number of times (redeliveries), always resuming in order.
    delivered: list[int] = []
    i = 0
    while i < len(log):
        step = data.draw(st.integers(1, 3))
        delivered += log[i : i + step]
        # The next delivery resumes after at least one settled message, maybe before the rest.
        i = data.draw(st.integers(i + 1, i + step))
    last = 0
    applied = []
    for p in delivered:
        if isinstance(classify(p, last, log=True), Fresh):
            applied.append(p)
            last = p
    assert applied == log
