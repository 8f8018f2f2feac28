"""The web page and the API docs page are served by the server, from package data,
and name no other host: they work where browsers cannot reach the internet."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
from fastapi.testclient import TestClient

from featurestream.api import create_app
from featurestream.api.ui import STATIC
from featurestream.config import Settings


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(store_url="memory://"))) as c:
        yield c


class References(HTMLParser):
    """Every URL an HTML page refers to (src, href) and the text of its inline scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_script = tag == "script"
        self.urls += [v for k, v in attrs if k in ("src", "href") and v is not None]

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


def references(html: str) -> References:
    found = References()
    found.feed(html)
    return found


@pytest.mark.parametrize("path", ["/ui/", "/docs"])
def test_pages_refer_to_this_server_only_and_everything_they_name_is_served(
    client: TestClient, path: str
) -> None:
    r = client.get(path)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    policy = r.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    assert "http" not in policy
    page = references(r.text)
    assert page.urls
    for url in page.urls:
        assert not urlsplit(url).netloc and not urlsplit(url).scheme, url
        asset = client.get(urljoin(f"http://testserver{path}", url))
        assert asset.status_code == 200, url
    for script in page.scripts:
        assert not re.search(r"https?://", script), script


def test_the_docs_page_loads_the_vendored_swagger_ui(client: TestClient) -> None:
    html = client.get("/docs").text
    assert "/ui/vendor/swagger-ui/swagger-ui-bundle.js" in html
    assert "/ui/vendor/swagger-ui/swagger-ui.css" in html
    assert '"validatorUrl": null' in html
    bundle = client.get("/ui/vendor/swagger-ui/swagger-ui-bundle.js")
    assert bundle.status_code == 200
    assert bundle.content == (STATIC / "vendor/swagger-ui/swagger-ui-bundle.js").read_bytes()
    assert "javascript" in bundle.headers["content-type"]
    assert client.get("/ui/vendor/swagger-ui/LICENSE").status_code == 200


def test_the_page_and_its_assets(client: TestClient) -> None:
    assert client.get("/ui", follow_redirects=False).headers["location"] == "/ui/"
    for name, kind in [("app.js", "javascript"), ("app.css", "text/css"), ("favicon.svg", "svg")]:
        r = client.get(f"/ui/{name}")
        assert r.status_code == 200 and kind in r.headers["content-type"], name
        assert r.headers["cache-control"] == "no-cache"
        assert r.headers["x-content-type-options"] == "nosniff"
    # The API is reached relative to the page, and the key never goes into a URL.
    script = client.get("/ui/app.js").text
    assert 'new URL("../", document.baseURI)' in script
    assert "sessionStorage" in script and "localStorage" not in script
    assert "token=" not in script
    assert client.get("/ui/missing.js").status_code == 404


def test_redoc_is_not_served_and_the_pages_are_not_in_the_api_description(
    client: TestClient,
) -> None:
    assert client.get("/redoc").status_code == 404
    paths = client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith(("/ui", "/docs"))]


def test_the_metrics_count_the_page_files_as_one_route(client: TestClient) -> None:
    for path in ("/ui/", "/ui/app.js", "/ui/vendor/swagger-ui/swagger-ui.css", "/ui/nope"):
        client.get(path)
    text = client.get("/metrics").text
    assert (
        'featurestream_http_requests_total{route="/ui/{path}",method="GET",status="200"} 3' in text
    )
    assert (
        'featurestream_http_requests_total{route="/ui/{path}",method="GET",status="404"} 1' in text
    )
    assert 'route="unmatched"' not in text
