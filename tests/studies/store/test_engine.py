"""Engine settings the store relies on, and the session scope's commit/rollback contract."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from studies.store import engine as engine_module
from studies.store import make_engine, normalize_database_url, session_scope


def test_sqlite_engines_use_wal_a_busy_timeout_and_foreign_keys(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'nested' / 'db.sqlite'}")
    try:
        with engine.connect() as connection:
            pragma = lambda name: connection.exec_driver_sql(f"PRAGMA {name}").scalar()  # noqa: E731
            assert pragma("journal_mode") == "wal"
            assert pragma("busy_timeout") >= 5000
            assert pragma("foreign_keys") == 1
    finally:
        engine.dispose()
    assert (tmp_path / "nested").is_dir()  # the data directory is created on first use


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql://u@h:5432/db", "postgresql+psycopg://u@h:5432/db"),
        ("postgresql+psycopg://u:p@h/db", "postgresql+psycopg://u:p@h/db"),
        ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
    ],
)
def test_plain_postgresql_urls_are_routed_to_psycopg_3(given, expected):
    assert normalize_database_url(given) == expected


def test_session_scope_commits_on_success_and_rolls_back_on_error(engine):
    with session_scope(engine) as session:
        session.execute(sa.text("CREATE TABLE scratch (x INTEGER)"))
    with session_scope(engine) as session:
        session.execute(sa.text("INSERT INTO scratch VALUES (1)"))
    with pytest.raises(RuntimeError), session_scope(engine) as session:
        session.execute(sa.text("INSERT INTO scratch VALUES (2)"))
        raise RuntimeError("boom")
    with session_scope(engine) as session:
        assert session.execute(sa.text("SELECT x FROM scratch")).scalars().all() == [1]


# ---------------------------------------------------------------- read-only and write transactions


@pytest.fixture
def impatient_sqlite(tmp_path, monkeypatch):
    """Two engines on one SQLite file that give up on a lock after 0.2 s instead of waiting 15 s."""
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_MS", 200)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    writer, other = make_engine(url), make_engine(url)
    with session_scope(writer) as session:
        session.execute(sa.text("CREATE TABLE scratch (x INTEGER)"))
    yield writer, other
    writer.dispose()
    other.dispose()


def test_a_read_only_scope_reads_while_a_writer_holds_the_sqlite_write_lock(impatient_sqlite):
    writer, reader = impatient_sqlite
    with session_scope(writer) as session:
        session.execute(sa.text("INSERT INTO scratch VALUES (1)"))  # holds BEGIN IMMEDIATE's lock
        with session_scope(reader, readonly=True) as polling:
            assert polling.execute(sa.text("SELECT count(*) FROM scratch")).scalar() == 0  # last commit


def test_write_scopes_still_take_the_sqlite_write_lock_when_they_begin(impatient_sqlite):
    # BEGIN IMMEDIATE: a read-then-write unit of work cannot read, then lose the race to write.
    writer, other = impatient_sqlite
    with session_scope(writer) as session:
        session.execute(sa.text("INSERT INTO scratch VALUES (1)"))
        with pytest.raises(sa.exc.OperationalError, match="locked"), session_scope(other) as second:
            second.execute(sa.text("SELECT count(*) FROM scratch"))


def test_a_read_only_scope_refuses_writes(engine):
    with session_scope(engine) as session:
        session.execute(sa.text("CREATE TABLE scratch (x INTEGER)"))
    with pytest.raises(sa.exc.DBAPIError), session_scope(engine, readonly=True) as session:
        session.execute(sa.text("INSERT INTO scratch VALUES (1)"))
    with session_scope(engine) as session:
        session.execute(sa.text("INSERT INTO scratch VALUES (2)"))  # the pooled connection writes again
        assert session.execute(sa.text("SELECT x FROM scratch")).scalars().all() == [2]
