"""The one seq rule, shared by HTTP writes and WebSocket frames."""

from __future__ import annotations

from featurestream.engine.sequencing import Fresh, Gap, Replay, classify, conflict, too_old


def test_classify_against_the_last_applied_seq() -> None:
    assert classify(1, 0) == Fresh(1)
    assert classify(4, 4) == Replay(4, 5)
    assert classify(1, 4) == Replay(1, 5)
    assert classify(7, 4) == Gap(7, 5)
    assert too_old(Replay(1, 5)).expected == 5


def test_one_wording_for_each_refusal() -> None:
    gap = conflict(Gap(7, 5), "p")
    old = conflict(too_old(Replay(1, 5)), "p")
    assert gap.message == "seq 7 of producer 'p' leaves a gap; the next expected seq is 5."
    assert old.message == (
        "seq 1 of producer 'p' is older than the replay window; the next expected seq is 5."
    )
    assert gap.fields()["expected_seq"] == old.fields()["expected_seq"] == 5


def test_a_logs_positions_may_skip_but_never_go_back() -> None:
    assert classify(9, 4, log=True) == Fresh(9)
    assert classify(5, 4, log=True) == Fresh(5)
    assert classify(4, 4, log=True) == Replay(4, 5)
    assert classify(2, 4, log=True) == Replay(2, 5)
    assert classify(1, 0, log=True) == Fresh(1)
