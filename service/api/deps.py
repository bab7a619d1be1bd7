"""FastAPI dependencies, as `Annotated` aliases the routes declare (SettingsDep, AuthDep, ...).

Every one is `async def`: FastAPI runs a sync dependency in one of AnyIO's 40 worker threads, and none of
these blocks, so a thread would only be one more thing for a request to wait for under a burst.

The database is reached through DatabaseDep: the gate that runs each unit of work in a transaction of its
own (service.api.load_shedding), or EngineDep for routes that own their transactions (cancel keeps its Ray
call outside any of them). No route holds a session across the request: a session dependency with `yield`
would keep its connection (and on SQLite a write transaction) open until the response is serialized, which
for a sync route waits for a free worker thread. Under a burst of more than 40 requests that was a
deadlock until a timeout (issue 23)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Engine

from service.api.errors import UnauthorizedError
from service.api.load_shedding import DatabaseGate
from service.auth import token_matches
from service.orchestration.ports import Dispatcher
from service.orchestration.study_runs import StudyRuns
from service.settings import Settings

__all__ = [
    "AuthDep",
    "DatabaseDep",
    "DispatcherDep",
    "EngineDep",
    "SettingsDep",
    "StudyRunsDep",
    "require_token",
]


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_dispatcher(request: Request) -> Dispatcher | None:
    # Routes see the cluster through the service.orchestration.ports.Dispatcher protocol only (None: no cluster wired).
    return request.app.state.dispatcher


async def get_study_runs(request: Request) -> StudyRuns:
    # The MLflow runs of studies (service.orchestration.study_runs): what a deletion marks there.
    return request.app.state.study_runs


_bearer = HTTPBearer(auto_error=False, description="the API token (`normlab token` prints it)")


async def require_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    if credentials is None:
        raise UnauthorizedError(
            "missing bearer token: send `Authorization: Bearer <token>` (`normlab token` prints it)"
        )
    plugin_token = request.app.state.plugin_token
    # The plugin token grants what the API token does, and running code besides (service.api.plugins).
    if not token_matches(credentials.credentials, request.app.state.api_token.get_secret_value()) and not (
        plugin_token is not None and token_matches(credentials.credentials, plugin_token)
    ):
        raise UnauthorizedError("wrong bearer token")


SettingsDep = Annotated[Settings, Depends(get_settings)]
DispatcherDep = Annotated[Dispatcher | None, Depends(get_dispatcher)]
StudyRunsDep = Annotated[StudyRuns, Depends(get_study_runs)]
AuthDep = Depends(require_token)


async def get_engine(request: Request) -> Engine:
    return request.app.state.engine


async def get_database(request: Request) -> DatabaseGate:
    """The app's gate, made on first use (one per engine: a test may swap the app's engine)."""
    state = request.app.state
    gate: DatabaseGate | None = getattr(state, "database_gate", None)
    if gate is None or gate.engine is not state.engine:
        gate = state.database_gate = DatabaseGate(state.engine, wait_s=state.settings.db_queue_timeout_s)
    return gate


EngineDep = Annotated[Engine, Depends(get_engine)]
DatabaseDep = Annotated[DatabaseGate, Depends(get_database)]
