"""The web page (``/ui/``) and the API documentation page (``/docs``).

Every file they load is package data under ``static/``: the page's own
``index.html``, ``app.js`` and ``app.css``, and the vendored Swagger UI
bundle (``static/vendor/swagger-ui/``, with its licence), so the pages work
where the browser cannot reach the internet. Each response carries a
Content-Security-Policy that allows nothing but this server, which the
browser tests check too. There is no ``/redoc``: ReDoc's bundle fetches its
logo from its vendor's CDN.

The page calls the API with the key the user typed (kept in the browser's
session storage, sent as ``Authorization: Bearer``); its WebSocket sends the
key as its first message (``?auth=message``, see ``api/ws/route.py``), so a
key never appears in a URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

STATIC = Path(__file__).parent / "static"

# The page: its own script and style only; fetches and the WebSocket go to this origin.
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# Swagger UI: FastAPI's HTML starts it with an inline script. Nothing from another host.
DOCS_POLICY = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def security_headers(policy: str) -> list[tuple[bytes, bytes]]:
    """The headers every response of the pages carries."""
    return [
        (b"content-security-policy", policy.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
    ]


@dataclass(frozen=True)
class _Files:
    """What the metrics label the page's files with (one route, not one per file)."""

    path: str = "/ui/{path}"


class PageFiles:
    """The static files, with the security headers and ``Cache-Control: no-cache``
    (the browser revalidates, by ETag, so an upgraded server's page is seen at once)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = _Files()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", ()) if k.lower() != b"cache-control"
                ]
                headers += security_headers(PAGE_POLICY)
                headers.append((b"cache-control", b"no-cache"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _docs_page(page: HTMLResponse) -> Response:
    for name, value in security_headers(DOCS_POLICY):
        page.headers[name.decode()] = value.decode()
    return page


def install(app: FastAPI) -> None:
    """Mount ``/ui/`` and serve ``/docs`` from the package's files.

    The app must be built with ``docs_url=None, redoc_url=None`` (FastAPI's own
    pages load their scripts from a CDN).
    """
    app.mount("/ui", PageFiles(StaticFiles(directory=STATIC, html=True)), name="ui")

    @app.get("/ui", include_in_schema=False)
    async def page(request: Request) -> Response:
        return RedirectResponse(f"{request.scope.get('root_path', '')}/ui/", status_code=308)

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> Response:
        root = request.scope.get("root_path", "")
        return _docs_page(
            get_swagger_ui_html(
                openapi_url=f"{root}{app.openapi_url}",
                title=f"{app.title} API",
                swagger_js_url=f"{root}/ui/vendor/swagger-ui/swagger-ui-bundle.js",
                swagger_css_url=f"{root}/ui/vendor/swagger-ui/swagger-ui.css",
                swagger_favicon_url=f"{root}/ui/favicon.svg",
                # No badge that sends the spec to validator.swagger.io.
                swagger_ui_parameters={"validatorUrl": None},
            )
        )


__all__ = ["DOCS_POLICY", "PAGE_POLICY", "STATIC", "install"]
