"""Domain errors -> HTTP responses, in this one place (routes raise, never build error responses).

Every error body is `{"detail": ...}`: a message string, or for validation errors FastAPI's list of
`{"type", "loc", "msg"}` with `loc` the field path into the request. That holds for a 500 too: an error no
handler maps is answered in JSON (its traceback goes to the server log), never as Starlette's plain text.

A database that cannot do what a request needs is named, with what to do (`database_fault`): out of disk
space is a 507, read-only, unreachable, busy or damaged a 503, each with `Retry-After` where a retry can
succeed without anyone acting. The request's transaction was rolled back, so nothing half-written stays.
"""

from __future__ import annotations

import errno
import logging
import math
import sqlite3
import sys
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from sqlalchemy import Engine
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from service.orchestration.ports import DispatchError
from studies.spec import SpecFormatError, UnsupportedContentTypeError
from studies.store import (
    DeletionNotConfirmedError,
    IdempotencyKeyReusedError,
    InvalidStatusTransitionError,
    InvalidTagError,
    InvalidTrialError,
    StudyNotDeletableError,
    StudyNotFoundError,
    TrialKeyConflictError,
)
from studies.store.engine import DatabaseCorruptError
from studies.tables.figures import UnknownFigureError

__all__ = [
    "ClusterUnavailableError",
    "DatabaseFault",
    "ErrorOut",
    "FieldErrorOut",
    "InvalidSpecError",
    "NoResultsError",
    "PluginsForbiddenError",
    "ServiceBusyError",
    "SpecTooLargeError",
    "UnauthorizedError",
    "UnknownDatasetError",
    "UnknownMetricError",
    "ValidationErrorOut",
    "database_fault",
    "error_responses",
    "install_error_handlers",
]

log = logging.getLogger(__name__)


class UnauthorizedError(Exception):
    """Missing or wrong bearer token (the message never contains the token)."""


class ClusterUnavailableError(Exception):
    """The cluster could not be asked to do something (e.g. stop a study's job)."""


class ServiceBusyError(Exception):
    """The API sheds load: the request got no turn at the database in time (service.api.load_shedding)."""


class UnknownDatasetError(LookupError):
    pass


class NoResultsError(LookupError):
    pass


class UnknownMetricError(LookupError):
    """`?metric=` names no metric a results table of the selected trials can be built on: one no trial
    stored as a number, or (`stored`) one the metric table (studies.spec.METRIC_DIRECTIONS) has no better
    direction for; the message lists the metrics that can."""

    def __init__(self, metric: str, known: list[str], *, stored: bool = False) -> None:
        self.metric = metric
        why = "has no known better direction" if stored else "was not stored by these trials"
        listed = ", ".join(known) if known else "none (no trial stored a comparable metric)"
        super().__init__(
            f"unknown metric '{metric}': it {why}; these trials can be compared on {listed}; leave "
            "`metric` out for the dataset's primary metric"
        )


class ClaimNotServedError(LookupError):
    """`?claim=` names a claim this study does not serve: neither the claim its spec names nor one that
    shares that claim's study (the message lists the ones it serves)."""

    def __init__(self, claim: str, served: list[str]) -> None:
        self.claim = claim
        listed = ", ".join(served) if served else "none (the spec names no catalog claim)"
        super().__init__(f"this study does not serve claim '{claim}'; it serves {listed}")


class SpecTooLargeError(Exception):
    pass


class PluginsForbiddenError(Exception):
    """A study naming plugins or user datasets from a request without that right (403); the message names
    the setting or the token."""


