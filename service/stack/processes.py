"""Child processes the launcher supervises (MLflow server, Ray head): start, wait healthy, stop, with
everything they started in turn.

Stopping a child is not stopping its pid: Ray's head is a dozen processes (GCS, raylet, dashboard and its
module processes, agents, log monitor, workers, a study's driver), several in sessions of their own, and
MLflow's server runs uvicorn and job consumers beside itself. So each child is started with a mark in its
environment (NORMLAB_PROCESS_MARK), which every descendant inherits wherever it moves in the process tree,
and stopping it means: SIGTERM to the child, its descendants and every process carrying its mark, a bounded
wait, then SIGKILL to whatever still runs. Processes are named by pid *and* start time
(ProcessIdentity), so a pid the kernel has since given to another process is never signalled.
On Linux the kernel also sends the child SIGTERM when the launcher dies, even by SIGKILL
(PR_SET_PDEATHSIG); what that does not reach (grandchildren) service.stack.local_stack's guard and the next
start stop. The process table is read from /proc: elsewhere a child is stopped through its process group
only, as before.

Kept free of FastAPI so the end-to-end tests start exactly the processes `make run` starts.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

__all__ = [
    "PROCESS_MARK_VARIABLE",
    "STOP_GRACE_S",
    "ManagedProcess",
    "ProcessIdentity",
    "ProcessStartError",
    "free_port",
    "free_port_range",
    "http_ok",
    "http_status",
    "marked_processes",
    "private_serve_environment",
    "process_tree",
    "stop_all",
    "terminate",
    "venv_executable",
    "wait_until",
]

PROCESS_MARK_VARIABLE = "NORMLAB_PROCESS_MARK"
# SIGTERM, then this long for everything to end, then SIGKILL: a plain Ctrl-C stays well under 10 s.
STOP_GRACE_S = 5.0
_KILL_WAIT_S = 3.0  # after SIGKILL only a process stuck in the kernel (D state) takes longer
_POLL_S = 0.1


class ProcessStartError(RuntimeError):
    """A supervised process died or never became healthy; the message carries its log tail."""


def venv_executable(name: str) -> str:
    """The console script next to the running interpreter, so `make run` never picks a foreign install."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise ProcessStartError(f"`{name}` is not installed in this environment: run `make install`.")
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_port_range(count: int, *, low: int = 20000, high: int = 32000, tries: int = 50) -> int:
    """The first port of `count` consecutive ports that are all free on loopback now, drawn at random between
    `low` and `high` (below Linux's ephemeral range, where the kernel's own picks come from): a range with
    one port taken (a RabbitMQ node holds 25672) would fail the stack's port check."""
    for _ in range(tries):
        first = random.randint(low, high - count)
        if all(_bindable(port) for port in range(first, first + count)):
            return first
    raise RuntimeError(f"no {count} consecutive free ports between {low} and {high} after {tries} tries")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def private_serve_environment(
    data_dir: Path, ray_temp: Path, *, api_token: str, ray_cpus: int = 2
) -> dict[str, str]:
    """The environment for a `normlab serve` that shares nothing with another one on this machine: its own
    data dir and Ray temp dir, every port free on loopback, the cluster addresses unset so it starts its own
    (end-to-end tests and the orchestration benchmark run beside a user's stack)."""
    # Ray's client server stays off (its port unset), as by default.
    unset = (
        "DATABASE_URL",
        "MLFLOW_TRACKING_URI",
        "RAY_ADDRESS",
        "NORMLAB_RAY_CLIENT_SERVER_PORT",
        "NORMLAB_RAY_PORT_BASE",
    )
    env = {k: v for k, v in os.environ.items() if k not in unset}
    # Below Linux's ephemeral range (32768+), where free_port() picks the other ports.
    worker_base = free_port_range(301)
    env.update(
        {
            "NORMLAB_DATA_DIR": str(data_dir),
            "NORMLAB_API_PORT": str(free_port()),
            "NORMLAB_MLFLOW_PORT": str(free_port()),
            "NORMLAB_RAY_GCS_PORT": str(free_port()),
            "NORMLAB_RAY_DASHBOARD_PORT": str(free_port()),
            "NORMLAB_RAY_DASHBOARD_AGENT_LISTEN_PORT": str(free_port()),
            "NORMLAB_RAY_DASHBOARD_AGENT_GRPC_PORT": str(free_port()),
            "NORMLAB_RAY_NODE_MANAGER_PORT": str(free_port()),
            "NORMLAB_RAY_OBJECT_MANAGER_PORT": str(free_port()),
            "NORMLAB_RAY_METRICS_EXPORT_PORT": str(free_port()),
            "NORMLAB_RAY_RUNTIME_ENV_AGENT_PORT": str(free_port()),
            "NORMLAB_RAY_DASHBOARD_METRICS_PORT": str(free_port()),
            "NORMLAB_RAY_MIN_WORKER_PORT": str(worker_base),
            "NORMLAB_RAY_MAX_WORKER_PORT": str(worker_base + 300),
            "NORMLAB_RAY_NUM_CPUS": str(ray_cpus),
            "NORMLAB_RAY_TEMP_DIR": str(ray_temp),
            "NORMLAB_API_TOKEN": api_token,
            "NORMLAB_POLL_INTERVAL_S": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def http_status(url: str, timeout: float = 2.0, headers: Mapping[str, str] | None = None) -> int | None:
    """The HTTP status a GET of `url` answers (errors included), or None when nothing answers."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        error.close()
        return int(error.code)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def http_ok(url: str, timeout: float = 2.0, headers: Mapping[str, str] | None = None) -> bool:
    status = http_status(url, timeout=timeout, headers=headers)
    return status is not None and 200 <= status < 300


def wait_until(predicate: Callable[[], bool], *, timeout: float, interval: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


# --- The process table (Linux /proc; empty elsewhere) ---

_PROC = Path("/proc")
_ENDED_STATES = frozenset("ZXx")  # a zombie has exited and only waits to be reaped


@dataclass(frozen=True)
class _Stat:
    parent: int
    started: int  # clock ticks after boot
    state: str


def _stat(pid: int) -> _Stat | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except (OSError, ValueError):  # gone, or no /proc here
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
    fields = text[text.rindex(")") + 2 :].split()
    return _Stat(parent=int(fields[1]), started=int(fields[19]), state=fields[0])


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir(_PROC) if name.isdigit()]
    except OSError:
        return []


@dataclass(frozen=True)
class ProcessIdentity:
    """One process: its pid and when it started, so a pid the kernel has reused never matches."""

    pid: int
    started: int  # clock ticks after boot (/proc/<pid>/stat, field 22)

    @classmethod
    def of(cls, pid: int) -> ProcessIdentity | None:
        """The process holding `pid` now; None when none does, or there is no /proc to ask."""
        stat = _stat(pid)
        return None if stat is None else cls(pid, stat.started)

    def is_running(self) -> bool:
        stat = _stat(self.pid)
        return stat is not None and stat.started == self.started and stat.state not in _ENDED_STATES

    def send(self, signum: int) -> None:
        if self.is_running():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signum)


def process_tree(root: ProcessIdentity) -> set[ProcessIdentity]:
    """`root` and its descendants still attached below it (an orphan is reparented away: find it by mark)."""
    if not root.is_running():
        return set()
    children: dict[int, list[ProcessIdentity]] = {}
    for pid in _pids():
        stat = _stat(pid)
        if stat is not None and stat.state not in _ENDED_STATES:
            children.setdefault(stat.parent, []).append(ProcessIdentity(pid, stat.started))
    tree, frontier = {root}, [root.pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in tree:
                tree.add(child)
                frontier.append(child.pid)
    return tree


def marked_processes(marks: Collection[str]) -> set[ProcessIdentity]:
    """Running processes whose environment carries one of `marks` (set by ManagedProcess.start)."""
    wanted = {f"{PROCESS_MARK_VARIABLE}={mark}".encode() for mark in marks}
    found: set[ProcessIdentity] = set()
    if not wanted:
        return found
    for pid in _pids():
        if pid == os.getpid():
            continue
        try:
            environ = (_PROC / str(pid) / "environ").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if wanted.isdisjoint(environ.split(b"\0")):
            continue
        identity = ProcessIdentity.of(pid)
        if identity is not None and identity.is_running():
            found.add(identity)
    return found


def terminate(
    find: Callable[[], Iterable[ProcessIdentity]],
    *,
    first: Iterable[ProcessIdentity] = (),
    grace_s: float = STOP_GRACE_S,
    hurry: threading.Event | None = None,
    reap: Callable[[], None] = lambda: None,
) -> set[ProcessIdentity]:
    """Stop `first` and everything `find` names; returns what still runs after the SIGKILL (normally
    nothing).

    SIGTERM goes to `first` (the children we started) alone for up to half of `grace_s`: each stops what
    it started in its own order (Ray's head takes its raylet down before the GCS the raylet needs to
    leave cleanly; signalled at once, the raylet hangs until killed). Then SIGTERM to all that `find`
    names (asked again while waiting, so what dying processes start is stopped too) until `grace_s` is
    over, then SIGKILL. Once `hurry` is set the waiting stops. `reap` collects our own exited children;
    a zombie counts as ended already.
    """
    started = time.monotonic()
    seen = {process for process in first if process.is_running()}
    for process in seen:
        process.send(signal.SIGTERM)

    def signal_new(signum: int) -> None:
        new = set(find()) - seen
        seen.update(new)
        for process in new:
            process.send(signum)

    def all_ended() -> bool:
        reap()
        return not any(process.is_running() for process in seen)

    def wait(until: float, then: Callable[[], None] = lambda: None, *, hurried: bool = True) -> bool:
        while time.monotonic() < until and not (hurried and hurry is not None and hurry.is_set()):
            if all_ended():
                return True
            time.sleep(_POLL_S)
            then()
        return all_ended()

    wait(started + grace_s / 2)
    signal_new(signal.SIGTERM)
    if wait(started + grace_s, then=lambda: signal_new(signal.SIGTERM)):
        return set()
    signal_new(signal.SIGKILL)
    for process in seen:
        process.send(signal.SIGKILL)
    wait(time.monotonic() + _KILL_WAIT_S, hurried=False)
    return {process for process in seen if process.is_running()}


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return prctl


_LINUX_PRCTL = _prctl()


def _terminated_with_parent() -> Callable[[], None] | None:
    """A preexec_fn after which the kernel sends the child SIGTERM when this process dies, SIGKILL
    included (Linux). The kernel ties it to the *thread* that forked the child, so only a child of the
    main thread (whose end is the process's end) gets it; elsewhere, None."""
    if _LINUX_PRCTL is None or threading.current_thread() is not threading.main_thread():
        return None
    prctl, parent = _LINUX_PRCTL, os.getpid()

    def arm() -> None:  # runs in the child between fork and exec: no allocation-heavy Python here
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the line above took effect
            os._exit(1)

    return arm


@dataclass
class ManagedProcess:
    """One long-running child with its own log file and session (so Ctrl-C reaches us, not it), stopped
    with everything it started (see the module docstring)."""

    name: str
    argv: Sequence[str]
    log_path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    health_url: str | None = None
    health_headers: Mapping[str, str] = field(default_factory=dict)
    ready_text: str | None = None  # healthy once this line appears in the log (children with no HTTP port)
    # Inherited by every descendant (NORMLAB_PROCESS_MARK): how they are found once they left the tree.
    mark: str = field(default_factory=lambda: uuid.uuid4().hex)
    _popen: subprocess.Popen[bytes] | None = None
    _identity: ProcessIdentity | None = None
    _log: IO[bytes] | None = None

    def start(self, *, timeout: float = 120.0) -> None:
        """Start and wait until healthy; on any failure or interruption (Ctrl-C) the child is stopped."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - the child writes to it for its lifetime
        try:
            self._popen = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.DEVNULL,  # not the terminal: it may be closed under us
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env, PROCESS_MARK_VARIABLE: self.mark},
                start_new_session=True,
                # A preexec_fn is unsafe only where other threads hold locks it needs; this one takes none.
                preexec_fn=_terminated_with_parent(),
            )
            self._identity = ProcessIdentity.of(self._popen.pid)
            if self.health_url is None and self.ready_text is None:
                code = self._popen.wait(timeout=timeout)
                if code != 0:
                    raise ProcessStartError(f"{self.name} exited with {code}:\n{self.log_tail()}")
                return
            healthy = wait_until(self._healthy_or_dead, timeout=timeout)
            if not healthy or not self.alive:
                where = self.health_url or f"(waiting for {self.ready_text!r} in {self.log_path})"
                raise ProcessStartError(f"{self.name} did not become healthy at {where}:\n{self.log_tail()}")
        except BaseException:
            self.stop()
            raise

    def _healthy_or_dead(self) -> bool:
        if not self.alive:
            return True
        if self.health_url is not None and not http_ok(self.health_url, headers=self.health_headers):
            return False
        return self.ready_text is None or self.ready_text in self.log_tail(lines=200)

    @property
    def alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    @property
    def identity(self) -> ProcessIdentity | None:
        """The child as started (None before start, or without /proc)."""
        return self._identity

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def stop(self, *, timeout: float = STOP_GRACE_S, hurry: threading.Event | None = None) -> None:
        """Stop the child and everything it started: SIGTERM, up to `timeout` s, SIGKILL."""
        stop_all([self], grace_s=timeout, hurry=hurry)

    def _reap(self) -> None:
        if self._popen is not None:
            self._popen.poll()

    def _finish(self, grace_s: float) -> None:
        """Collect the child's exit status and close its log. Without /proc (so nothing was found to
        signal) its process group is all there is to stop."""
        try:
            if self._popen is None or self._popen.poll() is not None:
                return
            for signum in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._popen.pid, signum)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._popen.wait(timeout=grace_s if signum == signal.SIGTERM else _KILL_WAIT_S)
                    return
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None


def stop_all(
    processes: Sequence[ManagedProcess],
    *,
    grace_s: float = STOP_GRACE_S,
    hurry: threading.Event | None = None,
) -> set[ProcessIdentity]:
    """Stop several children at once (one grace period for all, not one each). Returns what still runs."""

    started = [process for process in processes if process.identity is not None]
    roots = [process.identity for process in started if process.identity is not None]

    def find() -> set[ProcessIdentity]:
        """The children, their descendants and every process carrying one of their marks, running now."""
        marked = marked_processes([process.mark for process in started])
        return marked.union(*(process_tree(root) for root in roots))

    def reap() -> None:
        for process in processes:
            process._reap()

    try:
        return terminate(find, first=roots, grace_s=grace_s, hurry=hurry, reap=reap)
    finally:
        hurried = hurry is not None and hurry.is_set()
        for process in processes:
            # A child terminate() could see has had its grace period (and a SIGKILL): one still running
            # now is stuck in the kernel, and another grace period each would only delay the stop.
            process._finish(0.0 if hurried or process.identity is not None else grace_s)
