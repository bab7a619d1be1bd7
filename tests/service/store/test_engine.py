"""Engine settings the store relies on, and the session scope's commit/rollback contract."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from service.store import make_engine, normalize_database_url, session_scope


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
