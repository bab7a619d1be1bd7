"""Revision 0007 (study_notifications): an existing database keeps its studies and gains an empty table of
announced studies, one row a study at most, deleted with its study; the downgrade removes it again."""

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
    "VALUES ('s1', 'n', 'digits', 'compare', '{}', 'succeeded', 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
)
_ANNOUNCED = "INSERT INTO study_notifications (study_id, notified_at) VALUES ('s1', CURRENT_TIMESTAMP)"


@pytest.fixture
def engine_at_0006(database_url):
    upgrade_database(database_url, revision="0006")
    engine = make_engine(database_url)
    with engine.begin() as connection:
        connection.execute(sa.text(_STUDY))
    yield engine
    engine.dispose()


def _count(engine, table: str) -> int:
    with engine.connect() as connection:
        return connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()


def test_upgrading_adds_an_empty_table_and_a_study_is_announced_once_and_goes_with_its_study(
    database_url, engine_at_0006
):
    upgrade_database(database_url)
    assert _count(engine_at_0006, "studies") == 1 and _count(engine_at_0006, "study_notifications") == 0
    with engine_at_0006.begin() as connection:
        connection.execute(sa.text(_ANNOUNCED))
    with pytest.raises(sa.exc.IntegrityError), engine_at_0006.begin() as connection:
        connection.execute(sa.text(_ANNOUNCED))
    with engine_at_0006.begin() as connection:
        connection.execute(sa.text("DELETE FROM studies WHERE id = 's1'"))
    assert _count(engine_at_0006, "study_notifications") == 0


def test_downgrading_to_0006_removes_the_table_and_keeps_the_studies(database_url, engine_at_0006):
    upgrade_database(database_url)
    command.downgrade(alembic_config(database_url), "0006")
    engine_at_0006.dispose()
    assert "study_notifications" not in sa.inspect(engine_at_0006).get_table_names()
    assert _count(engine_at_0006, "studies") == 1
