"""The job side of workers.driver.warm_server: hand this process's study to the warm server and stand in for
the driver it forks (signals in, exit status out). Imports nothing heavy, so that it costs a job process
only the interpreter's start."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

__all__ = ["FORWARDED_SIGNALS", "run_on_warm_server"]

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_POLL_S = 0.5


def run_on_warm_server(socket_path: Path, argv: list[str]) -> int | None:
    """Run the driver for `argv` on the warm server at `socket_path` and return its exit status; None when
    no driver was started there (no server, or it refused), so that the caller runs the driver itself."""
    try:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        connection.connect(str(socket_path))
        request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
        socket.send_fds(connection, [json.dumps(request).encode()], [0, 1, 2])
        answer = _message(connection)
    except OSError as exc:
        _say(f"no warm driver server at {socket_path} ({exc}): the driver starts in this process")
        return None
    if answer is None or "pid" not in answer:
        why = "it closed the connection" if answer is None else answer.get("error", answer)
        _say(f"the warm driver server started no driver ({why}): the driver starts in this process")
        return None
    pid = int(answer["pid"])
    _say(f"the driver runs in process {pid}, forked by the warm driver server")
    with _forwarding_signals_to(pid):
        return _wait_for_exit(connection, pid)


def _wait_for_exit(connection: socket.socket, pid: int) -> int:
    started = _start_time(pid)
    try:
        answer = _message(connection)
    except OSError:
        answer = None
    if answer is not None and "exit" in answer:
        code = int(answer["exit"])
        return 128 - code if code < 0 else code  # a child ended by signal N: the shell's 128 + N
    # The server went away first: the driver (its child) runs on; wait for it, without its exit status.
    while started is not None and _start_time(pid) == started:
        time.sleep(_POLL_S)
    _say(f"the warm driver server ended before driver {pid}: that driver's exit status is unknown")
    return 1


class _forwarding_signals_to:
    """Pass the signals that stop a job (Ray's cancel sends SIGTERM) on to the driver process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.previous: dict[int, object] = {}

    def _forward(self, signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def __enter__(self) -> _forwarding_signals_to:
        self.previous = {signum: signal.signal(signum, self._forward) for signum in FORWARDED_SIGNALS}
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]


def _message(connection: socket.socket) -> dict | None:
    data = connection.recv(1 << 16)
    return json.loads(data) if data else None


def _start_time(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat; a pid alone may be reused), None when it has
    ended (gone, or a zombie its new parent has not reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
