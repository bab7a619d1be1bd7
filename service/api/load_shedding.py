"""The API's database work: bounded, off the event loop, one transaction per unit of work.

Every route that reads or writes the store runs its unit of work through a `DatabaseGate`: in a worker
thread of the gate's own (not one of the 40 AnyIO lends sync routes and dependencies), with its session
opened, committed and closed inside that thread. So a pooled connection, and on SQLite the write lock, is
held only while the store call runs: never across response validation or a wait for a free thread. Under
a burst of more than 40 requests that wait was a deadlock until a timeout fired (issue 23): every thread
waited for the lock or a connection that a finished request could give back only once it got a thread.

At most `slots` units run at once, fewer than the engine pools connections, so no unit waits for one (the
rest serve the routes outside the gate: readiness probes, cancel). Turns are given first come, first
served; a request that gets none within `wait_s` is answered 503 with Retry-After (ServiceBusyError):
under a burst the API sheds load instead of queueing into timeouts. SQLite writers are not queued one at a
time here: measured, that was slower (their work before BEGIN IMMEDIATE no longer overlaps) and the busy
handler serves a handful of in-process writers well within its timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.api.errors import ServiceBusyError
from studies.store import session_scope
from studies.store.engine import POOL_CAPACITY

__all__ = ["DB_SLOTS", "DatabaseGate"]

T = TypeVar("T")

# Units of work at once: 5 below the pool's capacity, so the connections the routes outside the gate take
# (readiness probes, cancel) never queue behind the gate's.
DB_SLOTS = POOL_CAPACITY - 5


class DatabaseGate:
    """Runs units of work on `engine`, at most `slots` at once, each waiting at most `wait_s` for its turn."""

    def __init__(self, engine: Engine, *, wait_s: float, slots: int = DB_SLOTS) -> None:
        assert 0 < slots <= POOL_CAPACITY, "a unit of work must never wait on the pool for a connection"
        self.engine = engine
        self._wait_s = wait_s
        self._turns = anyio.Semaphore(slots)  # first come, first served
        self._threads = anyio.CapacityLimiter(slots)  # a turn always finds its thread free

    async def read(self, work: Callable[[Session], T]) -> T:
        """`work(session)` in a read-only transaction (on SQLite it takes no write lock)."""
        return await self._run(work, readonly=True)

    async def write(self, work: Callable[[Session], T]) -> T:
        """`work(session)` in a transaction committed before this returns (a 201 means stored)."""
        return await self._run(work, readonly=False)

    async def _run(self, work: Callable[[Session], T], *, readonly: bool) -> T:
        try:
            with anyio.fail_after(self._wait_s):
                await self._turns.acquire()
        except TimeoutError:
            raise ServiceBusyError(
                f"the database is busy: no turn within {self._wait_s:g} s; retry later"
            ) from None
        try:
            # A started unit runs to its end even if the request is cancelled (AnyIO waits for its thread),
            # so the turn is never given back while the unit still holds a connection.
            return await anyio.to_thread.run_sync(
                _unit_of_work, self.engine, work, readonly, limiter=self._threads
            )
        finally:
            self._turns.release()


def _unit_of_work(engine: Engine, work: Callable[[Session], T], readonly: bool) -> T:
    with session_scope(engine, readonly=readonly) as session:
        return work(session)
