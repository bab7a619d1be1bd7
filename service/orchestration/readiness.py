"""Whether the service can run a study now: what /readyz answers, the `normlab serve` banner prints and
`normlab status` shows.

Ready means that each part a study needs works, not merely that it answers:
- database: a write goes through. The check runs an UPDATE that matches no row in a transaction it rolls
  back, which takes the write lock a real write takes, so a read-only file, a read-only transaction or a
  standby fails it; SQLite's lock held by another writer means the file takes writes, and is waited for
  only briefly.
- disk: the filesystems of the data dir (and of an SQLite file kept elsewhere) are writable and have
  `min_free_disk_mb` free. A rolled-back write never reaches the disk, so only this finds a full one
  before a study's first write fails on it.
- mlflow: its tracking server answers /health with 200 (with the credentials the service sends).
- ray: its job server would take a job (service.orchestration.ports.JobServerProbe: a submission the
  head's job agent checks and refuses), asked at most every `ray_probe_cache_s`: the probe goes through
  Ray's dashboard and its agent, and may wait 10 s where the agent is missing.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import make_url

from service.orchestration.dispatcher import RayJobDispatcher
from service.orchestration.ports import ClusterUnreachableError, DispatchError, JobServerProbe
from service.settings import Settings
from service.stack.probe import is_http_url, mlflow_auth_headers
from service.stack.processes import http_status
from studies.store.engine import SQLITE_BUSY_TIMEOUT_MS

__all__ = [
    "Check",
    "RayJobsCheck",
    "Readiness",
    "ReadinessChecker",
    "check_database",
    "check_disk",
    "check_mlflow",
    "database_paths",
]

# How long the database check waits for SQLite's write lock, or PostgreSQL's locks and statement: a
# readiness answer must come quickly, and a lock held that long already says the database takes writes.
_LOCK_WAIT_S = 0.5
_MLFLOW_TIMEOUT_S = 2.0
_SQLITE_BUSY = 5  # SQLITE_BUSY: another connection holds the write lock
_MB = 1024 * 1024


@dataclass(frozen=True)
class Check:
    """One part's answer: ready or not, and one line that says what answered or what is wrong and why."""

    ready: bool
    detail: str
    facts: Mapping[str, Any] = field(default_factory=dict)  # what the JSON shows beside (url, backend, ...)

    def as_json(self) -> dict[str, Any]:
        return {"ready": self.ready, "detail": self.detail, **self.facts}


@dataclass(frozen=True)
class Readiness:
    database: Check
    disk: Check
    mlflow: Check
    ray: Check

    @property
    def checks(self) -> dict[str, Check]:
        return {"database": self.database, "disk": self.disk, "mlflow": self.mlflow, "ray": self.ray}

    @property
    def ready(self) -> bool:
        return all(check.ready for check in self.checks.values())

    def problems(self) -> list[str]:
        """One line per part that is not ready: `ray: <why>`."""
        return [f"{name}: {check.detail}" for name, check in self.checks.items() if not check.ready]

    def as_json(self) -> dict[str, Any]:
        return {
            "status": "ready" if self.ready else "not ready",
            "not_ready": self.problems(),
            **{name: check.as_json() for name, check in self.checks.items()},
        }


def check_database(engine: Engine) -> Check:
    """Whether the database takes a write now (module docstring)."""
    backend = engine.dialect.name
    try:
        # The driver's own connection for SQLite: the engine's "begin" hook would wait out its 15 s timeout.
        connection = engine.raw_connection() if backend == "sqlite" else engine.connect()
    except Exception as exc:
        detail = f"does not answer: {type(exc).__name__}: {_first_line(exc)}"
        return Check(False, detail, {"backend": backend, "reachable": False})
    facts = {"backend": backend, "reachable": True}
    try:
        if isinstance(connection, Connection):
            _write(connection)
        else:
            _sqlite_write(connection)
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorcode", None) == _SQLITE_BUSY or "database is locked" in str(exc):
            # Another connection is writing: the file takes writes (the API's own writes wait their turn).
            return Check(True, "takes writes (another writer holds the lock now)", facts)
        return Check(False, f"refuses a write: {_first_line(exc)}", facts)
    except Exception as exc:
        return Check(False, f"refuses a write: {type(exc).__name__}: {_first_line(exc)}", facts)
    finally:
        connection.close()
    return Check(True, "takes writes", facts)


def _sqlite_write(connection: Any) -> None:
    cursor = connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={int(_LOCK_WAIT_S * 1000)}")
    try:
        cursor.execute("PRAGMA query_only=OFF")  # a pooled connection may come from a read-only unit
        cursor.execute("BEGIN IMMEDIATE")  # the write lock; SQLITE_READONLY where the file takes none
        try:
            cursor.execute("UPDATE studies SET id = id WHERE 0")
        finally:
            cursor.execute("ROLLBACK")
    finally:
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")


def _write(connection: Connection) -> None:
    milliseconds = int(_LOCK_WAIT_S * 1000)
    with connection.begin() as transaction:
        connection.execute(text(f"SET LOCAL lock_timeout = {milliseconds}"))
        connection.execute(text(f"SET LOCAL statement_timeout = {4 * milliseconds}"))
        connection.execute(text("UPDATE studies SET id = id WHERE false"))
        transaction.rollback()