class InvalidSpecError(ValueError):
    """A study spec that failed validation; `errors` are pydantic-style dicts (`type`, `loc` inside the
    spec, `msg`, optional `input`)."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        self.errors = errors
        super().__init__(f"invalid study spec ({len(self.errors)} error(s))")

    @classmethod
    def from_validation_error(cls, validation_error: ValidationError) -> InvalidSpecError:
        return cls([dict(error) for error in validation_error.errors(include_url=False)])


# --------------------------------------------------------------------------- documented error bodies


class ErrorOut(BaseModel):
    """Every error but a validation error: one message for people."""

    detail: str


class FieldErrorOut(BaseModel):
    type: str
    loc: list[str | int]  # the field path into the request, e.g. ["body", "budget", "epochs"]
    msg: str
    input: Any = None
    ctx: dict[str, Any] | None = None


class ValidationErrorOut(BaseModel):
    """A 422: every problem found, each at its field path."""

    detail: list[FieldErrorOut]


_ERROR_DESCRIPTIONS = {
    401: "Missing or wrong bearer token",
    403: "The spec names plugins or user datasets, which this server does not accept (NORMLAB_ALLOW_PLUGINS) "
    "or which need the plugin token; the message says which",
    404: "No such resource",
    409: "The request conflicts with the resource's state",
    413: "The request body is larger than the server accepts",
    415: "The request body's content type is not supported",
    422: "Invalid request: every problem with its field path",
    503: "A service the request needs (the cluster, or the database: busy, unreachable, read-only or "
    "damaged) cannot serve it now; the message says which and what to do. Retry after `Retry-After` "
    "seconds when given; without it, retrying alone will not help",
    507: "The database is out of disk space: nothing of the request was stored; free space where the "
    "message says, then retry (after `Retry-After` seconds)",
}


def error_responses(*status_codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for the error statuses a route can answer, so clients (and schema-driven
    tests) know every status and body shape the route may send."""
    return {
        code: {
            "model": ValidationErrorOut if code == 422 else ErrorOut,
            "description": _ERROR_DESCRIPTIONS[code],
        }
        for code in status_codes
    }


def _message(status_code: int, headers: dict[str, str] | None = None):
    # Async: Starlette runs a sync handler in a worker thread, one more wait for a thread under a burst.
    async def handler(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=status_code, headers=headers)

    return handler


# Seconds a shed request is told to wait before it retries. It has already queued for up to
# db_queue_timeout_s; a short pause spreads the retries over the seconds the queue takes to drain
# (BENCHMARKS.md, "The API under a burst").
RETRY_AFTER_S = 2
_BUSY_HEADERS = {"Retry-After": str(RETRY_AFTER_S)}
# A full disk clears when someone (or a cleanup job) frees space: ask again in half a minute, not at once.
DISK_FULL_RETRY_AFTER_S = 30
# An unreachable server (restarting, failing over) usually answers again within seconds.
UNREACHABLE_RETRY_AFTER_S = 5

# SQLite's primary result codes (the low byte of Python's extended `sqlite_errorcode`; not in typeshed).
_SQLITE_BUSY_CODES = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
# Python 3.10's sqlite3 carries no code, only SQLite's message.
_SQLITE_MESSAGES = (
    ("is locked", 5),
    ("database or disk is full", _SQLITE_FULL),
    ("readonly database", _SQLITE_READONLY),
    ("disk I/O error", _SQLITE_IOERR),
    ("unable to open database file", _SQLITE_CANTOPEN),
)
# PostgreSQL's SQLSTATEs (psycopg's errors carry them): busy (lock_not_available, too_many_connections,
# cannot_connect_now), out of disk (disk_full), read-only (read_only_sql_transaction: a standby, or
# default_transaction_read_only), gone (admin_shutdown, crash_shutdown; class 08 is the connection's own)
# and damaged (data_corrupted, index_corrupted).
_POSTGRES_BUSY_STATES = frozenset({"55P03", "53300", "57P03"})
_POSTGRES_FULL_STATES = frozenset({"53100"})
_POSTGRES_READONLY_STATES = frozenset({"25006"})
_POSTGRES_GONE_STATES = frozenset({"57P01", "57P02"})
_POSTGRES_CORRUPT_STATES = frozenset({"XX001", "XX002"})
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


