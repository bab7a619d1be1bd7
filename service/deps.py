"""FastAPI dependencies, as `Annotated` aliases the routes declare (SessionDep, SettingsDep, ...)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from service.auth import token_matches
from service.errors import UnauthorizedError
from service.ports import Dispatcher
from service.settings import Settings
from service.store import session_scope

__all__ = ["AuthDep", "DispatcherDep", "SessionDep", "SettingsDep", "require_token"]


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    with session_scope(request.app.state.engine) as session:
        yield session


def get_dispatcher(request: Request) -> Dispatcher | None:
    # Routes see the cluster through the service.ports.Dispatcher protocol only (None: no cluster wired).
    return request.app.state.dispatcher


_bearer = HTTPBearer(auto_error=False, description="the API token (`normlab token` prints it)")


def require_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    if credentials is None:
        raise UnauthorizedError(
            "missing bearer token: send `Authorization: Bearer <token>` (`normlab token` prints it)"
        )
    if not token_matches(credentials.credentials, request.app.state.api_token.get_secret_value()):
        raise UnauthorizedError("wrong bearer token")


SettingsDep = Annotated[Settings, Depends(get_settings)]
# scope="function": commit (or roll back) before the response leaves, so a 201 means the row is stored.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
DispatcherDep = Annotated[Dispatcher | None, Depends(get_dispatcher)]
AuthDep = Depends(require_token)
