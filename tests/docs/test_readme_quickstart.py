"""The README's quick start selects what it promises, against a live server.

Its target of 8 measurements must be declared continuous: left at ``auto``,
eight distinct integers resolve as eight classes and SAOLA then selects
nothing from the three columns (docs/algorithms.md, "Targets").
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import httpx

from tests.docs import snippets as s
from tests.docs.test_doc_snippets_run import server  # noqa: F401  (the fixture)


def _quickstart_bodies() -> list[tuple[str, dict[str, object]]]:
    """(path, JSON body) of each ``curl -X POST`` of the README's quick start, in order."""
    text = (s.ROOT / "README.md").read_text()
    section = text[text.index("## Quick start") :]
    section = section[: section.index("\n## ", 1)]
    calls = re.findall(r"curl -s -X POST localhost:8000(\S+) .*?-d '(.*?)'", section, re.S)
    return [(path, json.loads(body)) for path, body in calls]


def test_the_readme_quick_start_selects_the_relevant_column(
    server: Callable[[], str],  # noqa: F811
) -> None:
    calls = _quickstart_bodies()
    assert [path for path, _ in calls] == ["/v1/streams", "/v1/streams/demo/features"]
    url = server()
    created = httpx.post(url + calls[0][0], json=calls[0][1], timeout=10)
    assert created.status_code == 201, created.text
    assert created.json()["target_type"] == "continuous"
    answer = httpx.post(url + calls[1][0], json=calls[1][1], timeout=10)
    assert answer.status_code == 200, answer.text
    decisions = {d["name"]: d for d in answer.json()["decisions"]}
    assert answer.json()["selected"] == ["a"]
    assert decisions["b"]["reason"] == "redundant" and decisions["b"]["by"] == "a"
    assert decisions["noise"]["reason"] == "irrelevant"
