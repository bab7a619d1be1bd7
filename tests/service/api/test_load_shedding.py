"""The database gate (service.api.load_shedding) and the busy-database answers (service.api.errors): a request that
gets no turn in time is a 503 with Retry-After, a busy database a 503, a broken one still a 500, and no
route keeps a pooled connection once it has answered."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from sqlalchemy import exc as sa_exc

import service.api.routes.studies as studies_routes
from service.api.load_shedding import DatabaseGate
from studies.store import list_studies
from tests.factories import QUICK_SPEC_YAML
from tests.service.conftest import AUTH

YAML = {"Content-Type": "application/yaml", **AUTH}


@pytest.fixture
def lenient_client(app) -> Iterator[TestClient]:
    """A client that gets the 500 a server error answers, rather than the exception."""
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def test_a_request_that_gets_no_turn_in_time_is_a_503_with_retry_after(app, client, monkeypatch):
    app.state.database_gate = DatabaseGate(app.state.engine, wait_s=0.3, slots=1)
    release, holding = threading.Event(), threading.Event()

    def slow_listing(session, **filters):
        holding.set()
        release.wait(timeout=30)
        return list_studies(session, **filters)

    monkeypatch.setattr(studies_routes, "list_studies", slow_listing)
    first: dict[str, int] = {}
    holder = threading.Thread(target=lambda: first.update(status=client.get("/studies").status_code))
    holder.start()
    try:
        assert holding.wait(timeout=30), "the first request never reached the database"
        shed = client.post("/studies", content=QUICK_SPEC_YAML, headers=YAML)
    finally:
        release.set()
        holder.join(timeout=30)
    assert shed.status_code == 503 and shed.headers["Retry-After"].isdigit()
    assert "busy" in shed.json()["detail"]
    assert first == {"status": 200}
    assert client.get("/studies").json() == []  # the shed submission stored nothing


def _locked_error(tmp_path) -> sqlite3.OperationalError:
    """The error SQLite raises for a write lock another connection holds (not one made up)."""
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        sqlite3.connect(path, timeout=0, isolation_level=None).execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        return error
    finally:
        holder.close()
    raise AssertionError("the second writer got the lock")


def test_a_busy_database_is_a_503_with_retry_after_and_a_broken_one_a_500(
    lenient_client, monkeypatch, tmp_path
):
    failures: list[Exception] = [
        sa_exc.OperationalError("BEGIN IMMEDIATE", {}, _locked_error(tmp_path)),
        sa_exc.TimeoutError("QueuePool limit of size 5 overflow 10 reached"),
        sa_exc.OperationalError("SELECT 1", {}, sqlite3.OperationalError("no such table: studies")),
    ]

    def failing(session, **_filters):
        raise failures.pop(0)

    monkeypatch.setattr(studies_routes, "list_studies", failing)
    statuses = [lenient_client.get("/studies") for _ in range(3)]
    assert [(r.status_code, "Retry-After" in r.headers) for r in statuses] == [
        (503, True),
        (503, True),
        (500, False),
    ]


def test_no_route_holds_a_pooled_connection_once_it_answered(client, app_engine):
    created = client.post("/studies", content=QUICK_SPEC_YAML, headers=YAML)
    assert created.status_code == 201
    study_id = created.json()["id"]
    for path in ("/studies", f"/studies/{study_id}", f"/studies/{study_id}/trials", "/results/digits"):
        client.get(path)
        pool = app_engine.pool
        if isinstance(pool, sa.pool.QueuePool):
            assert pool.checkedout() == 0, path
