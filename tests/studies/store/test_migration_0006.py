"""Revision 0006 (study_submit_failures): an existing database keeps its studies and attempts and gains an
empty table of failed submissions, numbered from one per study and deleted with their study; the downgrade
removes it again."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command

from studies.store import make_engine, upgrade_database
from studies.store.migrate import alembic_config


@pytest.fixture
def database_url(empty_database_url: str) -> str:
    """These tests run the migrations themselves: a database with no schema yet."""
    return empty_database_url


_STUDY = (
    "INSERT INTO studies (id, name, dataset, kind, spec, status, planned_trials, created_at, updated_at) "
    "VALUES ('s1', 'n', 'digits', 'compare', '{}', 'queued', 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
)
_ATTEMPT = (
    "INSERT INTO study_attempts (study_id, number, ray_job_id, submitted_at, interrupted) "
    "VALUES ('s1', 1, 'normlab-study-s1', CURRENT_TIMESTAMP, false)"
)
_FAILURE = (
    "INSERT INTO study_submit_failures (study_id, number, attempt, failed_at, error) "
    "VALUES ('s1', :number, 2, CURRENT_TIMESTAMP, 'no agent')"
)


@pytest.fixture
def engine_at_0005(database_url):
    upgrade_database(database_url, revision="0005")
    engine = make_engine(database_url)
    with engine.begin() as connection:
        connection.execute(sa.text(_STUDY))
        connection.execute(sa.text(_ATTEMPT))
    yield engine
    engine.dispose()


def _count(engine, table: str) -> int:
    with engine.connect() as connection:
        return connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()


def test_upgrading_adds_an_empty_table_of_failed_submissions_and_loses_nothing(database_url, engine_at_0005):
    upgrade_database(database_url)
    assert (_count(engine_at_0005, "studies"), _count(engine_at_0005, "study_attempts")) == (1, 1)
    assert _count(engine_at_0005, "study_submit_failures") == 0


def test_failed_submissions_are_numbered_from_one_and_go_with_their_study(database_url, engine_at_0005):
    upgrade_database(database_url)
    with engine_at_0005.begin() as connection:
        connection.execute(sa.text(_FAILURE), {"number": 1})
    for number in (0, 1):  # before the first; the same one twice
        with pytest.raises(sa.exc.IntegrityError), engine_at_0005.begin() as connection:
            connection.execute(sa.text(_FAILURE), {"number": number})
    with engine_at_0005.begin() as connection:
        connection.execute(sa.text("DELETE FROM studies WHERE id = 's1'"))
    assert _count(engine_at_0005, "study_submit_failures") == 0


def test_downgrading_to_0005_removes_the_failed_submissions_and_keeps_the_rows(database_url, engine_at_0005):
    upgrade_database(database_url)
    with engine_at_0005.begin() as connection:
        connection.execute(sa.text(_FAILURE), {"number": 1})
    command.downgrade(alembic_config(database_url), "0005")
    engine_at_0005.dispose()
    assert "study_submit_failures" not in sa.inspect(engine_at_0005).get_table_names()
    assert (_count(engine_at_0005, "studies"), _count(engine_at_0005, "study_attempts")) == (1, 1)