def database_paths(settings: Settings) -> list[Path]:
    """The directories readiness keeps free space in: the data dir, and an SQLite file's own directory."""
    paths = [settings.data_dir]
    url = make_url(str(settings.database_url))
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        directory = Path(url.database).expanduser().parent
        if directory != settings.data_dir:
            paths.append(directory)
    return paths


def check_disk(paths: Sequence[Path], *, min_free_mb: int) -> Check:
    """Whether each path's filesystem is writable and has `min_free_mb` free (a path not made yet: where it
    would be made)."""
    lowest: tuple[int, Path] | None = None
    for path in paths:
        existing = _existing(path)
        try:
            usage = shutil.disk_usage(existing)
            read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
        except OSError as exc:
            return Check(False, f"cannot read the free space of {existing}: {exc}", {"path": str(path)})
        if read_only:
            return Check(False, f"{existing} is on a read-only filesystem", {"path": str(path)})
        if lowest is None or usage.free < lowest[0]:
            lowest = (usage.free, path)
    if lowest is None:
        return Check(True, "no directory to check")
    free, path = lowest
    facts = {"path": str(path), "free_mb": free // _MB, "min_free_mb": min_free_mb}
    if free < min_free_mb * _MB:
        return Check(
            False,
            f"{path} has {free // _MB} MB free, under NORMLAB_MIN_FREE_DISK_MB={min_free_mb}: a full disk "
            "fails every database write and checkpoint; free some space",
            facts,
        )
    return Check(True, f"{free // _MB} MB free in {path}", facts)


def _existing(path: Path) -> Path:
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def check_mlflow(tracking_uri: str) -> Check:
    """Whether MLflow's tracking server answers its health check (a tracking URI that is no server, a local
    store, needs none)."""
    if not is_http_url(tracking_uri):
        return Check(True, f"a local store ({tracking_uri}), no server to ask", {"url": tracking_uri})
    url = f"{tracking_uri.rstrip('/')}/health"
    status = http_status(url, timeout=_MLFLOW_TIMEOUT_S, headers=mlflow_auth_headers())
    facts: dict[str, Any] = {"url": url, "reachable": status is not None}
    if status is None:
        return Check(False, f"no MLflow server answers at {url}", facts)
    if status != 200:
        return Check(
            False, f"{url} answers HTTP {status}, not an MLflow server's 200", {**facts, "status": status}
        )
    return Check(True, f"answers at {url}", facts)


class RayJobsCheck:
    """Ray's job server, asked through a JobServerProbe at most once every `cache_s` seconds.

    A caller that comes while another waits on the probe gets the previous answer rather than waiting too
    (the probe may take Ray's 10 s); only the first answer is waited for.
    """

    def __init__(
        self,
        probe: JobServerProbe,
        *,
        url: str,
        cache_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.probe = probe
        self.url = url
        self.cache_s = cache_s
        self.clock = clock
        self._lock = threading.Lock()
        self._answer: Check | None = None
        self._asked_at = 0.0

    def __call__(self) -> Check:
        answer = self._answer
        if answer is not None and self.clock() - self._asked_at < self.cache_s:
            return answer
        if not self._lock.acquire(blocking=answer is None):
            return answer  # type: ignore[return-value]  # acquire(blocking=False) fails only with one
        try:
            if self._answer is not None and self.clock() - self._asked_at < self.cache_s:
                return self._answer  # asked by the caller we waited for
            self._answer = self._ask()
            self._asked_at = self.clock()
            return self._answer
        finally:
            self._lock.release()

    def _ask(self) -> Check:
        try:
            detail = self.probe.probe()
        except DispatchError as exc:
            reachable = not isinstance(exc, ClusterUnreachableError)
            return Check(False, str(exc), {"url": self.url, "reachable": reachable})
        return Check(True, detail, {"url": self.url, "reachable": True})


class ReadinessChecker:
    """The four checks for one service; the Ray one cached (RayJobsCheck). `dispatcher` is the service's: its
    probe is used when it has one, else a Ray Jobs client for the settings' job server."""

    def __init__(self, settings: Settings, engine: Engine, dispatcher: object | None = None) -> None:
        self.settings = settings
        self.engine = engine
        probe = dispatcher if isinstance(dispatcher, JobServerProbe) else _jobs_client(settings)
        url = getattr(probe, "dashboard_url", settings.ray_dashboard_url)
        self.ray = RayJobsCheck(probe, url=url, cache_s=settings.ray_probe_cache_s)

    def check(self) -> Readiness:
        return Readiness(
            database=check_database(self.engine),
            disk=check_disk(database_paths(self.settings), min_free_mb=self.settings.min_free_disk_mb),
            mlflow=check_mlflow(str(self.settings.mlflow_tracking_uri)),
            ray=self.ray(),
        )


def _jobs_client(settings: Settings) -> RayJobDispatcher:
    return RayJobDispatcher(dashboard_url=settings.ray_dashboard_url, auth_token=_ray_token(settings))


def _ray_token(settings: Settings) -> str | None:
    """The Ray token as configured or stored; never one made here (readiness writes nothing)."""
    if settings.ray_auth_token is not None and settings.ray_auth_token.get_secret_value():
        return settings.ray_auth_token.get_secret_value()
    try:
        return settings.ray_auth_token_path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
