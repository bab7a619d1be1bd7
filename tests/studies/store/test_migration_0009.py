"""Revision 0009 (study_trial_plans): an existing database keeps its studies and gains an empty table of
trial plans, one row per study at most, deleted with its study; the downgrade removes it again."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command

from studies.store import make_engine, session_scope, study_trial_plan, upgrade_database
from studies.store.migrate import alembic_config


@pytest.fixture
def database_url(empty_database_url: str) -> str:
    """These tests run the migrations themselves: a database with no schema yet."""
    return empty_database_url


_STUDY = (
    "INSERT INTO studies (id, name, dataset, kind, spec, status, planned_trials, created_at, updated_at) "
    "VALUES ('{id}', 'n', 'digits', 'compare', '{{}}', 'running', 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
)
_PLAN = "INSERT INTO study_trial_plans (study_id, plan) VALUES ('{id}', '{{\"compile\": \"none\"}}')"


@pytest.fixture
def engine_at_0008(database_url):
    upgrade_database(database_url, revision="0008")
    engine = make_engine(database_url)
    with engine.begin() as connection:
        connection.execute(sa.text(_STUDY.format(id="s1")))
    yield engine
    engine.dispose()


def _count(engine, table: str) -> int:
    with engine.connect() as connection:
        return connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()


def test_upgrading_adds_an_empty_table_and_a_study_from_before_is_unknown(database_url, engine_at_0008):
    upgrade_database(database_url)
    assert _count(engine_at_0008, "studies") == 1 and _count(engine_at_0008, "study_trial_plans") == 0
    with session_scope(engine_at_0008, readonly=True) as session:
        stored = study_trial_plan(session, study_id="s1")
    assert stored.spec_fields_set is None and stored.plan is None  # its driver keeps the old rule
    with engine_at_0008.begin() as connection:
        connection.execute(sa.text(_PLAN.format(id="s1")))
    with pytest.raises(sa.exc.IntegrityError), engine_at_0008.begin() as connection:
        connection.execute(sa.text(_PLAN.format(id="s1")))  # one row per study
    with pytest.raises(sa.exc.IntegrityError), engine_at_0008.begin() as connection:
        connection.execute(sa.text(_PLAN.format(id="nope")))  # a plan needs its study


def test_downgrading_removes_the_table_and_keeps_the_studies(database_url, engine_at_0008):
    upgrade_database(database_url)
    command.downgrade(alembic_config(database_url), "0008")
    assert "study_trial_plans" not in sa.inspect(engine_at_0008).get_table_names()
    assert _count(engine_at_0008, "studies") == 1
