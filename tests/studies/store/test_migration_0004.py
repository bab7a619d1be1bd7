"""Revision 0004 (study_attempts, studies.mlflow_closed_at): an existing database keeps its studies and
trials, every study that already had a Ray job gets that job as its attempt 1, and the downgrade removes
both again."""

from __future__ import annotations

from datetime import datetime

import pytest
import sqlalchemy as sa
from alembic import command

from studies.store import get_study, make_engine, session_scope, upgrade_database
from studies.store.migrate import alembic_config


@pytest.fixture
def database_url(empty_database_url: str) -> str:
    """These tests run the migrations themselves: a database with no schema yet."""
    return empty_database_url


_STUDY = (
    "INSERT INTO studies (id, name, dataset, kind, spec, status, planned_trials, ray_job_id, created_at, "
    "updated_at, started_at) VALUES (:id, 'n', 'digits', 'compare', '{}', :status, 1, :job, "
    "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, :started)"
)
_TRIAL = (
    "INSERT INTO trials (study_id, trial_key, phase, method, config, status, metrics, created_at, "
    "updated_at) VALUES ('ran', 'ran/final/dyt/seed0', 'final', 'dyt', '{}', 'succeeded', '{}', "
    "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
)


_NOON = datetime(2025, 1, 2, 12, 0)  # naive: every backend stores it as given


@pytest.fixture
def engine_at_0003(database_url):
    upgrade_database(database_url, revision="0003")
    engine = make_engine(database_url)
    with engine.begin() as connection:
        connection.execute(
            sa.text(_STUDY), {"id": "ran", "status": "running", "job": "raysubmit_1", "started": _NOON}
        )
        connection.execute(
            sa.text(_STUDY), {"id": "queued", "status": "queued", "job": None, "started": None}
        )
        connection.execute(sa.text(_TRIAL))
    yield engine
    engine.dispose()


def _count(engine, table: str) -> int:
    with engine.connect() as connection:
        return connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()


def test_a_study_that_had_a_job_gets_it_as_attempt_one_and_nothing_is_lost(database_url, engine_at_0003):
    upgrade_database(database_url)
    assert (_count(engine_at_0003, "studies"), _count(engine_at_0003, "trials")) == (2, 1)
    with session_scope(engine_at_0003, readonly=True) as session:
        ran, queued = get_study(session, study_id="ran"), get_study(session, study_id="queued")
    (attempt,) = ran.attempts
    assert (attempt.number, attempt.ray_job_id, attempt.ended_at, attempt.interrupted) == (
        1,
        "raysubmit_1",
        None,
        False,
    )
    assert attempt.submitted_at.date().isoformat() == "2025-01-02"  # when the study started
    assert queued.attempts == ()
    assert ran.mlflow_closed_at is None and queued.mlflow_closed_at is None


def test_downgrading_to_0003_removes_the_attempts_and_keeps_the_rows(database_url, engine_at_0003):
    upgrade_database(database_url)
    command.downgrade(alembic_config(database_url), "0003")
    engine_at_0003.dispose()
    inspector = sa.inspect(engine_at_0003)
    assert "study_attempts" not in inspector.get_table_names()
    assert "mlflow_closed_at" not in {column["name"] for column in inspector.get_columns("studies")}
    assert (_count(engine_at_0003, "studies"), _count(engine_at_0003, "trials")) == (2, 1)
