"""What a score means (issue #16, point 6): the catalogue says it, the CLI ranks by it.

A correlation (higher is better) for SAOLA, a p-value (lower is better) for
Alpha-investing, a gradient for Grafting's decisions but a signed weight for its
selection: ``GET /v1/algorithms`` names each, and ``featurestream selected``
shows the kind and lists the selection best first.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from featurestream._entry import main
from featurestream_client import Client
from tests import support

NAMES = support.names(30)


def test_the_catalogue_names_every_score_kind_and_describes_every_parameter(url: str) -> None:
    listed = httpx.get(f"{url}/v1/algorithms").json()["algorithms"]
    by_name = {a["name"]: a for a in listed}
    for a in listed:
        assert a["score_kind"] and isinstance(a["higher_is_better"], bool), a["name"]
        for name, prop in a["params_schema"]["properties"].items():
            assert prop.get("description"), f"{a['name']}.{name} has no description"
        if a["kind"] == "features":
            assert a["decision_score_kind"] and a["decision_higher_is_better"] is not None
        else:
            assert a["decision_score_kind"] is None
    assert by_name["saola"]["score_kind"] == "abs_correlation"
    assert by_name["saola"]["score_kind_by"]["test"]["su"] == "symmetrical_uncertainty"
    assert by_name["alpha_investing"]["score_kind"] == "p_value"
    assert by_name["alpha_investing"]["higher_is_better"] is False
    grafting = by_name["grafting"]
    assert (grafting["score_kind"], grafting["score_by_magnitude"]) == ("weight", True)
    assert grafting["decision_score_kind"] == "abs_gradient"


def table(out: str) -> tuple[str, list[tuple[str, float]]]:
    """The score column's title, and the (name, score) rows of a ``selected`` table."""
    lines = out.splitlines()
    header = lines[1]
    rows = [line.split() for line in lines[2:]]
    return header, [(r[1], float(r[2])) for r in rows]


@pytest.mark.parametrize(
    ("algorithm", "kind", "order"),
    [
        ("saola", "abs_correlation", "highest first"),
        ("alpha_investing", "p_value", "lowest first"),
        ("grafting", "weight", "largest |score| first"),
    ],
)
def test_selected_shows_the_kind_and_lists_the_best_first(
    url: str, sid: str, algorithm: str, kind: str, order: str, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y = support.wdbc()
    with Client(url) as c:
        s = c.create_stream(algorithm, target=y, id=sid)
        s.add_features(X.T, names=NAMES)
        stored = [(f.name, f.score) for f in s.selected().features]
    assert len(stored) >= 2
    assert main(["selected", sid, "--url", url]) == 0
    header, rows = table(capsys.readouterr().out)
    assert f"score ({kind}, {order})" in header
    assert sorted(rows) == sorted((n, float(f"{v:.6g}")) for n, v in stored)
    scores = np.array([v for _, v in rows])
    if algorithm == "alpha_investing":
        assert (np.diff(scores) >= 0).all(), rows  # p-values: the smallest first
    elif algorithm == "grafting":
        assert (np.diff(np.abs(scores)) <= 0).all(), rows  # signed weights: by |w|
    else:
        assert (np.diff(scores) <= 0).all(), rows
    assert main(["selected", sid, "--url", url, "--json"]) == 0
    assert f'"score_kind": "{kind}"' in capsys.readouterr().out
