"""Fixtures for the service tests: a migrated database on SQLite and on a real PostgreSQL (the server at
NORMLAB_TEST_POSTGRES_URL, or one the session starts when nothing listens there), an app wired to it with
a fake dispatcher, and a valid spec to submit.

The migrations run once per run (per xdist worker) and backend: a SQLite test gets a copy of a migrated
file (tests/conftest.py), a PostgreSQL test the run's migrated schema, emptied before it. Tests of the
migrations themselves ask for `empty_database_url`."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from service.app import create_app
from service.ports import ClusterUnreachableError, JobState
from service.settings import Settings
from service.store import make_engine, upgrade_database
from tests.service.postgres_server import SessionPostgres, postgres_for_tests

POSTGRES_URL = os.environ.get(
    "NORMLAB_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
API_TOKEN = "test-token-not-secret"
AUTH = {"Authorization": f"Bearer {API_TOKEN}"}

QUICK_SPEC_YAML = """
name: tiny
dataset: digits
model: vit_lite_tiny
methods: [autonorm_s, frozen_ln, dyt]
search:
  lr: {type: loguniform, low: 1.0e-4, high: 1.0e-2}
method_search:
  autonorm_s: {tau: 0.5, t_freeze: {type: int, low: 1, high: 3}}
num_samples: 2
seeds: [0, 1, 2]
budget: {epochs: 4, batch_size: 32}
"""


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


class FakeDispatcher:
    """Records what the API asks of the cluster; `fail_cancel` makes cancel raise like an unreachable Ray
    (the service.ports.Dispatcher contract: ClusterUnreachableError)."""

    def __init__(self) -> None:
        self.submitted: list[str] = []
        self.cancelled: list[str] = []
        self.fail_cancel = False

    def submit(self, study_id: str, spec: dict | None = None, *, attempt: int = 1) -> str:
        self.submitted.append(study_id)
        return f"raysubmit_{study_id}"

    def state(self, job_id: str) -> JobState:
        return JobState.STOPPED if job_id in self.cancelled else JobState.RUNNING

    def end_reason(self, job_id: str, state: JobState) -> str:
        return f"Ray job {job_id} ended {state.value}"

    def logs_tail(self, job_id: str, max_chars: int = 4000) -> str:
        return ""

    def cancel(self, ray_job_id: str) -> None:
        if self.fail_cancel:
            raise ClusterUnreachableError("ray dashboard unreachable")
        self.cancelled.append(ray_job_id)


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(
        _env_file=None,
        data_dir=tmp_path / "data",
        database_url=database_url,
        api_token=API_TOKEN,
        auto_migrate=False,  # the database is at head already (database_url): no Alembic run per app
        # The Hosts the tests' requests name: TestClient's default, and the CLI tests' NORMLAB_API_URL.
        allowed_hosts=["testserver", "normlab.test"],
        ray_address=None,
        # Nothing listens on these ports: readiness must report Ray and MLflow as unreachable.
        ray_dashboard_port=9,
        mlflow_tracking_uri="http://127.0.0.1:9",
        max_trials_per_study=100,
        max_seeds_per_study=5,
        max_epochs_per_trial=50,
    )


@pytest.fixture
def dispatcher() -> FakeDispatcher:
    return FakeDispatcher()


@pytest.fixture
def app(settings: Settings, dispatcher: FakeDispatcher):
    return create_app(settings=settings, dispatcher=dispatcher)


@pytest.fixture
def client(app) -> Iterator[TestClient]:
    with TestClient(app) as client:
        yield client


@pytest.fixture
def app_engine(app) -> sa.Engine:
    return app.state.engine
