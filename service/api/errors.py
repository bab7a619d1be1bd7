"""Domain errors -> HTTP responses, in this one place (routes raise, never build error responses).

Every error body is `{"detail": ...}`: a message string, or for validation errors FastAPI's list of
`{"type", "loc", "msg"}` with `loc` the field path into the request.
"""

from __future__ import annotations

import math
import sqlite3
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from service.orchestration.ports import DispatchError
from studies.spec import SpecFormatError, UnsupportedContentTypeError
from studies.store import (
    IdempotencyKeyReusedError,
    InvalidStatusTransitionError,
    InvalidTrialError,
    StudyNotFoundError,
    TrialKeyConflictError,
)

__all__ = [
    "ClusterUnavailableError",
    "ErrorOut",
    "FieldErrorOut",
    "InvalidSpecError",
    "NoResultsError",
    "ServiceBusyError",
    "SpecTooLargeError",
    "UnauthorizedError",
    "UnknownDatasetError",
    "UnknownMetricError",
    "ValidationErrorOut",
    "error_responses",
    "install_error_handlers",
]


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
    404: "No such resource",
    409: "The request conflicts with the resource's state",
    413: "The request body is larger than the server accepts",
    415: "The request body's content type is not supported",
    422: "Invalid request: every problem with its field path",
    503: "A service the request needs (the cluster, or the database under load) did not answer in time; "
    "retry later (after `Retry-After` seconds, when given)",
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
# Database errors that mean "busy now", not "broken": SQLite's lock still held after the busy timeout, and
# PostgreSQL's lock_not_available, too_many_connections and cannot_connect_now.
_SQLITE_BUSY_CODES = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED (not in typeshed's sqlite3)
_POSTGRES_BUSY_STATES = frozenset({"55P03", "53300", "57P03"})


async def _database_busy(_request: Request, exc: Exception) -> JSONResponse:
    """The last line behind the gate (service.api.load_shedding), for a route outside it or a study driver that
    holds SQLite's lock past the busy timeout: a busy database is a 503 the client may retry, not a 500.
    Any other database error stays a 500."""
    assert isinstance(exc, (sa_exc.TimeoutError, sa_exc.OperationalError))
    if isinstance(exc, sa_exc.OperationalError) and not _is_busy(exc.orig):
        raise exc
    detail = f"the database is busy ({type(exc).__name__}); retry later"
    return JSONResponse({"detail": detail}, status_code=503, headers=_BUSY_HEADERS)


def _is_busy(error: BaseException | None) -> bool:
    if isinstance(error, sqlite3.OperationalError):
        code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+; 3.10 has the message only
        return code in _SQLITE_BUSY_CODES if code is not None else "is locked" in str(error)
    return getattr(error, "sqlstate", None) in _POSTGRES_BUSY_STATES  # psycopg's errors carry the SQLSTATE


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


async def _spec_format(_request: Request, exc: Exception) -> JSONResponse:
    detail = [{"type": "spec_format", "loc": ["body"], "msg": str(exc)}]
    return JSONResponse({"detail": detail}, status_code=422)


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
    app.add_exception_handler(InvalidStatusTransitionError, _message(409))
    app.add_exception_handler(TrialKeyConflictError, _message(409))
    app.add_exception_handler(InvalidTrialError, _message(422))
    app.add_exception_handler(UnauthorizedError, _message(401, {"WWW-Authenticate": "Bearer"}))
    app.add_exception_handler(SpecTooLargeError, _message(413))
    app.add_exception_handler(UnsupportedContentTypeError, _message(415))
    app.add_exception_handler(UnknownMetricError, _unknown_metric)
    app.add_exception_handler(ClaimNotServedError, _claim_not_served)
    app.add_exception_handler(IdempotencyKeyReusedError, _idempotency_key_reused)
    app.add_exception_handler(SpecFormatError, _spec_format)
    app.add_exception_handler(InvalidSpecError, _invalid_spec)
    app.add_exception_handler(ClusterUnavailableError, _message(503))
    app.add_exception_handler(DispatchError, _message(503))  # the cluster failed a request a route made
    app.add_exception_handler(ServiceBusyError, _message(503, _BUSY_HEADERS))
    app.add_exception_handler(sa_exc.TimeoutError, _database_busy)  # no pooled connection in time
    app.add_exception_handler(sa_exc.OperationalError, _database_busy)
