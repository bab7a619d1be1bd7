"""Alembic migrations: from an empty database to head, idempotent, and identical to the ORM tables."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from studies.store import Base, make_engine, upgrade_database


@pytest.fixture
def database_url(empty_database_url: str) -> str:
    """These tests run the migrations themselves: a database with no schema yet."""
    return empty_database_url


def test_upgrade_from_an_empty_database_creates_every_table_at_head(database_url):
    upgrade_database(database_url)
    engine = make_engine(database_url)
    try:
        tables = set(sa.inspect(engine).get_table_names())
        with engine.connect() as connection:
            revision = MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()
    assert {
        "studies",
        "study_attempts",
        "study_looks",
        "study_submit_failures",
        "study_notifications",
        "study_tags",
        "study_trial_plans",
        "trials",
        "trial_epochs",
        "alembic_version",
    } <= tables
    assert revision == "0009"


def test_upgrading_twice_is_harmless(database_url):
    upgrade_database(database_url)
    upgrade_database(database_url)
    engine = make_engine(database_url)
    try:
        with engine.connect() as connection:
            assert connection.execute(sa.text("SELECT count(*) FROM alembic_version")).scalar_one() == 1
    finally:
        engine.dispose()


def test_the_migrated_schema_matches_the_orm_tables_exactly(database_url):
    upgrade_database(database_url)
    engine = make_engine(database_url)
    try:
        with engine.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    finally:
        engine.dispose()
    assert differences == []


def test_a_database_at_0001_upgrades_to_head_keeping_its_rows_and_downgrades_back(database_url):
    from alembic import command

    from studies.store.migrate import alembic_config

    upgrade_database(database_url, revision="0001")
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(
                sa.text(
                    "INSERT INTO studies (id, name, dataset, kind, spec, status, planned_trials, created_at, "
                    "updated_at) VALUES ('s1', 'n', 'digits', 'compare', '{}', 'queued', 1, "
                    "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                )
            )
        upgrade_database(database_url)
        with engine.connect() as connection:
            assert connection.execute(sa.text("SELECT id FROM studies")).scalars().all() == ["s1"]
            assert connection.execute(sa.text("SELECT count(*) FROM trial_epochs")).scalar_one() == 0
        command.downgrade(alembic_config(database_url), "0001")
        engine.dispose()
        assert "trial_epochs" not in sa.inspect(engine).get_table_names()
    finally:
        engine.dispose()
