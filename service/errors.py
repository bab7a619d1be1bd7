"""Domain errors -> HTTP responses, in this one place (routes raise, never build error responses).

Every error body is `{"detail": ...}`: a message string, or for validation errors FastAPI's list of
`{"type", "loc", "msg"}` with `loc` the field path into the request.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from service.store import (
    InvalidStatusTransitionError,
    InvalidTrialError,
    StudyNotFoundError,
    TrialKeyConflictError,
)
from studies.spec import SpecFormatError, UnsupportedContentTypeError

__all__ = [
    "ClusterUnavailableError",
    "InvalidSpecError",
    "NoResultsError",
    "SpecTooLargeError",
    "UnauthorizedError",
    "UnknownDatasetError",
    "install_error_handlers",
]


class UnauthorizedError(Exception):
    """Missing or wrong bearer token (the message never contains the token)."""


class ClusterUnavailableError(Exception):
    """The cluster could not be asked to do something (e.g. stop a study's job)."""


class UnknownDatasetError(LookupError):
    pass


class NoResultsError(LookupError):
    pass


class SpecTooLargeError(Exception):
    pass


class InvalidSpecError(ValueError):
    """A study spec that failed validation; `errors` are pydantic's, with `loc` inside the spec."""

    def __init__(self, validation_error: ValidationError) -> None:
        self.errors = validation_error.errors(include_url=False)
        super().__init__(f"invalid study spec ({len(self.errors)} error(s))")


def _message(status_code: int, headers: dict[str, str] | None = None):
    def handler(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=status_code, headers=headers)

    return handler


def _invalid_spec(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, InvalidSpecError)
    errors: list[dict[str, Any]] = []
    for error in exc.errors:
        errors.append(
            {
                "type": error["type"],
                "loc": ["body", *error["loc"]],  # the same field paths FastAPI gives its own 422s
                "msg": error["msg"],
                "input": error.get("input"),
            }
        )
    return JSONResponse({"detail": jsonable_encoder(errors)}, status_code=422)


def _spec_format(_request: Request, exc: Exception) -> JSONResponse:
    detail = [{"type": "spec_format", "loc": ["body"], "msg": str(exc)}]
    return JSONResponse({"detail": detail}, status_code=422)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(StudyNotFoundError, _message(404))
    app.add_exception_handler(UnknownDatasetError, _message(404))
    app.add_exception_handler(NoResultsError, _message(404))
    app.add_exception_handler(InvalidStatusTransitionError, _message(409))
    app.add_exception_handler(TrialKeyConflictError, _message(409))
    app.add_exception_handler(InvalidTrialError, _message(422))
    app.add_exception_handler(UnauthorizedError, _message(401, {"WWW-Authenticate": "Bearer"}))
    app.add_exception_handler(SpecTooLargeError, _message(413))
    app.add_exception_handler(UnsupportedContentTypeError, _message(415))
    app.add_exception_handler(SpecFormatError, _spec_format)
    app.add_exception_handler(InvalidSpecError, _invalid_spec)
    app.add_exception_handler(ClusterUnavailableError, _message(503))
