"""DELETE /studies/{id}?confirm=<id>: an ended study goes with every row keyed by it, behind the token and
the confirmation; a study that may still change is a 409, a confirmation that does not repeat the id a 422,
an unknown id a 404; its MLflow parent run is tagged normlab.deleted=true, best-effort, never deleted."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import pytest
import sqlalchemy as sa

from studies.store import (
    StudyLook,
    mark_announced,
    record_attempt,
    record_submit_failure,
    session_scope,
    set_study_status,
    set_tags,
)
from studies.store.tables import Base
from tests.factories import add_epochs, add_trial, start_study, submit
from tests.service.conftest import API_TOKEN, AUTH


class RecordingRuns:
    """Stands in for the MLflow server: records which study's runs it was asked to mark."""

    def __init__(self, *, fail: bool = False) -> None:
        self.marked: list[dict] = []
        self.fail = fail

    def mark_deleted(self, **study) -> str | None:
        if self.fail:
            raise ConnectionError("MLflow is down")
        self.marked.append(study)
        return study["parent_run_id"]


@pytest.fixture
def runs(app) -> RecordingRuns:
    app.state.study_runs = RecordingRuns()
    return app.state.study_runs


def _ended_study(client, app_engine, *, status="succeeded", parent_run_id="parent-1") -> str:
    """A study that ran to `status` (after a failed submission) with a trial, its epochs, a look, tags, and
    its end announced: a row keyed by it in every table that has one."""
    study_id = submit(client)
    now = datetime.now(timezone.utc)
    with session_scope(app_engine) as session:
        record_submit_failure(session, study_id=study_id, attempt=1, error="refused", retry_at=now)
        record_attempt(session, study_id=study_id, ray_job_id="raysubmit_1")
        start_study(session, study_id, mlflow_experiment_id="7", mlflow_parent_run_id=parent_run_id)
        add_trial(session, study_id, f"{study_id}/final/dyt/seed0")
        add_epochs(session, study_id, f"{study_id}/final/dyt/seed0", {0: {"loss": 1.0}})
        session.add(StudyLook(study_id=study_id, look=1, record={}, recorded_at=now))
        set_tags(session, study_id=study_id, tags=["paper"])
        set_study_status(session, study_id=study_id, status=status)
        mark_announced(session, study_id=study_id, at=now)
    return study_id


def _delete(client, study_id: str, confirm: str | None = "same", headers=AUTH):
    params = {} if confirm is None else {"confirm": study_id if confirm == "same" else confirm}
    return client.delete(f"/studies/{study_id}", params=params, headers=headers)


def _rows_of(app_engine, study_id: str) -> dict[str, int]:
    counts = {}
    with app_engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            column = table.c.id if table.name == "studies" else table.c.get("study_id")
            if column is not None:
                query = sa.select(sa.func.count()).select_from(table).where(column == study_id)
                counts[table.name] = connection.execute(query).scalar_one()
    return counts


@pytest.mark.parametrize("status", ["succeeded", "failed", "cancelled"])
def test_an_ended_study_is_deleted_with_every_row_keyed_by_it(client, app_engine, runs, status):
    study_id = _ended_study(client, app_engine, status=status)
    assert all(_rows_of(app_engine, study_id).values())
    response = _delete(client, study_id)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == study_id and body["status"] == status
    assert body["deleted_rows"]["studies"] == 1 and body["deleted_rows"]["trials"] == 1
    assert set(_rows_of(app_engine, study_id).values()) == {0}
    assert client.get(f"/studies/{study_id}").status_code == 404
    assert _delete(client, study_id).status_code == 404  # gone: deleting again finds nothing


def test_another_studys_rows_stay(client, app_engine, runs):
    kept = _ended_study(client, app_engine)
    gone = _ended_study(client, app_engine)
    before = _rows_of(app_engine, kept)
    assert _delete(client, gone).status_code == 200
    assert _rows_of(app_engine, kept) == before
    assert [s["id"] for s in client.get("/studies").json()] == [kept]


def test_the_parent_run_is_marked_after_the_rows_are_gone(client, app_engine, runs):
    study_id = _ended_study(client, app_engine, parent_run_id="parent-1")
    body = _delete(client, study_id).json()
    assert body["mlflow_parent_run_id"] == "parent-1"
    assert runs.marked == [{"study_id": study_id, "experiment_id": "7", "parent_run_id": "parent-1"}]


def test_mlflow_down_never_blocks_the_delete_and_is_logged(client, app, app_engine, caplog):
    app.state.study_runs = RecordingRuns(fail=True)
    study_id = _ended_study(client, app_engine)
    with caplog.at_level(logging.WARNING, logger="service.orchestration.delete"):
        response = _delete(client, study_id)
    assert response.status_code == 200
    assert set(_rows_of(app_engine, study_id).values()) == {0}
    assert "could not be tagged normlab.deleted=true" in caplog.text and "MLflow is down" in caplog.text


def test_with_the_apps_own_runs_an_unreachable_mlflow_is_only_a_warning(client, app_engine, caplog):
    # The test settings point MLflow at a port nothing listens on.
    study_id = _ended_study(client, app_engine)
    with caplog.at_level(logging.WARNING, logger="service.orchestration.delete"):
        assert _delete(client, study_id).status_code == 200
    assert "MlflowUnavailableError" in caplog.text


@pytest.mark.parametrize("status", ["queued", "running"])
def test_a_study_that_has_not_ended_is_a_409_and_stays(client, app_engine, runs, status):
    study_id = submit(client)
    if status == "running":
        start_study(app_engine, study_id)
    response = _delete(client, study_id)
    assert response.status_code == 409
    assert f"is {status}" in response.json()["detail"] and "cancel it first" in response.json()["detail"]
    assert client.get(f"/studies/{study_id}").json()["status"] == status
    assert runs.marked == []


@pytest.mark.parametrize("confirm", ["yes", "0" * 32, " "])
def test_a_confirm_that_does_not_repeat_the_id_is_a_422_and_deletes_nothing(
    client, app_engine, runs, confirm
):
    study_id = _ended_study(client, app_engine)
    response = _delete(client, study_id, confirm)
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["query", "confirm"] and error["input"] == confirm
    assert "repeat its id as confirm" in error["msg"] and f"confirm={study_id}" in error["msg"]
    assert all(_rows_of(app_engine, study_id).values())
    assert runs.marked == []


@pytest.mark.parametrize("confirm", [None, ""], ids=["missing", "empty"])
def test_a_missing_confirm_is_a_422_at_the_parameter(client, app_engine, runs, confirm):
    study_id = _ended_study(client, app_engine)
    response = _delete(client, study_id, confirm)
    assert response.status_code == 422
    assert ["query", "confirm"] in [e["loc"] for e in response.json()["detail"]]
    assert all(_rows_of(app_engine, study_id).values())


def test_an_unknown_study_is_a_404(client, runs):
    response = _delete(client, "0" * 32)
    assert response.status_code == 404 and "no study with id" in response.json()["detail"]


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": f"Bearer {API_TOKEN}x"}],
    ids=["missing", "wrong", "longer"],
)
def test_deleting_needs_the_write_token(client, app_engine, runs, headers):
    study_id = _ended_study(client, app_engine)
    response = _delete(client, study_id, headers=headers)
    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert API_TOKEN not in response.text
    assert all(_rows_of(app_engine, study_id).values()) and runs.marked == []
