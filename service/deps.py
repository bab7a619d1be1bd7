"""FastAPI dependencies, as `Annotated` aliases the routes declare (SettingsDep, AuthDep, ...).

Every one is `async def`: FastAPI runs a sync dependency in one of AnyIO's 40 worker threads, and none of
these blocks, so a thread would only be one more thing for a request to wait for under a burst. The
database is reached through service.routes.sessions.DatabaseDep (one transaction per unit of work),
never a session held across the request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.auth import token_matches
from service.errors import UnauthorizedError
from service.ports import Dispatcher
from service.settings import Settings

__all__ = ["AuthDep", "DispatcherDep", "SettingsDep", "require_token"]


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_dispatcher(request: Request) -> Dispatcher | None:
    # Routes see the cluster through the service.ports.Dispatcher protocol only (None: no cluster wired).
    return request.app.state.dispatcher


_bearer = HTTPBearer(auto_error=False, description="the API token (`normlab token` prints it)")


async def require_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    if credentials is None:
        raise UnauthorizedError(
            "missing bearer token: send `Authorization: Bearer <token>` (`normlab token` prints it)"
        )
    if not token_matches(credentials.credentials, request.app.state.api_token.get_secret_value()):
        raise UnauthorizedError("wrong bearer token")


SettingsDep = Annotated[Settings, Depends(get_settings)]
DispatcherDep = Annotated[Dispatcher | None, Depends(get_dispatcher)]
AuthDep = Depends(require_token)
