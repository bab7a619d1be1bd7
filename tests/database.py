"""The study database for tests, on SQLite (the embedded default) and on a real PostgreSQL (the server at
NORMLAB_TEST_POSTGRES_URL, or one the session starts when nothing listens there): a pytest plugin every
test directory sees (tests/conftest.py loads it), since the store is used by the service, the driver and
the store's own tests.

The migrations run once per run (per xdist worker) and backend: a SQLite test gets a copy of a migrated
file, a PostgreSQL test the run's migrated schema, emptied before it. Tests of the migrations themselves
ask for `empty_database_url`."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from studies.store import make_engine, upgrade_database
from tests.postgres_server import SessionPostgres, postgres_for_tests

POSTGRES_URL = os.environ.get(
    "NORMLAB_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@pytest.fixture(scope="session")
def postgres_server(request: pytest.FixtureRequest) -> Iterator[SessionPostgres]:
    """The PostgreSQL server of this test session (started only when a PostgreSQL test needs it)."""
    with postgres_for_tests(POSTGRES_URL, announce=_terminal_line(request.config)) as server:
        yield server


def _terminal_line(config: pytest.Config) -> Callable[[str], None]:
    """Write a line to the terminal past pytest's output capture (a fixture's prints would be swallowed)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def write(line: str) -> None:
        if reporter is None or capture is None:
            print(line)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    return write


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def database_backend(request: pytest.FixtureRequest) -> str:
    """Each database test runs twice: on SQLite (the embedded default) and on a real PostgreSQL."""
    return request.param


@pytest.fixture
def database_url(database_backend: str, request: pytest.FixtureRequest) -> str:
    """The test's database, at head and empty: a copy of the run's migrated SQLite file, or the run's
    migrated PostgreSQL schema with every row earlier tests wrote removed."""
    if database_backend == "sqlite":
        return request.getfixturevalue("migrated_sqlite_url")
    return request.getfixturevalue("migrated_postgres_url")


@pytest.fixture
def empty_database_url(
    database_backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[str]:
    """A database with no schema at all, for the tests of the migrations: a fresh SQLite file, or a fresh
    schema on the PostgreSQL server."""
    if database_backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'normlab.db'}"
        return
    with _new_schema(request.getfixturevalue("postgres_server").url) as url:
        yield url


@dataclass(frozen=True)
class MigratedSchema:
    url: str  # the schema's URL: every connection made from it (Alembic's too) lives in the schema
    admin: sa.Engine  # one pooled connection that empties it between tests
    tables: tuple[str, ...]  # the store's tables, alembic_version left out


@pytest.fixture(scope="session")
def migrated_postgres_schema(postgres_server: SessionPostgres) -> Iterator[MigratedSchema]:
    """A schema on the session's PostgreSQL server, migrated to head once for the whole run."""
    with _new_schema(postgres_server.url) as url:
        upgrade_database(url)
        admin = sa.create_engine(url, pool_size=1, max_overflow=0)
        try:
            with admin.connect() as connection:
                names = sa.inspect(connection).get_table_names()
            yield MigratedSchema(url, admin, tuple(sorted(n for n in names if n != "alembic_version")))
        finally:
            admin.dispose()


@pytest.fixture
def migrated_postgres_url(migrated_postgres_schema: MigratedSchema) -> str:
    """The run's migrated schema as a fresh one would be: the tables earlier tests created dropped, the
    store's tables emptied (their sequences restarted: ids start at 1 again)."""
    schema = migrated_postgres_schema
    with schema.admin.begin() as connection:
        # A connection an earlier test left inside a transaction would block these: fail, never hang.
        connection.exec_driver_sql("SET LOCAL lock_timeout = '30s'")
        present = connection.exec_driver_sql(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).scalars()
        quote = connection.dialect.identifier_preparer.quote
        created = sorted(set(present) - {*schema.tables, "alembic_version"})
        if created:
            connection.exec_driver_sql(f"DROP TABLE {', '.join(map(quote, created))} CASCADE")
        tables = ", ".join(map(quote, schema.tables))
        connection.exec_driver_sql(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
    return schema.url


@contextlib.contextmanager
def _new_schema(server_url: str) -> Iterator[str]:
    """A new, empty schema on the server, dropped afterwards; yields a URL whose connections live in it."""
    schema = f"nl_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(server_url, poolclass=NullPool)
    with admin.begin() as connection:
        connection.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        # libpq `options` pins the search path, so every connection (Alembic's too) lives in the schema.
        in_schema = make_url(server_url).update_query_dict({"options": f"-csearch_path={schema}"})
        yield in_schema.render_as_string(hide_password=False)
    finally:
        with admin.begin() as connection:
            connection.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


@pytest.fixture
def engine(database_url: str) -> Iterator[sa.Engine]:
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def migrated_sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database migrated to head once per run (per xdist worker): tests start from copies of it
    instead of running the migrations again."""
    path = tmp_path_factory.mktemp("migrated-sqlite") / "normlab.db"
    upgrade_database(f"sqlite:///{path}")
    # Everything into the database file itself (the store runs SQLite in WAL mode): one file to copy.
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    return path


@pytest.fixture
def migrated_sqlite_url(migrated_sqlite_template: Path, tmp_path: Path) -> str:
    """A SQLite database at head, this test's own (tmp_path/normlab.db, a copy of the run's template)."""
    path = tmp_path / "normlab.db"
    shutil.copyfile(migrated_sqlite_template, path)
    return f"sqlite:///{path}"
