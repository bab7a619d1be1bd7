"""GET /results/{dataset}?metric=: a metric no selected trial stored, or one stored without a known better
direction (studies.spec.METRIC_DIRECTIONS), is a 422 that lists the metrics the trials can be compared on,
not an empty table or a guessed direction."""

from __future__ import annotations

import pytest

from tests.service.api.routes.test_results import finished_study  # noqa: F401 (the fixture, shared)

pytestmark = pytest.mark.usefixtures("finished_study")


def test_an_unknown_metric_is_a_422_at_the_query_naming_the_stored_metrics(client):
    response = client.get("/results/digits", params={"metric": "test_acuracy"})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["query", "metric"] and error["input"] == "test_acuracy"
    assert "unknown metric 'test_acuracy'" in error["msg"]
    assert "was not stored" in error["msg"]
    assert "compared on test_accuracy, train_loss, val_accuracy;" in error["msg"]


def test_every_format_refuses_an_unknown_metric(client):
    for fmt in ("json", "csv", "md", "html"):
        assert client.get("/results/digits", params={"metric": "nope", "format": fmt}).status_code == 422


def test_a_stored_metric_still_builds_the_table(client):
    response = client.get("/results/digits", params={"metric": "test_accuracy"})
    assert response.status_code == 200 and response.json()["metric"] == "test_accuracy"
    assert {row["n"] for row in response.json()["rows"]} == {3}


def test_a_stored_metric_without_a_better_direction_is_a_422_naming_the_comparable_ones(client):
    response = client.get("/results/digits", params={"metric": "gate_entropy_mean"})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["query", "metric"] and error["input"] == "gate_entropy_mean"
    assert "has no known better direction" in error["msg"]
    assert "test_accuracy, train_loss, val_accuracy" in error["msg"]
