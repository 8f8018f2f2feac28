"""Prequential accuracy of OFS and FIRES against predictions made by hand from the
model before each instance (OFS) or batch (FIRES), and states stored without it."""

from __future__ import annotations

import json
import struct
from dataclasses import replace

import numpy as np
import pytest

from featurestream import codec
from featurestream.selectors.fires import FIRES, FIRESParams
from featurestream.selectors.ofs import OFS, OFSParams
from featurestream.selectors.prequential import RECENT


def _data(seed: int, m: int, d: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d))
    y = (X[:, 0] + 0.5 * X[:, 2] + 0.3 * rng.normal(size=m) > 0).astype(int)
    return X, y


def test_ofs_counts_the_sign_of_w_x_before_each_step() -> None:
    X, y = _data(1, 1300)
    names = [f"f{i}" for i in range(5)]
    params = OFSParams(num_features=2, scale="none")
    by_hand = OFS.start(params, names)
    hits, ties_of_positives = [], 0
    for i in range(X.shape[0]):
        w = by_hand.state.w
        # A tie (w . x = 0, as before the first step) predicts no class: never right.
        f = float(w @ X[i])
        pred = 0 if f == 0 else (1 if f > 0 else -1)
        hits.append(pred == (1 if y[i] == 1 else -1))
        ties_of_positives += f == 0 and y[i] == 1
        by_hand.learn_instances(X[i : i + 1], y[i : i + 1])
    batched = OFS.start(params, names)
    for lo in range(0, 1300, 250):
        batched.learn_instances(X[lo : lo + 250], y[lo : lo + 250])
    s = batched.state
    assert (s.predicted, s.correct) == (1300, sum(hits))
    assert s.recent.tolist() == hits[-RECENT:]
    # The same learning as before: the weights of one-by-one and batched runs agree.
    np.testing.assert_array_equal(s.w, by_hand.state.w)
    # The published mistakes count a tie as +1.
    assert ties_of_positives >= 1
    assert s.predicted - s.correct == s.mistakes + ties_of_positives


@pytest.mark.parametrize("multiclass", [False, True])
def test_fires_predicts_each_batch_with_the_model_before_it(multiclass: bool) -> None:
    X, y = _data(2, 600)
    if multiclass:
        y = y + (X[:, 1] > 0.8).astype(int) * 2  # classes 0..3
    names = [f"f{i}" for i in range(5)]
    sel = FIRES.start(FIRESParams(num_features=2, scale="none"), names)
    hits: list[bool] = []
    for lo in range(0, 600, 50):
        Xb, yb = X[lo : lo + 50], y[lo : lo + 50]
        mu = sel.state.mu.copy()
        classes_before = tuple(sel.state.classes)
        sel.learn_instances(Xb, yb)
        classes = tuple(sel.state.classes)
        if multiclass and len(classes) >= 3:
            # One model per class in sorted order; a class new in this batch starts
            # from the prior (mu_init), and a binary model before it is the model of
            # the class coded +1 (label 1 here) and its mirror that of the other.
            rows = []
            for c in classes:
                if c in classes_before and mu.shape[0] == len(classes_before):
                    rows.append(mu[classes_before.index(c)])
                elif c in classes_before and mu.shape[0] == 1:
                    rows.append(mu[0] if c == 1 else -mu[0])
                else:
                    rows.append(np.full(5, sel.params.mu_init))
            margins = Xb @ np.array(rows).T
            # A tie for the largest margin predicts no class: wrong.
            alone = (margins == margins.max(axis=1, keepdims=True)).sum(axis=1) == 1
            pred = np.array(classes)[np.argmax(margins, axis=1)]
            hits.extend((alone & (pred == yb)).tolist())
        else:
            # The sign of the margin against the label's code (1 is +1, the other -1);
            # a margin of exactly 0, as with the untrained model, predicts no class.
            hits.extend((np.sign(Xb @ mu[0]) == np.where(yb == 1, 1.0, -1.0)).tolist())
    s = sel.state
    assert len(s.classes) == (4 if multiclass else 2)
    assert s.predicted == 600 and s.correct == sum(hits)
    assert s.recent.tolist() == hits[-RECENT:]


def _without_prequential(blob: bytes) -> bytes:
    """The same state as stored before the prequential counters existed."""
    header, body = codec.decode_header(blob)
    for name in ("predicted", "correct", "recent"):
        del header["fields"][name]
    raw = json.dumps(header).encode()
    return struct.pack("<4sHI", codec.MAGIC, codec.FORMAT_VERSION, len(raw)) + raw + blob[body:]


@pytest.mark.parametrize("algorithm", ["ofs", "fires"])
def test_states_stored_before_the_counters_load_with_them_empty(algorithm: str) -> None:
    X, y = _data(3, 200)
    names = [f"f{i}" for i in range(5)]
    cls, params = (
        (OFS, OFSParams(num_features=2))
        if algorithm == "ofs"
        else (FIRES, FIRESParams(num_features=2))
    )
    sel = cls.start(params, names)
    sel.learn_instances(X[:100], y[:100])
    assert sel.state.predicted == 100
    blob = codec.encode(sel.name, sel.params.to_dict(), sel.snapshot())
    old = codec.decode(_without_prequential(blob)).state
    assert (old.predicted, old.correct, old.recent.size) == (0, 0, 0)
    # It learns on as the state it is (every other field), and counts from there.
    cleared = replace(sel.snapshot(), predicted=0, correct=0, recent=old.recent)
    assert codec.encode(sel.name, {}, old) == codec.encode(sel.name, {}, cleared)
    resumed = cls.resume(params, old)
    resumed.learn_instances(X[100:], y[100:])
    sel.learn_instances(X[100:], y[100:])
    assert resumed.state.predicted == 100
    assert resumed.state.correct == sum(sel.state.recent.tolist()[100:])
    np.testing.assert_array_equal(resumed.selected(), sel.selected())
    assert resumed.state.recent.tolist() == sel.state.recent.tolist()[100:]
