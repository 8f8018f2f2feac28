"""The web page (``/ui/``) in headless Chromium against a live server on Redis.

The page lists a stream the test made, shows its selection (bars) and the
selection over time (the timeline), and follows a change of the selection
within 2 s over its WebSocket. With API keys on, it asks for the key, keeps
it in session storage only, and works once it has it (its WebSocket sends the
key as its first message). The API docs pages load nothing from elsewhere.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import numpy as np
import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from featurestream.api.auth import hash_key
from tests.support import ServeProcess, instances, names, wdbc

pytestmark = [pytest.mark.redis, pytest.mark.slow]

T = TypeVar("T")
# The bound the issue sets for a change of the selection to show on the page.
LIVE_WITHIN = 2.0
KEY_ACME, KEY_BETA = "acme-key-0123456789", "beta-key-9876543210"
# The server re-reads its keys file every second and closes revoked WebSockets then.
REVOKED_WITHIN = 5.0


def wait(driver: WebDriver, what: str, until: Callable[[WebDriver], T], timeout: float = 15) -> T:
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(until)
    except TimeoutException:
        raise AssertionError(f"the page did not show {what} within {timeout} s") from None


def js(driver: WebDriver, script: str, *args: Any) -> Any:
    return driver.execute_script(script, *args)


def shown_names(driver: WebDriver, selector: str) -> set[str]:
    found = js(
        driver,
        "return [...document.querySelectorAll(arguments[0])].map(e => e.dataset.name);",
        selector,
    )
    return set(found)


def foreign_resources(driver: WebDriver, origin: str) -> list[str]:
    """Every resource the page loaded that did not come from ``origin``."""
    loaded = js(
        driver,
        "return performance.getEntriesByType('resource').map(e => e.name).concat([location.href]);",
    )
    return [u for u in loaded if not u.startswith(origin + "/")]


def auth(key: str | None) -> dict[str, str]:
    return {} if key is None else {"Authorization": f"Bearer {key}"}


def create_feature_stream(url: str, stream_id: str, key: str | None = None) -> np.ndarray:
    X, y = wdbc()
    body = {"id": stream_id, "algorithm": "saola", "target": y.tolist()}
    r = httpx.post(url + "/v1/streams", json=body, headers=auth(key), timeout=30)
    assert r.status_code == 201, r.text
    return X


def post_columns(
    url: str, stream_id: str, columns: dict[str, np.ndarray], key: str | None = None
) -> dict[str, Any]:
    body = {"features": [{"name": n, "values": v.tolist()} for n, v in columns.items()]}
    r = httpx.post(
        f"{url}/v1/streams/{stream_id}/features", json=body, headers=auth(key), timeout=30
    )
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


def selected(url: str, stream_id: str, key: str | None = None) -> dict[str, Any]:
    r = httpx.get(f"{url}/v1/streams/{stream_id}/selected", headers=auth(key), timeout=30)
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


def check_evaluation(driver: WebDriver, url: str, stream_id: str, version: int) -> None:
    """The page shows the cross-validated score of knn on 5 folds the API gives."""
    r = httpx.get(
        f"{url}/v1/streams/{stream_id}/evaluation", params={"model": "knn", "folds": 5}, timeout=60
    )
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["version"] == version and doc["score_kind"] == "accuracy"
    expected = f"{doc['score']:.4f}"
    wait(
        driver,
        f"the evaluation of version {version}",
        lambda d: [e.text for e in d.find_elements(By.ID, "evaluation-score")] == [expected],
        timeout=60,
    )
    text = driver.find_element(By.ID, "evaluation").text
    assert "accuracy, mean of 5 folds, model knn" in text
    assert f"best single: {doc['best_single']['name']}" in text
    assert f"version {version}" in text


@pytest.fixture
def server(redis_url: str, key_prefix: str) -> Iterator[ServeProcess]:
    s = ServeProcess(redis_url, key_prefix).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def keyed_server(redis_url: str, key_prefix: str, tmp_path: Path) -> Iterator[ServeProcess]:
    keys = tmp_path / "api-keys"
    keys.write_text(f"acme:{hash_key(KEY_ACME)}\nbeta:{hash_key(KEY_BETA)}\n")
    s = ServeProcess(redis_url, key_prefix, env={"FEATURESTREAM_API_KEYS_FILE": str(keys)})
    s.start()
    try:
        yield s
    finally:
        s.stop()


def test_page_lists_the_stream_shows_selection_and_timeline_and_follows_changes(
    server: ServeProcess, browser: WebDriver, artefacts: Path
) -> None:
    url = server.url
    X = create_feature_stream(url, "ui-wdbc")
    # Three batches: the selection changes more than once, the timeline has columns.
    for start in (0, 4, 8):
        post_columns(url, "ui-wdbc", {f"f{i}": X[i] for i in range(start, start + 4)})
    before = selected(url, "ui-wdbc")
    names_before = {f["name"] for f in before["features"]}
    assert names_before, "the test's data should select something"

    browser.get(url + "/ui/")
    link = wait(
        browser,
        "the stream in the list",
        lambda d: d.find_element(By.CSS_SELECTOR, '#streams a[data-stream="ui-wdbc"]'),
    )
    link.click()
    wait(
        browser,
        "the selection's bars",
        lambda d: shown_names(d, "#selection-chart g.feature") == names_before,
    )
    history = httpx.get(url + "/v1/streams/ui-wdbc/history", timeout=30).json()["changes"]
    last = history[-1]["version"]
    wait(
        browser,
        "the timeline, ending with the current selection",
        lambda d: (
            shown_names(d, f'#timeline-chart rect.cell[data-version="{last}"]') == names_before
        ),
    )
    columns = js(
        browser,
        "return new Set([...document.querySelectorAll('#timeline-chart rect.cell')]"
        ".map(e => e.dataset.version)).size;",
    )
    assert columns == len({c["version"] for c in history if c["size"] > 0})
    # The score kind of SAOLA's default test labels the bars.
    assert "abs correlation" in browser.find_element(By.ID, "score-kind").text
    wait(browser, "the WebSocket live", lambda d: d.find_element(By.ID, "live").text == "live")
    check_evaluation(browser, url, "ui-wdbc", before["version"])

    # A column that is the target itself, blurred: SAOLA selects it.
    rng = np.random.default_rng(7)
    target = wdbc()[1]
    strong = target + 0.05 * rng.standard_normal(target.shape[0])
    t0 = time.monotonic()
    result = post_columns(url, "ui-wdbc", {"strong": strong})
    assert result["decisions"][0]["accepted"], result
    wait(
        browser,
        "the new selection",
        lambda d: "strong" in shown_names(d, "#selection-chart g.feature"),
        timeout=LIVE_WITHIN,
    )
    wait(
        browser,
        "the new timeline column",
        lambda d: "strong" in shown_names(d, "#timeline-chart rect.cell"),
        timeout=max(0.05, LIVE_WITHIN - (time.monotonic() - t0)),
    )
    latency = time.monotonic() - t0
    assert latency < LIVE_WITHIN, latency
    feed = browser.find_element(By.ID, "feed").text
    assert "strong" in feed, feed
    stability = httpx.get(url + "/v1/streams/ui-wdbc/stability", timeout=30).json()
    wait(
        browser,
        "Nogueira's stability",
        lambda d: d.find_element(By.ID, "nogueira").text == f"{stability['nogueira']:.3f}",
    )

    # The page re-evaluates on demand only: it says the evaluation is stale, then shows
    # the new version's.
    wait(
        browser,
        "that the evaluation is stale",
        lambda d: d.find_element(By.ID, "evaluation-stale").is_displayed(),
    )
    browser.find_element(By.CSS_SELECTOR, "#evaluation-form button").click()
    check_evaluation(browser, url, "ui-wdbc", result["version"])
    assert not browser.find_element(By.ID, "evaluation-stale").is_displayed()

    assert foreign_resources(browser, url) == []
    browser.save_screenshot(str(artefacts / "ui-stream.png"))


def test_page_asks_for_the_key_keeps_it_out_of_urls_and_works_with_it(
    keyed_server: ServeProcess, browser: WebDriver, artefacts: Path
) -> None:
    url = keyed_server.url
    X = create_feature_stream(url, "acme-stream", KEY_ACME)
    post_columns(url, "acme-stream", {f"f{i}": X[i] for i in range(6)}, KEY_ACME)
    create_feature_stream(url, "beta-stream", KEY_BETA)
    names = {f["name"] for f in selected(url, "acme-stream", KEY_ACME)["features"]}

    browser.get(url + "/ui/#stream=acme-stream")
    wait(browser, "the key prompt", lambda d: js(d, "return document.getElementById('auth').open"))
    browser.save_screenshot(str(artefacts / "ui-key-prompt.png"))
    assert browser.find_element(By.ID, "streams").text == ""

    box = browser.find_element(By.ID, "auth-key")
    box.send_keys("not-a-key")
    browser.find_element(By.ID, "auth-submit").click()
    wait(
        browser,
        "that the key was refused",
        lambda d: (
            "refused" in d.find_element(By.ID, "auth-error").text
            and js(d, "return document.getElementById('auth').open")
        ),
    )

    browser.find_element(By.ID, "auth-key").send_keys(KEY_ACME)
    browser.find_element(By.ID, "auth-submit").click()
    wait(
        browser,
        "the tenant's stream",
        lambda d: "acme-stream" in d.find_element(By.ID, "streams").text,
    )
    assert "beta-stream" not in browser.find_element(By.ID, "streams").text
    wait(
        browser,
        "the selection",
        lambda d: shown_names(d, "#selection-chart g.feature") == names,
    )
    # The WebSocket authenticated with its first message.
    wait(browser, "the WebSocket live", lambda d: d.find_element(By.ID, "live").text == "live")
    rng = np.random.default_rng(3)
    target = wdbc()[1]
    post_columns(
        url, "acme-stream", {"strong": target + 0.05 * rng.standard_normal(target.size)}, KEY_ACME
    )
    wait(
        browser,
        "the new selection, live",
        lambda d: "strong" in shown_names(d, "#selection-chart g.feature"),
        timeout=LIVE_WITHIN,
    )

    assert js(browser, "return sessionStorage.getItem('featurestream.key')") == KEY_ACME
    assert js(browser, "return localStorage.length") == 0
    loaded = js(browser, "return performance.getEntriesByType('resource').map(e => e.name)")
    assert loaded and not [u for u in loaded if KEY_ACME in u]
    assert KEY_ACME not in browser.current_url

    # A reload in the same tab needs no key again.
    browser.refresh()
    wait(
        browser, "the stream list", lambda d: "acme-stream" in d.find_element(By.ID, "streams").text
    )
    assert not js(browser, "return document.getElementById('auth').open")
    browser.save_screenshot(str(artefacts / "ui-with-key.png"))

    # Revoking the key closes the page's WebSocket (1008): the page asks again.
    wait(browser, "the WebSocket live", lambda d: d.find_element(By.ID, "live").text == "live")
    keys = Path(keyed_server.env["FEATURESTREAM_API_KEYS_FILE"])
    keys.write_text(f"beta:{hash_key(KEY_BETA)}\n")
    st = keys.stat()
    os.utime(keys, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    wait(
        browser,
        "the key prompt again",
        lambda d: js(d, "return document.getElementById('auth').open"),
        timeout=REVOKED_WITHIN,
    )
    assert js(browser, "return sessionStorage.getItem('featurestream.key')") is None


def test_api_docs_render_from_this_server_only(
    server: ServeProcess, browser: WebDriver, artefacts: Path
) -> None:
    browser.get(server.url + "/docs")
    title = wait(
        browser,
        "the rendered API description at /docs",
        lambda d: d.find_element(By.CSS_SELECTOR, ".swagger-ui .info .title"),
        timeout=30,
    )
    assert "featurestream" in title.text
    # The operations are listed (the spec was read and rendered).
    assert browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")
    assert foreign_resources(browser, server.url) == []
    browser.save_screenshot(str(artefacts / "api-docs.png"))


# Before the page's own script runs: answer the reads of an older server, which has no
# history, stability or evaluation endpoints, with that server's 404.
OLDER_SERVER = """
const realFetch = window.fetch.bind(window);
window.fetch = (input, init) => {
  const url = new URL(input instanceof Request ? input.url : String(input), location.href);
  if (/\\/(history|stability|evaluation)$/.test(url.pathname)) {
    const body = JSON.stringify({type: "/problems/not-found", title: "Not Found", status: 404});
    return Promise.resolve(new Response(body, {
      status: 404, headers: {"content-type": "application/problem+json"},
    }));
  }
  return realFetch(input, init);
};
"""


def test_sections_a_server_lacks_say_not_available_and_the_rest_works(
    server: ServeProcess, browser: WebDriver, artefacts: Path
) -> None:
    url = server.url
    X = create_feature_stream(url, "older")
    post_columns(url, "older", {f"f{i}": X[i] for i in range(6)})
    names = {f["name"] for f in selected(url, "older")["features"]}
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": OLDER_SERVER})
    browser.get(url + "/ui/#stream=older")
    wait(
        browser,
        "the selection's bars",
        lambda d: shown_names(d, "#selection-chart g.feature") == names,
    )
    for section in ("timeline", "stability", "evaluation"):
        wait(
            browser,
            f"'Not available' in the {section} section",
            lambda d, s=section: d.find_element(By.ID, s).text.startswith("Not available"),
        )
    wait(browser, "the WebSocket live", lambda d: d.find_element(By.ID, "live").text == "live")
    browser.save_screenshot(str(artefacts / "ui-older-server.png"))


def test_an_instance_stream_shows_weights_by_magnitude_and_prequential_accuracy(
    server: ServeProcess, browser: WebDriver
) -> None:
    url = server.url
    X, y = instances()
    body = {
        "id": "ofs-stream",
        "algorithm": "ofs",
        "params": {"num_features": 5},
        "feature_names": names(X.shape[1]),
    }
    assert httpx.post(url + "/v1/streams", json=body, timeout=30).status_code == 201
    batch = {"X": X[:300].tolist(), "y": y[:300].tolist()}
    r = httpx.post(url + "/v1/streams/ofs-stream/instances", json=batch, timeout=60)
    assert r.status_code == 200, r.text
    chosen = {f["name"] for f in selected(url, "ofs-stream")["features"]}
    assert len(chosen) == 5
    doc = httpx.get(url + "/v1/streams/ofs-stream/evaluation", timeout=60).json()
    assert doc["kind"] == "prequential" and doc["instances"] == 300

    browser.get(url + "/ui/#stream=ofs-stream")
    wait(
        browser,
        "the selection's bars",
        lambda d: shown_names(d, "#selection-chart g.feature") == chosen,
    )
    # OFS's scores are signed weights: the bars show their magnitude, and say so.
    kind = browser.find_element(By.ID, "score-kind").text
    assert "weight (higher is better; bars show |score|)" in kind, kind
    wait(
        browser,
        "the prequential accuracy",
        lambda d: (
            [e.text for e in d.find_elements(By.ID, "evaluation-score")]
            == [f"{doc['accuracy']:.4f}"]
        ),
    )
    assert "over 300 instances" in browser.find_element(By.ID, "evaluation").text


def test_a_selection_of_150000_features_draws_its_largest_bars_and_counts_the_rest(
    server: ServeProcess, browser: WebDriver
) -> None:
    url = server.url
    d = 150_000
    body = {
        "id": "wide",
        "algorithm": "fires",
        "params": {"num_features": d},
        "feature_names": names(d),
    }
    assert httpx.post(url + "/v1/streams", json=body, timeout=60).status_code == 201
    X = np.random.default_rng(3).normal(size=(2, d))
    batch = {"X": X.tolist(), "y": [0, 1]}
    r = httpx.post(url + "/v1/streams/wide/instances", json=batch, timeout=120)
    assert r.status_code == 200, r.text[:300]
    features = selected(url, "wide")["features"]
    assert len(features) == d
    largest = sorted(range(d), key=lambda i: (-abs(features[i]["score"]), i))[:200]
    expected = {features[i]["name"] for i in largest}

    browser.get(url + "/ui/#stream=wide")
    wait(
        browser,
        "the largest bars",
        lambda d_: shown_names(d_, "#selection-chart g.feature") == expected,
        timeout=60,
    )
    note = browser.find_element(By.ID, "selection-note").text
    assert note == f"Showing the 200 largest of {d}; {d - 200} more not drawn.", note
    assert browser.find_element(By.ID, "selection-version").text.endswith(f"{d} selected")
    assert not browser.find_elements(By.CSS_SELECTOR, "#selection .error")


def test_a_selection_announced_by_a_notice_is_read_and_shown(
    redis_url: str, key_prefix: str, browser: WebDriver
) -> None:
    """Selection messages list at most 1 feature here: the page reads each larger
    selection the server announces with GET /selected."""
    env = {"FEATURESTREAM_WS_SELECTION_MAX_FEATURES": "1"}
    server = ServeProcess(redis_url, key_prefix, env=env).start()
    try:
        url = server.url
        X = create_feature_stream(url, "noticed")
        post_columns(url, "noticed", {f"f{i}": X[i] for i in range(12)})
        before = {f["name"] for f in selected(url, "noticed")["features"]}
        assert len(before) > 1, "the test's data should select more than a message lists"
        browser.get(url + "/ui/#stream=noticed")
        wait(
            browser,
            "the selection",
            lambda d: shown_names(d, "#selection-chart g.feature") == before,
        )
        wait(browser, "the WebSocket live", lambda d: d.find_element(By.ID, "live").text == "live")
        target = wdbc()[1]
        strong = target + 0.05 * np.random.default_rng(7).standard_normal(target.shape[0])
        result = post_columns(url, "noticed", {"strong": strong})
        assert result["decisions"][0]["accepted"], result
        after = {f["name"] for f in selected(url, "noticed")["features"]}
        assert len(after) > 1 and after != before
        wait(
            browser,
            "the new selection",
            lambda d: shown_names(d, "#selection-chart g.feature") == after,
            timeout=LIVE_WITHIN * 3,
        )
        version = f"v{result['version']} · {len(after)} selected"
        assert browser.find_element(By.ID, "selection-version").text == version
        feed = browser.find_element(By.ID, "feed").text
        assert f"v{result['version']}" in feed and f"({len(after)} selected)" in feed, feed
        assert not browser.find_elements(By.CSS_SELECTOR, "#selection .error")
    finally:
        server.stop()


def test_the_timeline_marks_the_versions_with_a_drift(
    server: ServeProcess, browser: WebDriver
) -> None:
    url = server.url
    rng = np.random.default_rng(7)
    X = rng.normal(size=(3000, 6))
    y = np.where(X[:, 0] > 0, 1, 0)
    y[1500:] = np.where(X[1500:, 3] > 0, 1, 0)
    params = {"num_features": 2, "drift": "page_hinkley", "on_drift": "reset"}
    body = {"id": "drifting", "algorithm": "ofs", "params": params, "feature_names": names(6)}
    assert httpx.post(url + "/v1/streams", json=body, timeout=30).status_code == 201
    for lo in range(0, 3000, 100):
        batch = {"X": X[lo : lo + 100].tolist(), "y": y[lo : lo + 100].tolist()}
        r = httpx.post(url + "/v1/streams/drifting/instances", json=batch, timeout=60)
        assert r.status_code == 200, r.text
    history = httpx.get(url + "/v1/streams/drifting/history", params={"limit": 1000}).json()
    drifted = [c["version"] for c in history["changes"] if c["drifts"]]
    assert drifted

    browser.get(url + "/ui/#stream=drifting")
    wait(
        browser,
        "a marker for each version with a drift",
        lambda d: (
            js(
                d,
                "return [...document.querySelectorAll('#timeline-chart line.drift-mark')]"
                ".map(e => Number(e.dataset.version));",
            )
            == drifted
        ),
    )
    told = js(browser, "return document.querySelector('line.drift-mark title').textContent;")
    assert told.startswith("drift (page_hinkley) at instance ") and "restarted" in told, told
