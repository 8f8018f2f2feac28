"""A document that fails validation is the client's fault (422) only when the client sent
it; one the server built itself (a response model) is the server's (500, logged)."""

from __future__ import annotations

import logging

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from featurestream.api import problems
from featurestream.api.schemas import EventsPublic, FeatureBatch


def _app() -> FastAPI:
    app = FastAPI()
    problems.install(app)

    @app.post("/in")
    async def takes(request: Request) -> dict[str, str]:
        FeatureBatch.model_validate_json(await request.body())
        return {"ok": "yes"}

    @app.get("/out")
    async def gives() -> EventsPublic:
        # A server bug: an event type the response model does not know.
        return EventsPublic(events=[{"id": "1-0", "version": 1, "seq": None, "producer": None,
                                     "type": "surprise"}], next=None)  # fmt: skip

    return app


def test_a_body_the_client_sent_is_a_422(caplog: pytest.LogCaptureFixture) -> None:
    with TestClient(_app()) as client:
        r = client.post("/in", content=b'{"features": 3}', headers={"content-type": "x"})
    assert r.status_code == 422
    assert r.json()["type"].endswith("/invalid-input")
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]


def test_a_document_the_server_built_is_a_500(caplog: pytest.LogCaptureFixture) -> None:
    with TestClient(_app(), raise_server_exceptions=False) as client:
        r = client.get("/out")
    assert r.status_code == 500
    assert r.json()["type"].endswith("/internal-error")
    assert [rec for rec in caplog.records if "unhandled error on GET /out" in rec.getMessage()]
