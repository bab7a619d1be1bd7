"""Revision 0005 (study_looks): an existing database keeps its studies and trials and gains an empty table
of looks that refuses a look before the first; the downgrade removes it again."""

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
    "VALUES ('s1', 'n', 'digits', 'compare', '{}', 'running', 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
)
_TRIAL = (
    "INSERT INTO trials (study_id, trial_key, phase, method, config, status, metrics, created_at, "
    "updated_at) VALUES ('s1', 's1/final/dyt/seed0', 'final', 'dyt', '{}', 'succeeded', '{}', "
    "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
)
_LOOK = (
    "INSERT INTO study_looks (study_id, look, record, recorded_at) "
    "VALUES ('s1', :look, '{}', CURRENT_TIMESTAMP)"
)


@pytest.fixture
def engine_at_0004(database_url):
    upgrade_database(database_url, revision="0004")
    engine = make_engine(database_url)
    with engine.begin() as connection:
        connection.execute(sa.text(_STUDY))
        connection.execute(sa.text(_TRIAL))
    yield engine
    engine.dispose()


def _count(engine, table: str) -> int:
    with engine.connect() as connection:
        return connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()


def test_upgrading_adds_an_empty_table_of_looks_and_loses_nothing(database_url, engine_at_0004):
    upgrade_database(database_url)
    assert (_count(engine_at_0004, "studies"), _count(engine_at_0004, "trials")) == (1, 1)
    assert _count(engine_at_0004, "study_looks") == 0


def test_a_look_is_numbered_from_one_and_stored_once_per_study(database_url, engine_at_0004):
    upgrade_database(database_url)
    with engine_at_0004.begin() as connection:
        connection.execute(sa.text(_LOOK), {"look": 1})
    for look in (0, 1):  # before the first look; the same look twice
        with pytest.raises(sa.exc.IntegrityError), engine_at_0004.begin() as connection:
            connection.execute(sa.text(_LOOK), {"look": look})
    assert _count(engine_at_0004, "study_looks") == 1


def test_downgrading_to_0004_removes_the_looks_and_keeps_the_rows(database_url, engine_at_0004):
    upgrade_database(database_url)
    with engine_at_0004.begin() as connection:
        connection.execute(sa.text(_LOOK), {"look": 1})
    command.downgrade(alembic_config(database_url), "0004")
    engine_at_0004.dispose()
    assert "study_looks" not in sa.inspect(engine_at_0004).get_table_names()
    assert (_count(engine_at_0004, "studies"), _count(engine_at_0004, "trials")) == (1, 1)