@dataclass(frozen=True)
class DatabaseFault:
    """What a database error means to a client: the status, what broke and what to do, and when a retry
    may succeed without anyone acting (None: it will not)."""

    status: int
    detail: str
    retry_after_s: int | None = None

    @property
    def headers(self) -> dict[str, str] | None:
        return {"Retry-After": str(self.retry_after_s)} if self.retry_after_s is not None else None


_ROLLED_BACK = "the request's changes were not stored (its transaction was rolled back)"
# kind -> (status, what happened and what to do, Retry-After); {reason} is the database's own words.
_FAULTS: dict[str, tuple[int, str, int | None]] = {
    "busy": (503, "the database is busy ({error_type}); retry later", RETRY_AFTER_S),
    "full": (
        507,
        "the database is out of disk space ({reason}): {where} could not be written and {rolled_back}; "
        "free space on that disk, then retry",
        DISK_FULL_RETRY_AFTER_S,
    ),
    "readonly": (
        503,
        "the database is read-only ({reason}): {where} cannot be written and {rolled_back}; make it "
        "writable (a filesystem mounted read-only, the file's owner or mode, a PostgreSQL standby), then "
        "retry",
        None,
    ),
    "cantopen": (
        503,
        "the database cannot be opened ({reason}): {where}; check that the file and its directory exist, "
        "that NormLab may write them and that their filesystem is not mounted read-only",
        None,
    ),
    "io": (
        503,
        "the database's disk failed a read or write ({reason}): {where}; {rolled_back}. Check that disk "
        "and the server log; a retry may succeed",
        DISK_FULL_RETRY_AFTER_S,
    ),
    "gone": (
        503,
        "the database did not answer ({reason}): {where}; {rolled_back}. Retry later; if it lasts, check "
        "that the database server runs and this host can reach it",
        UNREACHABLE_RETRY_AFTER_S,
    ),
    "corrupt": (
        503,
        "the database reports damaged data ({reason}): {where}; {rolled_back}. Restore a backup",
        None,
    ),
}


def database_fault(error: BaseException, *, where: str = "the database") -> DatabaseFault | None:
    """The fault a database (or disk) error means, or None for an error that is no fault of the database's
    state (a bug: the caller lets it become a 500). `where` names the database for people: its file, or
    its server."""
    if isinstance(error, DatabaseCorruptError):  # its message names the file and what to do
        return DatabaseFault(503, f"{error}; {_ROLLED_BACK}")
    cause = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    # sqlalchemy's TimeoutError: no pooled connection in time.
    kind = "busy" if isinstance(error, sa_exc.TimeoutError) else _kind(cause)
    if kind is None:
        return None
    status, template, retry_after_s = _FAULTS[kind]
    detail = template.format(
        error_type=type(error).__name__, reason=_first_line(cause), where=where, rolled_back=_ROLLED_BACK
    )
    return DatabaseFault(status, detail, retry_after_s)


def _kind(cause: BaseException | None) -> str | None:
    """A key of _FAULTS, or None (another error)."""
    if isinstance(cause, OSError):  # a file the request wrote itself
        if cause.errno in _DISK_FULL_ERRNOS:
            return "full"
        return "readonly" if cause.errno == errno.EROFS else None
    if isinstance(cause, sqlite3.Error):
        return _sqlite_kind(cause)
    return _postgres_kind(cause) if cause is not None else None


def _sqlite_kind(cause: sqlite3.Error) -> str | None:
    code = getattr(cause, "sqlite_errorcode", None)  # Python 3.11+: the extended code
    if code is None:
        code = next((c for words, c in _SQLITE_MESSAGES if words in str(cause)), None)
    primary = code & 0xFF if code is not None else None
    if primary in _SQLITE_BUSY_CODES:
        return "busy"
    return {
        _SQLITE_FULL: "full",
        _SQLITE_READONLY: "readonly",
        _SQLITE_CANTOPEN: "cantopen",
        _SQLITE_IOERR: "io",
    }.get(primary or -1)


