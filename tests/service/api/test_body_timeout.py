"""Slow clients cannot pin the API: a request body that stalls is answered 408 and its connection closed
within the body timeout, the server's file descriptors come back, and a client that leaves mid-body is one
INFO line, not an ERROR with a traceback.

The middleware alone, in process (fast); then a real uvicorn server, configured as `normlab serve` runs it
(service.api.server), fed raw sockets that declare a body and send a tenth of it (slow).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from service.api.body_timeout import BodyTimeoutMiddleware
from service.stack.processes import free_port, http_ok, wait_until

REPO = Path(__file__).resolve().parents[3]
TOKEN = "body-timeout-test-token"
SPEC = json.dumps(
    {
        "name": "tiny",
        "dataset": "digits",
        "model": "vit_lite_tiny",
        "methods": ["frozen_ln"],
        "num_samples": 1,
        "seeds": [0],
        "budget": {"epochs": 1, "batch_size": 64},
    }
).encode()


# ----------------------------------------------------------------------------- the middleware, in process


async def _echo_body(scope: Scope, receive: Receive, send: Send) -> None:
    """An app that reads the whole body (Starlette raises ClientDisconnect if the client leaves) and
    answers 200 with its length."""
    body = await Request(scope, receive).body()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(len(body)).encode()})


def _call(app, messages: list[Message | None], *, timeout_s: float = 0.2) -> list[Message]:
    """Run one request through the middleware; `messages` are what receive() returns in turn, None for a
    client that sends nothing more (receive never returns)."""
    sent: list[Message] = []

    async def receive() -> Message:
        message = messages.pop(0) if messages else None
        if message is None:
            await asyncio.Event().wait()  # forever
        assert message is not None
        return message

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/studies", "headers": [], "client": ("10.0.0.1", 5)}
    asyncio.run(asyncio.wait_for(BodyTimeoutMiddleware(app, timeout_s=timeout_s)(scope, receive, send), 5))
    return sent


def _chunk(data: bytes, *, more: bool) -> Message:
    return {"type": "http.request", "body": data, "more_body": more}


def test_a_body_that_stalls_is_answered_408_with_the_connection_closed(caplog):
    with caplog.at_level(logging.INFO, logger="service.api.body_timeout"):
        sent = _call(_echo_body, [_chunk(b"0123456789", more=True), None])
    start = sent[0]
    assert start["status"] == 408 and (b"connection", b"close") in start["headers"]
    assert "did not arrive within 0.2 s" in json.loads(sent[1]["body"])["detail"]
    assert len(sent) == 2  # nothing the app made of the missing body (a 400) goes out
    assert [r.levelno for r in caplog.records] == [logging.INFO] and "408" in caplog.records[0].message


def test_a_body_sent_in_time_passes_and_the_apps_own_work_does_not_count(caplog):
    async def slow_then_read(scope: Scope, receive: Receive, send: Send) -> None:
        await asyncio.sleep(0.4)  # twice the body timeout, before the first read: not the client's delay
        await _echo_body(scope, receive, send)

    sent = _call(slow_then_read, [_chunk(b"01234", more=True), _chunk(b"56789", more=False)])
    assert sent[0]["status"] == 200 and sent[1]["body"] == b"10"


def test_after_the_body_a_wait_for_the_client_to_leave_is_not_timed():
    async def stream_until_the_client_leaves(scope: Scope, receive: Receive, send: Send) -> None:
        await Request(scope, receive).body()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        assert (await receive())["type"] == "http.disconnect"  # after 0.5 s, longer than the timeout
        await send({"type": "http.response.body", "body": b"done"})

    async def leave_later() -> Message:
        await asyncio.sleep(0.5)
        return {"type": "http.disconnect"}

    messages: list[Message | None] = [_chunk(b"{}", more=False)]
    sent: list[Message] = []

    async def receive() -> Message:
        if messages:
            message = messages.pop(0)
            assert message is not None
            return message
        return await leave_later()

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "client": None}
    middleware = BodyTimeoutMiddleware(stream_until_the_client_leaves, timeout_s=0.2)
    asyncio.run(middleware(scope, receive, send))
    assert sent[0]["status"] == 200 and sent[1]["body"] == b"done"


def test_a_client_that_leaves_mid_body_is_one_info_line_and_no_error(caplog):
    with caplog.at_level(logging.DEBUG):
        sent = _call(_echo_body, [_chunk(b"0123456789", more=True), {"type": "http.disconnect"}])
    assert sent == []  # nobody left to answer
    ours = [r for r in caplog.records if r.name == "service.api.body_timeout"]
    assert [(r.levelno, r.exc_info) for r in ours] == [(logging.INFO, None)]
    assert "10.0.0.1:5 left during POST /studies" in ours[0].message
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_other_errors_of_the_app_still_reach_the_server():
    async def broken(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        _call(broken, [_chunk(b"{}", more=False)])


# ----------------------------------------------------------------------------- a real uvicorn server

BODY_TIMEOUT_S = 2.0
MARGIN_S = 4.0  # a busy 2-core machine: the event loop's turn, the close, the client's read
STALLED = 60  # connections that declare 200 bytes and send 10

# The API under uvicorn as `normlab serve` configures it (service.api.server), on SQLite, no cluster.
_SERVER = """
import logging
import uvicorn
from service.api.server import api_config
from service.api.app import create_app
from service.settings import Settings

