"""Alembic migrations: from an empty database to head, idempotent, and identical to the ORM tables."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from service.store import Base, make_engine, upgrade_database


def test_upgrade_from_an_empty_database_creates_both_tables_at_head(database_url):
    upgrade_database(database_url)
    engine = make_engine(database_url)
    try:
        tables = set(sa.inspect(engine).get_table_names())
        with engine.connect() as connection:
            revision = MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()
    assert {"studies", "trials", "alembic_version"} <= tables
    assert revision == "0001"


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
