"""Engine and session scope: SQLite (WAL) for the embedded default, PostgreSQL through psycopg 3."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.orm import Session

from studies.store.errors import StoreError

__all__ = [
    "POOL_CAPACITY",
    "READ_ONLY_OPTION",
    "DatabaseCorruptError",
    "is_corrupt_sqlite_error",
    "make_engine",
    "normalize_database_url",
    "read_only",
    "session_scope",
]

SQLITE_BUSY_TIMEOUT_MS = 15_000  # the API and the study drivers write concurrently; wait, do not fail
# Connections an engine pools (SQLAlchemy's defaults, stated because the API sizes its database gate,
# service.api.load_shedding, below them: a unit of work there never waits on the pool for a connection).
POOL_SIZE = 5
POOL_MAX_OVERFLOW = 10
POOL_CAPACITY = POOL_SIZE + POOL_MAX_OVERFLOW
# Execution option marking a read-only unit of work; the SQLite "begin" hook reads it off the connection.
READ_ONLY_OPTION = "normlab_read_only"
# SQLite's primary result codes for a file it cannot read as a database: SQLITE_CORRUPT (a damaged page)
# and SQLITE_NOTADB (no SQLite header at all: garbage, an empty or half-copied file).
_SQLITE_CORRUPT_CODES = frozenset({11, 26})
_SQLITE_CORRUPT_WORDS = ("file is not a database", "database disk image is malformed")


class DatabaseCorruptError(StoreError):
    """The SQLite file is not a database SQLite can read. Raised in place of SQLite's own error, which
    otherwise surfaces hundreds of lines deep in a migration's traceback without naming the file."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(
            f"the database file {path} is damaged or not an SQLite database ({reason}): stop NormLab, move "
            f"it aside with its -wal and -shm files (mv {path} {path}.corrupt) to start with an empty store, "
            "or put a backup in its place, then start again"
        )
        self.path = path
        self.reason = reason


def is_corrupt_sqlite_error(error: BaseException | None) -> bool:
    """Whether `error` is SQLite saying its file is no database it can read."""
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+: the extended code
    if code is not None:
        return code & 0xFF in _SQLITE_CORRUPT_CODES
    return any(words in str(error) for words in _SQLITE_CORRUPT_WORDS)


def normalize_database_url(database_url: str) -> str:
    """Route plain PostgreSQL URLs to psycopg 3 (the only PostgreSQL driver installed)."""
    url = make_url(database_url)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url.render_as_string(hide_password=False)


def make_engine(database_url: str, *, echo: bool = False) -> Engine:
    """An engine with the per-backend settings the store relies on.

    SQLite: WAL journal (readers never block the writer), busy_timeout, foreign keys on, and every
    write transaction opened with BEGIN IMMEDIATE so a read-then-write transaction cannot fail half-way
    with SQLITE_BUSY when another process committed in between. Read-only transactions (see
    `session_scope(readonly=True)`) open with a deferred BEGIN under `PRAGMA query_only`: they take no
    write lock, so polling the API never queues behind the drivers' trial writes.
    """
    url = make_url(normalize_database_url(database_url))
    if url.get_backend_name() != "sqlite":
        return create_engine(
            url, echo=echo, pool_pre_ping=True, pool_size=POOL_SIZE, max_overflow=POOL_MAX_OVERFLOW
        )

    pool: dict[str, int] = {}  # an in-memory database keeps SQLAlchemy's one pinned connection
    if url.database and url.database != ":memory:":
        Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        pool = {"pool_size": POOL_SIZE, "max_overflow": POOL_MAX_OVERFLOW}
    engine = create_engine(url, echo=echo, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, **pool)

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

    @event.listens_for(engine, "handle_error")
    def _corrupt_file(context: ExceptionContext) -> None:
        # Every statement and every new connection (the pragmas above run first, so a file with no SQLite
        # header fails here at once) of the API, the drivers and the migrations goes through this engine.
        if is_corrupt_sqlite_error(context.original_exception):
            path = str(Path(url.database or "").expanduser().resolve())
            raise DatabaseCorruptError(path, str(context.original_exception)) from context.original_exception

    @event.listens_for(engine, "begin")
    def _begin(connection) -> None:
        # query_only is per connection and pooled connections are reused, so every begin sets it.
        if connection.get_execution_options().get(READ_ONLY_OPTION):
            connection.exec_driver_sql("PRAGMA query_only=ON")
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("PRAGMA query_only=OFF")
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def read_only(engine: Engine) -> Engine:
    """The same engine (same pool) with transactions that refuse writes and take no write lock.

    PostgreSQL enforces it with a READ ONLY transaction; SQLite with a deferred BEGIN and query_only.
    """
    options: dict[str, bool] = {READ_ONLY_OPTION: True}
    if engine.dialect.name == "postgresql":
        options["postgresql_readonly"] = True
    return engine.execution_options(**options)


@contextmanager
def session_scope(engine: Engine, *, readonly: bool = False) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any error, always close.

    `readonly=True` is for units of work that only read (the API's GETs, listings): they do not
    contend with writers for SQLite's database lock, and any write in them raises. A read that
    decides a write (read-then-write) belongs in a normal scope, which keeps the lost-update protection.
    """
    session = Session(read_only(engine) if readonly else engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
