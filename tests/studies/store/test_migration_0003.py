"""Revision 0003 (studies.idempotency_key): an existing database keeps its studies and their trials, the
key is unique, and the downgrade removes it again."""

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
    "VALUES (:id, 'n', 'digits', 'compare', '{}', 'queued', 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
)
_TRIAL = (
    "INSERT INTO trials (study_id, trial_key, phase, method, config, status, metrics, created_at, "
    "updated_at) VALUES ('s1', 's1/final/dyt/seed0', 'final', 'dyt', '{}', 'succeeded', '{}', "
    "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
)


@pytest.fixture
def engine_at_0002(database_url):
    upgrade_database(database_url, revision="0002")
    engine = make_engine(database_url)
    with engine.begin() as connection:
        connection.execute(sa.text(_STUDY), {"id": "s1"})
        connection.execute(sa.text(_TRIAL))
    yield engine
    engine.dispose()


def _count(engine, table: str) -> int:
    with engine.connect() as connection:
        return connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()


def test_upgrading_keeps_every_study_and_trial_and_leaves_old_studies_without_a_key(
    database_url, engine_at_0002
):
    upgrade_database(database_url)
    assert (_count(engine_at_0002, "studies"), _count(engine_at_0002, "trials")) == (1, 1)
    with engine_at_0002.connect() as connection:
        assert connection.execute(sa.text("SELECT idempotency_key FROM studies")).scalar_one() is None


def test_the_key_is_unique_but_many_studies_may_have_none(database_url, engine_at_0002):
    upgrade_database(database_url)
    with engine_at_0002.begin() as connection:
        connection.execute(sa.text(_STUDY), {"id": "s2"})  # a second study without a key
        connection.execute(sa.text("UPDATE studies SET idempotency_key = 'k' WHERE id = 's1'"))
    with pytest.raises(sa.exc.IntegrityError), engine_at_0002.begin() as connection:
        connection.execute(sa.text("UPDATE studies SET idempotency_key = 'k' WHERE id = 's2'"))


def test_downgrading_to_0002_removes_the_key_and_keeps_the_rows(database_url, engine_at_0002):
    upgrade_database(database_url)
    command.downgrade(alembic_config(database_url), "0002")
    engine_at_0002.dispose()
    columns = {column["name"] for column in sa.inspect(engine_at_0002).get_columns("studies")}
    assert "idempotency_key" not in columns
    assert (_count(engine_at_0002, "studies"), _count(engine_at_0002, "trials")) == (1, 1)
