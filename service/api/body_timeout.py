"""Request bodies that stall, and clients that leave mid-request.

uvicorn closes a keep-alive connection that sits idle between requests, but not one whose request body
stops arriving: a client that declares 200 bytes and sends 10 holds its connection, a file descriptor and
the task reading the body for as long as it likes (300 such clients held 300 descriptors past two
minutes). BodyTimeoutMiddleware gives every request body a deadline, counted from the app's first read
of it: a body not complete by then is answered 408 and its connection closed (the app, which asked for
more, is told the client left).

A client that leaves while its body is read is routine on a network, not a server error: it is one INFO
line here, where Starlette's ClientDisconnect would otherwise reach uvicorn as an ERROR with a traceback.
"""

from __future__ import annotations

import json
import logging

import anyio
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyTimeoutMiddleware"]

log = logging.getLogger(__name__)

_DISCONNECT: Message = {"type": "http.disconnect"}


class BodyTimeoutMiddleware:
    """At most `timeout_s` seconds for a request's whole body (a per-chunk limit alone would let a client
    trickle one byte per interval forever); only reads of the body are timed, not the app's work."""

    def __init__(self, app: ASGIApp, *, timeout_s: float) -> None:
        assert timeout_s > 0, timeout_s
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = _TimedBody(receive, send, self.timeout_s)
        try:
            await self.app(scope, body.receive, body.send)
        except ClientDisconnect:
            if not body.timed_out:
                log.info("client %s left during %s %s", _client(scope), scope["method"], scope["path"])
                return
        except Exception:
            if not body.timed_out:
                raise
            # What the app made of the missing body (a 400, an error) matters no more: the answer is 408.
        if body.timed_out:
            log.info(
                "client %s sent the body of %s %s too slowly (over %g s): answered 408, connection closed",
                _client(scope),
                scope["method"],
                scope["path"],
                self.timeout_s,
            )
            if not body.response_started:
                await _request_timeout(send, self.timeout_s)


class _TimedBody:
    """One request's receive and send, with the body's deadline and what has been sent so far."""

    def __init__(self, receive: Receive, send: Send, timeout_s: float) -> None:
        self._receive = receive
        self._send = send
        self._timeout_s = timeout_s
        self._deadline: float | None = None  # set at the first read
        self.complete = False  # the whole body has been read: later reads wait for a disconnect, untimed
        self.timed_out = False
        self.response_started = False

    async def receive(self) -> Message:
        if self.timed_out:
            return _DISCONNECT
        if self.complete:
            return await self._receive()  # e.g. a streaming response listening for the client to leave
        if self._deadline is None:
            self._deadline = anyio.current_time() + self._timeout_s
        with anyio.move_on_after(self._deadline - anyio.current_time()):
            message = await self._receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                self.complete = True
            return message
        self.timed_out = True
        return _DISCONNECT  # no more body is coming: the ASGI way to say so

    async def send(self, message: Message) -> None:
        if self.timed_out:
            return  # the middleware answers 408 instead
        if message["type"] == "http.response.start":
            self.response_started = True
        await self._send(message)


async def _request_timeout(send: Send, timeout_s: float) -> None:
    body = json.dumps({"detail": f"the request body did not arrive within {timeout_s:g} s"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 408,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),  # the rest of the body may still come: never read it
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "?"