def _postgres_kind(cause: BaseException) -> str | None:
    state = getattr(cause, "sqlstate", None)  # psycopg's errors carry the SQLSTATE
    if state in _POSTGRES_BUSY_STATES:
        return "busy"
    # A server that cannot write its WAL says so in words before it stops: no SQLSTATE of its own.
    if state in _POSTGRES_FULL_STATES or "No space left on device" in str(cause):
        return "full"
    if state in _POSTGRES_READONLY_STATES:
        return "readonly"
    if state in _POSTGRES_CORRUPT_STATES:
        return "corrupt"
    if state in _POSTGRES_GONE_STATES or (state or "").startswith("08"):
        return "gone"
    # psycopg's OperationalError without a SQLSTATE is the client's own: no connection, or one lost. Not
    # imported here: where psycopg was never imported, no error can be one of its.
    psycopg = sys.modules.get("psycopg")
    if state is None and psycopg is not None and type(cause) is psycopg.OperationalError:
        return "gone"
    return None


def _first_line(error: BaseException | None) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:200]


def database_place(engine: Engine) -> str:
    """The database as the people who run the service know it: its file, or its server (no credentials)."""
    url = engine.url
    if url.get_backend_name() == "sqlite":
        return f"the SQLite file {url.database}" if url.database not in (None, "", ":memory:") else "SQLite"
    port = f":{url.port}" if url.port else ""
    return f"the PostgreSQL database {url.database} on {url.host or 'localhost'}{port}"


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    """A database (or disk) that cannot serve the request: the status and words of `database_fault`. Any
    other database error is a bug, left to the 500 handler (and its traceback to the log)."""
    fault = database_fault(exc, where=database_place(request.app.state.engine))
    if fault is None:
        raise exc
    if fault.status != 503 or fault.retry_after_s != RETRY_AFTER_S:  # a busy moment is no news for the log
        log.error("%s %s answered %d: %s", request.method, request.url.path, fault.status, fault.detail)
    return JSONResponse({"detail": fault.detail}, status_code=fault.status, headers=fault.headers)


async def _internal_error(_request: Request, exc: Exception) -> JSONResponse:
    # Starlette calls this for an error no other handler took, then re-raises it for the server's log.
    detail = f"internal error ({type(exc).__name__}); the server log has its traceback"
    return JSONResponse({"detail": detail}, status_code=500)


async def _invalid_spec(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, InvalidSpecError)
    errors = [
        {
            "type": error["type"],
            "loc": ["body", *error["loc"]],  # the same field paths FastAPI gives its own 422s
            "msg": error["msg"],
            "input": error.get("input"),
        }
        for error in exc.errors
    ]
    return JSONResponse({"detail": _json_safe(errors)}, status_code=422)


