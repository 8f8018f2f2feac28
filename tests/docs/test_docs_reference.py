"""The reference parts of the docs are complete and current.

* docs/api.md and the settings table of docs/operations.md are what
  ``python docs/generate.py`` writes today;
* docs/algorithms.md documents every selector, each with every parameter, its
  default and its allowed values, and the topics a reader needs;
* concepts.md names every decision reason, operations.md every metric;
* every relative link points to an existing file and heading.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import pkgutil
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from starlette.testclient import TestClient

import featurestream.selectors as selectors_pkg
from featurestream.api import create_app
from featurestream.config import Settings
from featurestream.selectors import REGISTRY, Reason, Selector
from featurestream.selectors.params import NoneOr

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- generated


def test_api_reference_is_current() -> None:
    expected = generator().render_api()
    assert (DOCS / "api.md").read_text() == expected, (
        "docs/api.md is stale: run python docs/generate.py"
    )


def test_settings_table_is_current() -> None:
    text = (DOCS / "operations.md").read_text()
    assert generator().render_operations(text) == text, (
        "the settings table of docs/operations.md is stale: run python docs/generate.py"
    )


def test_generate_check_reports_a_stale_file(tmp_path: Path, monkeypatch: Any) -> None:
    gen = generator()
    stale = tmp_path / "api.md"
    stale.write_text("# old\n")
    monkeypatch.setattr(gen, "API_MD", stale)
    monkeypatch.setattr(gen, "OPERATIONS_MD", DOCS / "operations.md")
    assert gen.main(["--check"]) == 1
    stale.write_text(gen.render_api())
    assert gen.main(["--check"]) == 0


def settings_table_rows() -> dict[str, list[str]]:
    text = (DOCS / "operations.md").read_text()
    start = text.index("<!-- settings-table:start -->")
    end = text.index("<!-- settings-table:end -->")
    rows = {}
    for line in text[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0].startswith("`FEATURESTREAM_"):
            rows[cells[0].strip("`")] = cells
    return rows


def test_settings_table_lists_every_setting_with_its_default() -> None:
    rows = settings_table_rows()
    prefix = Settings.model_config.get("env_prefix", "")
    assert set(rows) == {f"{prefix}{name.upper()}" for name in Settings.model_fields}
    for name, field in Settings.model_fields.items():
        cells = rows[f"{prefix}{name.upper()}"]
        assert cells[2] == f"`{field.default}`", name
        assert cells[4], f"{name} has no meaning in the table"


# --------------------------------------------------------------------------- algorithms


def selector_classes() -> dict[str, type[Selector[Any, Any]]]:
    """Every selector class of featurestream.selectors, registered or not yet."""
    found: dict[str, type[Selector[Any, Any]]] = dict(REGISTRY)
    for info in pkgutil.iter_modules(selectors_pkg.__path__):
        module = importlib.import_module(f"{selectors_pkg.__name__}.{info.name}")
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, Selector)
                and obj.__module__ == module.__name__
                and isinstance(getattr(obj, "name", None), str)
            ):
                found.setdefault(obj.name, obj)
    return found


def algorithm_sections() -> dict[str, str]:
    """registry key -> the text of its section (``## Title (`key`)``)."""
    text = (DOCS / "algorithms.md").read_text()
    sections: dict[str, str] = {}
    matches = list(re.finditer(r"^## .*\(`([a-z0-9_]+)`\)\s*$", text, re.M))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        sections[match.group(1)] = text[match.end() : end]
    return sections


def param_rows(section: str) -> dict[str, list[str]]:
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"`\w+`", cells[0]):
            rows[cells[0].strip("`")] = cells
    return rows


def test_every_registered_algorithm_is_documented() -> None:
    missing = set(REGISTRY) - set(algorithm_sections())
    assert not missing, f"docs/algorithms.md has no section for {sorted(missing)}"


def test_every_documented_algorithm_exists() -> None:
    unknown = set(algorithm_sections()) - set(selector_classes())
    assert not unknown, f"docs/algorithms.md documents unknown algorithms {sorted(unknown)}"


@pytest.mark.parametrize("key", sorted(selector_classes()))
def test_algorithm_parameters_are_documented_with_defaults_and_ranges(key: str) -> None:
    section = algorithm_sections().get(key)
    assert section is not None, f"docs/algorithms.md has no section for {key!r}"
    params = selector_classes()[key].params_type
    rows = param_rows(section)
    fields = {f.name: f for f in dataclasses.fields(params)}
    assert set(rows) == set(fields), f"{key}: documented {sorted(rows)}, actual {sorted(fields)}"
    for name, f in fields.items():
        _, default, allowed, meaning = rows[name]
        if name in params.required_fields():
            assert default == "required", f"{key}.{name}"
        else:
            assert default.startswith("`") and json.loads(default.strip("`")) == f.default, (
                f"{key}.{name}: default {default} documented, {f.default!r} in the code"
            )
        rule = params.constraints[name]
        expected = (
            rule.inner.describe()
            if name in params.required_fields() and isinstance(rule, NoneOr)
            else rule.describe()
        )
        assert allowed == expected, f"{key}.{name}: allowed {allowed!r}, code says {expected!r}"
        assert meaning, f"{key}.{name} has no meaning"


@pytest.mark.parametrize("key", sorted(selector_classes()))
def test_algorithm_sections_cover_assumptions_cost_choice_and_paper(key: str) -> None:
    section = algorithm_sections().get(key, "")
    for topic in ("**Assumes**", "**Cost**", "**Choose it**", "Paper:"):
        assert topic in section, f"{key}: no {topic} in docs/algorithms.md"
    summary = (DOCS / "algorithms.md").read_text().split("\n## ", 1)[0]
    assert f"| `{key}` |" in summary, f"{key} is missing from the overview table"
    assert f"`{key}`" in (DOCS / "index.md").read_text(), f"{key} is missing from docs/index.md"
    kind = selector_classes()[key].kind
    assert re.search(rf"\| `{key}` \| {kind}\b", summary), f"{key}: wrong kind in the overview"


# --------------------------------------------------------------------------- concepts, metrics


def test_concepts_names_every_decision_reason() -> None:
    text = (DOCS / "concepts.md").read_text()
    for reason in Reason:
        assert f"| `{reason.value}` |" in text, f"reason {reason.value!r} is not explained"


def test_operations_lists_every_metric() -> None:
    # With the start-up kernel warm-up (on by default, off in the tests): its gauge too.
    with TestClient(create_app(Settings(warm_kernels=True))) as client:
        client.get("/healthz")
        exposed = set(re.findall(r"^# TYPE (\w+) ", client.get("/metrics").text, re.M))
    text = (DOCS / "operations.md").read_text()
    documented = set(re.findall(r"^\| `(featurestream_\w+)", text, re.M))
    assert exposed == documented


# --------------------------------------------------------------------------- links


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


DOCUMENTS = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+://", target) or target.startswith("mailto:"):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        assert resolved.exists(), f"{path.name}: link to missing {target}"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{path.name}: no heading #{anchor} in {target}"


def test_alert_rules_use_only_exposed_metrics() -> None:
    with TestClient(create_app(Settings())) as client:
        client.get("/healthz")
        exposed = set(re.findall(r"^# TYPE (\w+) ", client.get("/metrics").text, re.M))
    text = (DOCS / "operations.md").read_text()
    section = text.split("### Alerts", 1)[1].split("\n## ", 1)[0]
    used = set(re.findall(r"\b(featurestream_\w+?)(?:_bucket)?\b", section))
    assert used, "the alerts section names no metric"
    assert used <= exposed, used - exposed
