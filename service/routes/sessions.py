"""Database access for the routes: the gate that runs each unit of work in a transaction of its own
(service.load_shedding), and the engine for routes that own their transactions (cancel keeps its Ray call
outside any of them).

No route holds a session across the request: a session dependency with `yield` would keep its connection
(and on SQLite a write transaction) open until the response is serialized, which for a sync route waits for
a free worker thread. Under a burst of more than 40 requests that was a deadlock until a timeout (issue 23).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Engine

from service.load_shedding import DatabaseGate

__all__ = ["DatabaseDep", "EngineDep"]


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
