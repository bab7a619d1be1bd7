"""The job side of workers.driver.warm_server: hand this process's study to the warm server and stand in for
the driver it forks (signals in, exit status out). Imports nothing heavy, so that it costs a job process
only the interpreter's start."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

__all__ = ["FORWARDED_SIGNALS", "PRODUCT_PACKAGES", "code_fingerprint", "run_on_warm_server"]

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# The code a driver runs: the server refuses a job whose copy of it changed since the server imported it.
PRODUCT_PACKAGES = ("models", "studies", "workers", "service")
_POLL_S = 0.5


def code_fingerprint(packages: tuple[str, ...] = PRODUCT_PACKAGES) -> str:
    """A digest of the packages' Python files as they are on disk (path, size, modification time): it
    changes with any edit, pull or reinstall. About 400 stat calls, a few milliseconds; imports nothing."""
    digest = hashlib.sha256()
    for package in packages:
        spec = importlib.util.find_spec(package)
        for location in sorted(spec.submodule_search_locations or []) if spec else []:
            for directory, subdirectories, files in os.walk(location):
                subdirectories.sort()
                for name in sorted(files):
                    if name.endswith(".py"):
                        stat = os.stat(os.path.join(directory, name))
                        digest.update(f"{directory}/{name}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def run_on_warm_server(socket_path: Path, argv: list[str], *, fingerprint: str | None = None) -> int | None:
    """Run the driver for `argv` on the warm server at `socket_path` and return its exit status; None when
    no driver was started there (no server, it refused, or this code changed since it started), so that the
    caller runs the driver itself. A stopping signal that comes before the driver does is passed on to it
    once it runs, or, when none runs, acted on as if it had just come."""
    with _ForwardedSignals() as signals:
        try:
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            connection.connect(str(socket_path))
            request = {
                "argv": argv,
                "env": dict(os.environ),
                "cwd": os.getcwd(),
                "code": fingerprint or code_fingerprint(),
            }
            socket.send_fds(connection, [json.dumps(request).encode()], [0, 1, 2])
            answer = _message(connection)
        except OSError as exc:
            _say(
                f"could not hand the study to a warm driver server at {socket_path} ({exc}): the driver starts in this process"
            )
            return None
        if answer is None or "pid" not in answer:
            why = "it closed the connection" if answer is None else answer.get("error", answer)
            _say(f"the warm driver server started no driver ({why}): the driver starts in this process")
            return None
        pid = int(answer["pid"])
        _say(f"the driver runs in process {pid}, forked by the warm driver server")
        signals.forward_to(pid)
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


class _ForwardedSignals:
    """Pass the signals that stop a job (Ray's cancel sends SIGTERM) on to the driver process. Those that
    come before its pid is known wait for it; should no driver start, they are raised again on leaving,
    with this process's previous handlers back, so that the job stops as it would have."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.pending: list[int] = []
        self.previous: dict[int, object] = {}

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.pid is None:
            self.pending.append(signum)
        else:
            self._send(signum)

    def _send(self, signum: int) -> None:
        assert self.pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def forward_to(self, pid: int) -> None:
        self.pid = pid
        while self.pending:
            self._send(self.pending.pop(0))

    def __enter__(self) -> _ForwardedSignals:
        self.previous = {signum: signal.signal(signum, self._on_signal) for signum in FORWARDED_SIGNALS}
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        if self.pid is None:
            for signum in self.pending:
                signal.raise_signal(signum)


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