def _json_safe(value: Any) -> Any:
    """Error details as strict JSON: an echoed NaN or infinity (which JSON cannot carry), text that is
    not valid Unicode or a YAML-only value (date, bytes) would otherwise turn the 422 into a 500."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_json_safe(str(key)): _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return _json_safe(str(value))


async def _idempotency_key_reused(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, IdempotencyKeyReusedError)
    detail = [
        {
            "type": "idempotency_key_reused",
            "loc": ["header", "Idempotency-Key"],
            "msg": str(exc),
            "input": exc.idempotency_key,
        }
    ]
    return JSONResponse({"detail": _json_safe(detail)}, status_code=422)


async def _unknown_metric(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, UnknownMetricError)
    detail = [{"type": "unknown_metric", "loc": ["query", "metric"], "msg": str(exc), "input": exc.metric}]
    return JSONResponse({"detail": _json_safe(detail)}, status_code=422)


async def _claim_not_served(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ClaimNotServedError)
    detail = [{"type": "claim_not_served", "loc": ["query", "claim"], "msg": str(exc), "input": exc.claim}]
    return JSONResponse({"detail": _json_safe(detail)}, status_code=422)


async def _invalid_tag(_request: Request, exc: Exception) -> JSONResponse:
    # Only a tag the API's own validation let through gets here (service.api.routes.tag_values states the
    # same rules): at the body's tags, as a 422 of FastAPI's would be.
    assert isinstance(exc, InvalidTagError)
    loc: list[str | int] = ["body", "tags"] if exc.index is None else ["body", "tags", exc.index]
    detail = [{"type": "invalid_tag", "loc": loc, "msg": str(exc), "input": exc.tag}]
    return JSONResponse({"detail": _json_safe(detail)}, status_code=422)


async def _deletion_not_confirmed(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DeletionNotConfirmedError)
    detail = [
        {"type": "deletion_not_confirmed", "loc": ["query", "confirm"], "msg": str(exc), "input": exc.confirm}
    ]
    return JSONResponse({"detail": _json_safe(detail)}, status_code=422)


async def _spec_format(_request: Request, exc: Exception) -> JSONResponse:
    detail = [{"type": "spec_format", "loc": ["body"], "msg": str(exc)}]
    return JSONResponse({"detail": _json_safe(detail)}, status_code=422)  # the message may quote a key


_HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors, except that a 405 names every method of the path in `Allow`: Starlette
    answers from the first route that matched the path, and /studies is one route per method."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code != 405:
        return await http_exception_handler(request, exc)
    # Ask the router which methods would fully match this path (included routers hide their routes).
    allowed = [
        method
        for method in _HTTP_METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL
            for route in request.app.router.routes
        )
    ]
    return JSONResponse({"detail": exc.detail}, status_code=405, headers={"Allow": ", ".join(allowed)})


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(StudyNotFoundError, _message(404))
    app.add_exception_handler(UnknownDatasetError, _message(404))
    app.add_exception_handler(NoResultsError, _message(404))
    app.add_exception_handler(UnknownFigureError, _message(404))  # the message lists the page's figures
    app.add_exception_handler(InvalidStatusTransitionError, _message(409))
    app.add_exception_handler(TrialKeyConflictError, _message(409))
    app.add_exception_handler(StudyNotDeletableError, _message(409))
    app.add_exception_handler(DeletionNotConfirmedError, _deletion_not_confirmed)
    app.add_exception_handler(InvalidTagError, _invalid_tag)
    app.add_exception_handler(InvalidTrialError, _message(422))
    app.add_exception_handler(UnauthorizedError, _message(401, {"WWW-Authenticate": "Bearer"}))
    app.add_exception_handler(SpecTooLargeError, _message(413))
    app.add_exception_handler(PluginsForbiddenError, _message(403))
    app.add_exception_handler(UnsupportedContentTypeError, _message(415))
    app.add_exception_handler(UnknownMetricError, _unknown_metric)
    app.add_exception_handler(ClaimNotServedError, _claim_not_served)
    app.add_exception_handler(IdempotencyKeyReusedError, _idempotency_key_reused)
    app.add_exception_handler(SpecFormatError, _spec_format)
    app.add_exception_handler(InvalidSpecError, _invalid_spec)
    app.add_exception_handler(ClusterUnavailableError, _message(503))
    app.add_exception_handler(DispatchError, _message(503))  # the cluster failed a request a route made
    app.add_exception_handler(ServiceBusyError, _message(503, _BUSY_HEADERS))
    app.add_exception_handler(sa_exc.TimeoutError, _database_error)  # no pooled connection in time
    # Every DBAPI error (OperationalError: busy, full, read-only, gone; InternalError: PostgreSQL's
    # read-only transaction; DatabaseError: damaged data) and the files a request writes itself.
    app.add_exception_handler(sa_exc.DBAPIError, _database_error)
    app.add_exception_handler(DatabaseCorruptError, _database_error)
    app.add_exception_handler(OSError, _database_error)
    app.add_exception_handler(Exception, _internal_error)  # last: JSON, not Starlette's text/plain 500
