"""/healthz and /readyz."""

from __future__ import annotations

import sqlalchemy as sa


def test_healthz_answers_ok(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_is_ready_when_the_database_answers_and_reports_ray_and_mlflow(client):
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200 and body["status"] == "ready"
    assert body["database"]["reachable"] is True
    # Nothing listens on the test ports: reported, but not fatal (studies queue until the cluster returns).
    assert body["ray"]["reachable"] is False and body["ray"]["url"].startswith("http://127.0.0.1:9")
    assert body["mlflow"]["reachable"] is False and body["mlflow"]["url"] == "http://127.0.0.1:9/health"


def test_readyz_is_503_when_the_database_is_unreachable(client, app):
    app.state.engine = sa.create_engine("postgresql+psycopg://nobody@127.0.0.1:9/none")
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["database"] == {
        "reachable": False,
        "backend": "postgresql",
        "detail": "OperationalError",
    }
