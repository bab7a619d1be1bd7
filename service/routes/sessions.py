"""Database access for the routes: read-only sessions for GETs, the engine for routes that own their
transactions (cancel keeps its Ray call outside any of them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.store import session_scope

__all__ = ["EngineDep", "ReadSessionDep"]


def get_engine(request: Request) -> Engine:
    return request.app.state.engine


def get_read_session(request: Request) -> Iterator[Session]:
    # Read-only: on SQLite a plain BEGIN, so polling never waits for the drivers' trial writes.
    with session_scope(request.app.state.engine, readonly=True) as session:
        yield session


EngineDep = Annotated[Engine, Depends(get_engine)]
ReadSessionDep = Annotated[Session, Depends(get_read_session, scope="function")]
