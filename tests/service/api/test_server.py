"""The API's server as `normlab serve` runs it (service.api.server) and the launcher's stop signals: a stop
takes a bounded time even with a request stuck in a worker thread, and no stop signal is lost."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from service.api.server import MAX_REQUEST_HEAD_BYTES, ApiServer, api_config
from service.settings import Settings
from service.stack.processes import free_port, http_ok, wait_until
from service.stack.stop_signals import StopRequested, stopped_by_signals

GRACE_S = 1


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Lets the stuck request's worker thread end once the test is over."""
    event = threading.Event()
    yield event
    event.set()


def _app(release: threading.Event, entered: threading.Event) -> Starlette:
    def stuck(request: Request) -> PlainTextResponse:  # sync: Starlette runs it in a worker thread
        entered.set()
        release.wait(60)  # a lock that is never released, a call with no timeout
        return PlainTextResponse("late")

    def ok(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/stuck", stuck), Route("/ok", ok)])


def _settings(tmp_path, port: int) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path, api_port=port, log_level="warning")


def test_a_request_stuck_in_a_worker_thread_holds_up_neither_the_stop_nor_the_exit(tmp_path, release):
    port = free_port()
    entered = threading.Event()
    server = ApiServer(
        api_config(_app(release, entered), _settings(tmp_path, port), grace_s=GRACE_S, access_log=False)
    )
    server.start()
    assert wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/ok"), timeout=20, interval=0.1)
    client = threading.Thread(
        target=lambda: httpx.get(f"http://127.0.0.1:{port}/stuck", timeout=30), daemon=True
    )
    client.start()
    assert entered.wait(10)

    started = time.monotonic()
    assert server.stop(grace_s=GRACE_S)
    took = time.monotonic() - started
    assert took < GRACE_S + 1.5, took
    assert not http_ok(f"http://127.0.0.1:{port}/ok")
    workers = [t for t in threading.enumerate() if t.name == "AnyIO worker thread"]
    assert workers and all(t.daemon for t in workers)  # the interpreter's exit does not wait for them


def test_a_hurried_stop_does_not_wait_out_the_grace_period(tmp_path, release):
    port = free_port()
    entered = threading.Event()
    server = ApiServer(
        api_config(_app(release, entered), _settings(tmp_path, port), grace_s=30, access_log=False)
    )
    server.start()
    assert wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/ok"), timeout=20, interval=0.1)
    threading.Thread(
        target=lambda: httpx.get(f"http://127.0.0.1:{port}/stuck", timeout=60), daemon=True
    ).start()
    assert entered.wait(10)
    hurry = threading.Event()
    threading.Timer(0.5, hurry.set).start()

    started = time.monotonic()
    server.stop(grace_s=30, hurry=hurry)
    assert time.monotonic() - started < 3


# 100 kB arrives in one read, whole: h11 alone would parse it (it bounds only a head still incomplete).
@pytest.mark.parametrize("header_bytes", [100_000, 1_000_000])
def test_an_oversized_request_head_is_a_431_in_json_not_a_connection_reset(tmp_path, release, header_bytes):
    port = free_port()
    server = ApiServer(
        api_config(_app(release, threading.Event()), _settings(tmp_path, port), grace_s=1, access_log=False)
    )
    server.start()
    try:
        assert wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/ok"), timeout=20, interval=0.1)
        # Closed at once with the rest of the head unread, the socket resets and httpx raises ReadError.
        response = httpx.get(f"http://127.0.0.1:{port}/ok", headers={"X-Big": "a" * header_bytes}, timeout=10)
        assert response.status_code == 431
        assert response.headers["content-type"] == "application/json"
        assert str(MAX_REQUEST_HEAD_BYTES) in response.json()["detail"]
        # The server is fine, and a head of a size clients send still passes.
        assert (
            httpx.get(f"http://127.0.0.1:{port}/ok", headers={"X-Fine": "a" * 8000}, timeout=10).text == "ok"
        )
    finally:
        server.stop(grace_s=1)


def test_a_server_that_cannot_start_ends_with_the_error_to_raise(tmp_path, release):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = ApiServer(
            api_config(
                _app(release, threading.Event()), _settings(tmp_path, port), grace_s=1, access_log=False
            )
        )
        server.start()
        server.wait_until(threading.Event())  # returns: the server ended on its own
    assert isinstance(server.error, SystemExit)


def test_the_first_stop_signal_interrupts_the_start_and_later_ones_hurry_the_stop():
    with stopped_by_signals() as signals:
        with pytest.raises(StopRequested):
            signal.raise_signal(signal.SIGINT)
            time.sleep(1)  # the handler runs between bytecodes: this must not finish
        assert signals.requested.is_set() and not signals.hurry.is_set()
        signal.raise_signal(signal.SIGTERM)  # while the stop runs: never raised into it
        assert signals.hurry.wait(timeout=1)


def test_once_the_api_serves_a_stop_signal_is_polled_for_not_raised():
    # What SIGINT did before (a process started in the background inherits SIG_IGN, not Python's default).
    before = signal.getsignal(signal.SIGINT)
    with stopped_by_signals() as signals:
        signals.interrupting = False
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.raise_signal(signum)
        time.sleep(0.1)
        assert signals.requested.is_set() and signals.hurry.is_set()
    assert signal.getsignal(signal.SIGINT) is before  # restored
