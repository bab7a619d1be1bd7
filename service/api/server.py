"""The API as `normlab serve` runs it: uvicorn with the limits a service on a network needs, in a thread of
its own, so that stopping it takes a bounded time whatever its requests are doing.

Why a thread: run in the main thread, uvicorn cancels the open requests once its graceful period is over,
but a request running in a worker thread (a sync route in SQLite's busy handler, a Ray call with no
timeout) goes on, and asyncio's close and then the interpreter's exit wait for it: those worker threads are
not daemons. A Ctrl-C during a burst of 120 POSTs took 45 s that way, 36 of them in the interpreter's exit,
after MLflow and Ray were already stopped. Here the API's thread is a daemon, and so is every worker thread
it starts (a thread inherits its creator's daemon flag): the launcher waits for the API at most its
graceful period and a second, then stops the rest, and the process exits without waiting for a request
that never ends.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
import time
from typing import TYPE_CHECKING

from service.settings import Settings

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

__all__ = ["MAX_REQUEST_HEAD_BYTES", "ApiServer", "api_config"]

log = logging.getLogger(__name__)

_AFTER_GRACE_S = 1.0  # past uvicorn's graceful period: its cancelling of requests, the app's shutdown
_POLL_S = 0.1
# A request line and headers larger than this (give or take _HEAD_SLICE) are answered 431. Browsers and
# curl send under 8 KiB; a larger head is a mistake or an attack on the server's memory.
MAX_REQUEST_HEAD_BYTES = 16 * 1024
# h11 measures only a head it has not yet seen the end of: one read (up to 256 KiB) holding a whole head
# would pass. Fed in slices of this size while a head is awaited, h11 sees every head grow past the limit.
_HEAD_SLICE = 4096
# After a 431, what the client still sends is read and dropped for at most this long and this much, then
# the connection is closed. Closed at once with the rest unread, the socket would reset, and a client
# still sending its headers would see the reset, never the answer.
_DRAIN_S = 2.0
_DRAIN_BYTES = 8 * 1024 * 1024


@functools.cache
def _head_limited_h11() -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, except that a request head larger than the limit is a 431 (uvicorn says 400
    and closes at once) with the API's JSON error body, followed by a lingering close (_DRAIN_S)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadLimitedH11Protocol(H11Protocol):
        _draining = False
        _drained = 0

        def data_received(self, data: bytes) -> None:
            if self._draining:
                self._drained += len(data)
                if self._drained > _DRAIN_BYTES:
                    self.transport.close()
                return
            while len(data) > _HEAD_SLICE and self.conn.their_state is h11.IDLE:
                super().data_received(data[:_HEAD_SLICE])
                data = data[_HEAD_SLICE:]
                if self._draining or self.transport.is_closing():
                    return
            super().data_received(data)

        def send_400_response(self, msg: str) -> None:
            # uvicorn calls this for every request h11 refuses; h11 refuses an incomplete head once its
            # buffer passes the limit, so a buffer that large means the head was too large.
            if len(self.conn.trailing_data[0]) <= MAX_REQUEST_HEAD_BYTES:
                super().send_400_response(msg)
                return
            log.warning("a request head larger than %d bytes: answered 431", MAX_REQUEST_HEAD_BYTES)
            body = json.dumps(
                {
                    "detail": f"the request line and headers are larger than {MAX_REQUEST_HEAD_BYTES} "
                    "bytes; send smaller headers (a bearer token and a content type need far less)"
                }
            ).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ]
            for event in (
                h11.Response(status_code=431, headers=headers, reason=b"Request Header Fields Too Large"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event) or b"")
            self._draining = True
            if self.transport.can_write_eof():
                self.transport.write_eof()  # the answer, then end of stream: the client reads both
            self.loop.call_later(_DRAIN_S, self.transport.close)

    return HeadLimitedH11Protocol


def api_config(app: ASGIApp, settings: Settings, *, grace_s: int, access_log: bool) -> uvicorn.Config:
    """uvicorn's settings for the API; `grace_s`: how long open requests may finish once told to stop."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=settings.api_host,
        port=settings.api_port,
        log_level=settings.log_level,
        access_log=access_log,
        loop="asyncio",  # the loop ApiServer runs it on (asyncio.run)
        # The protocol these limits are set (and service.api.body_timeout is tested) for, whatever else is
        # installed: httptools has no limit on the size of a request's head. Its head limit is a 431.
        http=_head_limited_h11(),
        timeout_graceful_shutdown=grace_s,
        # An idle connection between two requests is closed after this long (uvicorn has no such limit
        # for a request body in progress: service.api.body_timeout is that one).
        timeout_keep_alive=5,
        # Past this many open connections and requests, a new request is answered 503 at once: a flood
        # cannot take every file descriptor of the process.
        limit_concurrency=settings.api_max_connections,
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,  # a larger request head gets a 431
        server_header=False,  # no `server: uvicorn` to tell a scanner what runs here
    )


class ApiServer:
    """A uvicorn.Server in a daemon thread: start(), wait_until() a stop is asked for, stop() within a
    bounded time; `error` is what ended the server on its own (a port in use: SystemExit)."""

    def __init__(self, config: uvicorn.Config) -> None:
        import uvicorn

        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="normlab-api", daemon=True)
        # Set once uvicorn's own stop is over. asyncio's cleanup after it waits for the requests still
        # running in worker threads, however long: nothing waits for that.
        self._served = threading.Event()
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        finally:
            self._served.set()

    async def _serve(self) -> None:
        try:
            await self._server.serve()
        except BaseException as exc:  # uvicorn exits (SystemExit) when it cannot start: the caller raises it
            self.error = exc
        finally:
            self._served.set()

    def start(self) -> None:
        self._thread.start()

    @property
    def ended(self) -> bool:
        """Not started, or uvicorn has stopped (whether the thread still cleans up or not)."""
        return self._served.is_set() or not self._thread.is_alive()

    def wait_until(self, stop: threading.Event) -> None:
        """Return once `stop` is set, or the server ended on its own. Polls: `stop` is set by a signal
        handler, which must never wait for a lock the code it interrupts (a wait on `stop`) holds."""
        while not self.ended and not stop.is_set():
            self._served.wait(_POLL_S)

    def stop(self, *, grace_s: float, hurry: threading.Event | None = None) -> bool:
        """Stop taking connections, give open requests `grace_s` (uvicorn cancels them then), and wait at
        most that and a second for uvicorn to stop; `hurry` ends the wait at once. Returns whether it
        stopped; one that did not ends with the process (its threads are daemons)."""
        self._server.should_exit = True
        deadline = time.monotonic() + grace_s + _AFTER_GRACE_S
        while not self.ended and time.monotonic() < deadline:
            if hurry is not None and hurry.is_set():
                self._server.force_exit = True  # uvicorn stops waiting for open requests
                break
            self._served.wait(_POLL_S)
        return self.ended
