"""The PostgreSQL tests run on a machine without a PostgreSQL server: when nothing listens at
NORMLAB_TEST_POSTGRES_URL the suite starts its own real server, runs every PostgreSQL test on it, and
stops and deletes it afterwards."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from service.stack.processes import free_port, wait_until
from studies.store import make_engine, upgrade_database
from tests.postgres_server import (
    PostgresUnavailableError,
    postgres_for_tests,
    process_exists,
    something_listens,
)

REPO = Path(__file__).resolve().parents[3]


def _nothing_listens_url() -> str:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test"
    assert not something_listens(url)
    return url


def test_with_nothing_at_the_url_an_embedded_server_runs_the_migrations_and_is_gone_afterwards():
    announced: list[str] = []
    with postgres_for_tests(_nothing_listens_url(), announce=announced.append) as server:
        assert server.embedded_data_dir is not None and server.embedded_pid is not None
        assert process_exists(server.embedded_pid)
        upgrade_database(server.url)
        engine = make_engine(server.url)
        try:
            with engine.connect() as connection:
                assert connection.dialect.name == "postgresql"
                tables = set(sa.inspect(connection).get_table_names())
        finally:
            engine.dispose()
        assert {"studies", "trials", "trial_epochs"} <= tables
    assert "embedded server" in announced[0] and str(server.embedded_data_dir) in announced[0]
    # `pg_ctl stop` returns once the server removed its pid file, a moment before the process is gone.
    assert wait_until(lambda: not process_exists(server.embedded_pid), timeout=10)
    assert not server.embedded_data_dir.exists()


def test_a_server_that_listens_but_refuses_the_connection_is_reported_not_replaced():
    # PostgreSQL answers at the default URL's host here; a database that does not exist is refused.
    listening = os.environ.get(
        "NORMLAB_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
    if not something_listens(listening):
        pytest.skip("no PostgreSQL server listens at NORMLAB_TEST_POSTGRES_URL on this machine")
    refused = (
        sa.engine.make_url(listening)
        .set(database="nl_no_such_database")
        .render_as_string(hide_password=False)
    )
    with (
        pytest.raises(PostgresUnavailableError, match="NORMLAB_TEST_POSTGRES_URL") as error,
        postgres_for_tests(refused),
    ):
        pass
    assert "nl_no_such_database" in str(error.value)


@pytest.mark.slow  # a second pytest run, about 20 s on 2 cores
def test_the_postgres_tests_pass_on_the_server_the_suite_starts_and_it_is_stopped_after_the_run():
    env = {**os.environ, "NORMLAB_TEST_POSTGRES_URL": _nothing_listens_url()}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "postgres",
            "tests/studies/store/test_migrations.py",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-3000:]
    assert re.search(r"\b4 passed\b", output), output[-3000:]
    data_dir = re.search(r"data directory (\S+)\)", output)
    assert data_dir is not None, output[-3000:]
    assert not Path(data_dir.group(1)).exists()
    leftover = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert data_dir.group(1) not in leftover
