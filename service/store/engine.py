"""Engine and session scope: SQLite (WAL) for the embedded default, PostgreSQL through psycopg 3."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

__all__ = ["make_engine", "normalize_database_url", "session_scope"]

SQLITE_BUSY_TIMEOUT_MS = 15_000  # the API and the study drivers write concurrently; wait, do not fail


def normalize_database_url(database_url: str) -> str:
    """Route plain PostgreSQL URLs to psycopg 3 (the only PostgreSQL driver installed)."""
    url = make_url(database_url)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url.render_as_string(hide_password=False)


def make_engine(database_url: str, *, echo: bool = False) -> Engine:
    """An engine with the per-backend settings the store relies on.

    SQLite: WAL journal (readers never block the writer), busy_timeout, foreign keys on, and every
    transaction opened with BEGIN IMMEDIATE so a read-then-write transaction cannot fail half-way with
    SQLITE_BUSY when another process committed in between.
    """
    url = make_url(normalize_database_url(database_url))
    if url.get_backend_name() != "sqlite":
        return create_engine(url, echo=echo, pool_pre_ping=True)

    if url.database and url.database != ":memory:":
        Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, echo=echo, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection, _record) -> None:
        # Let SQLAlchemy's "begin" hook below own transaction boundaries (pysqlite's own are lazy).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any error, always close."""
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
