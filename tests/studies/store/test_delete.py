"""Deleting an ended study: refused while it may still change and without the confirmation, and then every
row keyed by it goes, in one transaction, and nothing of another study (on SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

import studies.store._delete as deletion
from studies.store import (
    DeletionNotConfirmedError,
    StudyLook,
    StudyNotDeletableError,
    StudyNotFoundError,
    delete_study,
    get_study,
    list_studies,
    mark_announced,
    record_submit_failure,
    session_scope,
    set_study_status,
    set_tags,
)
from studies.store._delete import study_key_columns
from studies.store.tables import Base
from tests.factories import add_epochs, add_study, add_trial, start_study

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _study_with_a_row_in_every_table(engine, status: str = "succeeded") -> str:
    """A study that ran (one attempt, a failed submission), with a trial, its epochs, a look, tags, and
    its end announced: a row keyed by it in every table that has one."""
    study = add_study(engine, ray_job_id="raysubmit_1")
    with session_scope(engine) as session:
        record_submit_failure(session, study_id=study.id, attempt=2, error="refused", retry_at=None)
        start_study(session, study.id, ray_job_id="raysubmit_1", mlflow_parent_run_id="parent-run")
        add_trial(session, study.id, f"{study.id}/final/dyt/seed0")
        add_epochs(session, study.id, f"{study.id}/final/dyt/seed0", {0: {"loss": 1.0}, 1: {"loss": 0.5}})
        # Stored as the driver stores a look; no sequential design is needed to delete one.
        session.add(StudyLook(study_id=study.id, look=1, record={}, recorded_at=NOW))
        set_tags(session, study_id=study.id, tags=["paper", "v1"])
        set_study_status(session, study_id=study.id, status=status)
        mark_announced(session, study_id=study.id, at=NOW + timedelta(seconds=1))
    return study.id


def _rows_of(engine, study_id: str) -> dict[str, int]:
    """Rows keyed by `study_id` in every table of the schema with a study_id (or, for studies, id) column."""
    counts = {}
    with engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            column = table.c.get("study_id") if table.name != "studies" else table.c.id
            if column is not None:
                query = sa.select(sa.func.count()).select_from(table).where(column == study_id)
                counts[table.name] = connection.execute(query).scalar_one()
    return counts


def test_the_fixture_study_has_a_row_in_every_table_keyed_by_a_study(engine):
    study_id = _study_with_a_row_in_every_table(engine)
    assert all(_rows_of(engine, study_id).values()), _rows_of(engine, study_id)


def test_every_table_with_a_study_id_is_one_the_deletion_clears():
    keyed = {t.name for t in Base.metadata.sorted_tables if "study_id" in t.c}
    assert {column.table.name for column in study_key_columns()} == keyed
    assert {"trials", "trial_epochs", "study_attempts", "study_looks", "study_tags"} <= keyed


@pytest.mark.parametrize("status", ["succeeded", "failed", "cancelled"])
def test_an_ended_study_goes_with_every_row_keyed_by_it(engine, status):
    study_id = _study_with_a_row_in_every_table(engine, status)
    with session_scope(engine) as session:
        deleted = delete_study(session, study_id=study_id, confirm=study_id)
    assert deleted.id == study_id and deleted.status == status
    assert deleted.mlflow_parent_run_id == "parent-run"  # what the caller marks in MLflow
    assert (
        deleted.rows["studies"] == 1 and deleted.rows["trial_epochs"] == 2 and deleted.rows["study_tags"] == 2
    )
    assert set(_rows_of(engine, study_id).values()) == {0}
    with pytest.raises(StudyNotFoundError), session_scope(engine, readonly=True) as session:
        get_study(session, study_id=study_id)


def test_another_studys_rows_stay(engine):
    kept = _study_with_a_row_in_every_table(engine)
    gone = _study_with_a_row_in_every_table(engine)
    before = _rows_of(engine, kept)
    with session_scope(engine) as session:
        delete_study(session, study_id=gone, confirm=gone)
    assert _rows_of(engine, kept) == before
    with session_scope(engine, readonly=True) as session:
        assert [s.id for s in list_studies(session)] == [kept]
        assert get_study(session, study_id=kept).tags == ("paper", "v1")


@pytest.mark.parametrize("status", ["queued", "running"])
def test_a_study_that_has_not_ended_is_not_deleted(engine, status):
    study = (
        add_study(engine, ray_job_id="raysubmit_1", status="running")
        if status == "running"
        else add_study(engine)
    )
    with pytest.raises(StudyNotDeletableError, match="cancel it first"), session_scope(engine) as session:
        delete_study(session, study_id=study.id, confirm=study.id)
    assert _rows_of(engine, study.id)["studies"] == 1


@pytest.mark.parametrize("confirm", [None, "", "yes", "0" * 32])
def test_without_the_id_repeated_as_confirm_nothing_is_deleted(engine, confirm):
    study_id = _study_with_a_row_in_every_table(engine)
    refused = pytest.raises(DeletionNotConfirmedError, match="repeat its id as confirm")
    with refused, session_scope(engine) as session:
        delete_study(session, study_id=study_id, confirm=confirm)
    assert all(_rows_of(engine, study_id).values())


def test_an_unknown_study_is_not_found(engine):
    with pytest.raises(StudyNotFoundError), session_scope(engine) as session:
        delete_study(session, study_id="0" * 32, confirm="0" * 32)


def test_a_failure_half_way_leaves_every_row_in_place(engine, monkeypatch):
    study_id = _study_with_a_row_in_every_table(engine)
    columns = deletion.study_key_columns()

    def fails_after_the_first_table():
        yield columns[0]
        raise RuntimeError("the database went away")

    monkeypatch.setattr(deletion, "study_key_columns", fails_after_the_first_table)
    with pytest.raises(RuntimeError), session_scope(engine) as session:
        delete_study(session, study_id=study_id, confirm=study_id)
    assert all(_rows_of(engine, study_id).values())