logging.basicConfig(level="INFO", format="%(levelname)s %(name)s: %(message)s")
settings = Settings()
uvicorn.Server(api_config(create_app(settings), settings, grace_s=1, access_log=False)).run()
"""


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def open_files(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))


@pytest.fixture
def server(tmp_path) -> Iterator[Server]:
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("counts the server's open files in /proc")
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "NORMLAB_DATA_DIR": str(tmp_path / "data"),
        "NORMLAB_API_PORT": str(port),
        "NORMLAB_API_TOKEN": TOKEN,
        "NORMLAB_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S),
    }
    for name in ("DATABASE_URL", "MLFLOW_TRACKING_URI", "RAY_ADDRESS"):
        env.pop(name, None)
    log_path = tmp_path / "server.log"
    with open(log_path, "wb") as log:
        # cwd: no .env of the working tree
        process = subprocess.Popen(
            [sys.executable, "-c", _SERVER], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    running = Server(process, port, log_path)
    try:
        up = wait_until(lambda: process.poll() is not None or http_ok(_url(running, "/healthz")), timeout=60)
        assert up and process.poll() is None, running.log()
        yield running
    finally:
        process.kill()
        process.wait()


def _url(server: Server, path: str) -> str:
    return f"http://127.0.0.1:{server.port}{path}"


def _head(server: Server, length: int) -> bytes:
    return (
        f"POST /studies HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def _submit(server: Server) -> int:
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    return httpx.post(_url(server, "/studies"), content=SPEC, headers=headers, timeout=30).status_code


def _stalled_connections(server: Server, count: int) -> list[socket.socket]:
    """Connections that declare a 200-byte body and send 10 bytes of it."""
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(_head(server, 200) + b'{"name": "')
        sock.setblocking(False)
        sockets.append(sock)
    return sockets


def _answers_until_closed(sockets: list[socket.socket], *, within_s: float) -> dict[socket.socket, bytes]:
    """What the server sends on each connection until it closes it, for at most `within_s` seconds;
    connections still open then are missing from the result."""
    answers = {sock: b"" for sock in sockets}
    closed: dict[socket.socket, bytes] = {}
    selector = selectors.DefaultSelector()
    for sock in sockets:
        selector.register(sock, selectors.EVENT_READ)
    deadline = time.monotonic() + within_s
    while answers and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.2):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                data = b""
            if data:
                answers[sock] += data
                continue
            selector.unregister(sock)
            closed[sock] = answers.pop(sock)
    selector.close()
    return closed


@pytest.mark.slow
def test_stalled_bodies_are_answered_408_and_closed_and_the_servers_files_come_back(server):
    assert _submit(server) == 201  # warm: the database's connections are open before the count
    baseline = server.open_files()

    sockets = _stalled_connections(server, STALLED)
    started = time.monotonic()
    try:
        held = wait_until(
            lambda: server.open_files() >= baseline + STALLED - 5, timeout=BODY_TIMEOUT_S / 2, interval=0.1
        )
        assert held, f"{server.open_files()} open files, {baseline} before"  # each stalled one holds one
        closed = _answers_until_closed(sockets, within_s=BODY_TIMEOUT_S + MARGIN_S)
        took = time.monotonic() - started
    finally:
        for sock in sockets:
            sock.close()

    assert len(closed) == STALLED, f"{STALLED - len(closed)} still open after {took:.1f} s"
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in closed.values()), set(closed.values())
    assert took >= BODY_TIMEOUT_S * 0.9, "answered before the timeout"
    assert wait_until(lambda: server.open_files() <= baseline + 2, timeout=5, interval=0.2), (
        f"{server.open_files()} open files, {baseline} before"
    )
    assert _submit(server) == 201  # and the API serves on
    log = server.log()
    assert "ERROR" not in log and "Traceback" not in log, log[-3000:]


@pytest.mark.slow
def test_a_body_sent_slowly_but_in_time_is_accepted(server):
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    with sock:
        sock.sendall(_head(server, len(SPEC)) + SPEC[:20])
        time.sleep(BODY_TIMEOUT_S / 2)
        sock.sendall(SPEC[20:])
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 201 "), answer[:200]


@pytest.mark.slow
def test_clients_that_leave_mid_body_are_one_info_line_each_and_no_error(server):
    baseline = server.open_files()
    sockets = _stalled_connections(server, 10)
    time.sleep(0.5)  # the server reads their bodies now
    for sock in sockets:
        sock.close()

    def logged() -> list[str]:
        return [line for line in server.log().splitlines() if "left during POST /studies" in line]

    assert wait_until(lambda: len(logged()) == 10, timeout=BODY_TIMEOUT_S + MARGIN_S, interval=0.2), logged()
    assert all(line.startswith("INFO service.api.body_timeout: ") for line in logged())
    log = server.log()
    assert "ERROR" not in log and "Traceback" not in log and "ClientDisconnect" not in log, log[-3000:]
    assert wait_until(lambda: server.open_files() <= baseline + 2, timeout=5, interval=0.2)
