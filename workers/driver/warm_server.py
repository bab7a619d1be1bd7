"""`python -m workers.driver.warm_server --socket PATH`: a process that has imported the study driver and forks
one driver per study, so that a study starts without paying the driver's imports (ray, Tune, MLflow,
Optuna, SQLAlchemy: 2.5 to 4 s on a laptop core) every time.

`normlab serve` runs one beside the Ray head it starts, and hands its socket to drivers in
NORMLAB_WARM_DRIVER_SOCKET. A study's Ray job still runs `python -m workers.driver --study-id ID`; that
process (workers.driver.warm_client) sends this server its arguments, environment, working directory and
stdin/stdout/stderr, and the server forks a child that becomes the driver with exactly those. The child is
the one that calls `ray.init()`, so nothing of Ray's runtime (its threads, its connections) is ever forked;
the server itself only imports.

The job's process stays the driver as far as anyone outside can tell:
- it forwards SIGTERM, SIGINT and SIGHUP to the child (Ray cancels a job with SIGTERM);
- it exits with the child's exit status (128 + N for a child ended by signal N);
- should it die without passing a signal on (SIGKILL), the server SIGKILLs the child at once, as the
  kernel would have ended a driver running in that process: Ray then resubmits the study as it does for a
  killed driver, and never finds an older driver still at work.
Without a server (none configured, none answering, or one that fails before a child is forked) the job
process runs the driver itself, as before.

One thread only: the main loop accepts, forks and reaps, woken by SIGCHLD through a self-pipe; a fork from a
process with other Python threads could copy a lock one of them held.

Lean while idle (`--lazy`, `--release-after S`, as `normlab serve` starts it): the preloaded modules hold
~0.2 GB, so the server starts with only its socket and imports them when the first study's job connects
(that study pays the imports, as a job without a server would; the next ones find them loaded), and after S
seconds without a driver it re-executes itself on the same listening socket, lean again: a job connecting
meanwhile waits in the socket's backlog, and the code is imported afresh (edits included) by the next study.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workers.driver.warm_client import FORWARDED_SIGNALS, code_fingerprint

__all__ = ["DRIVER_ENTRY", "PRELOADED_MODULES", "READY_LINE", "WarmDriverServer", "main", "run_driver"]

READY_LINE = "warm driver server listening"
DRIVER_ENTRY = "workers.driver.__main__:run_in_process"  # what a forked child runs, given the job's argv

# What a driver imports by the time its first trial starts and at its end, beyond its own modules' top-level
# imports (each lazily imported inside ray.tune, mlflow or the driver). A module missing here only costs a
# driver its import time; one that fails to import is skipped.
PRELOADED_MODULES = (
    "workers.driver.__main__",
    "workers.driver.study",
    "ray.tune.execution.tune_controller",
    "ray.tune.search.optuna",
    "ray.tune.search.concurrency_limiter",
    "ray.tune.logger",
    "ray.train._internal.storage",
    "ray.util.state",
    "optuna",
    "optuna.samplers",
    "pyarrow.fs",
    "mlflow.store.tracking.rest_store",
    "mlflow.tracking._tracking_service.utils",
    "mlflow.utils.rest_utils",
    "sqlalchemy.dialects.sqlite",
    "studies.store.results",
    "studies.report",
    "studies.stats",
    "scipy.stats",
)

_FORWARDED_FDS = (0, 1, 2)
_SERVER_SIGNALS = {signal.SIGCHLD, *FORWARDED_SIGNALS}
_KILL_AFTER_CLIENT_LOSS = signal.SIGKILL


@dataclass
class _Driver:
    pid: int
    client: socket.socket
    client_gone: bool = False


@dataclass
class WarmDriverServer:
    socket_path: Path
    entry: str = DRIVER_ENTRY
    code: str = ""  # code_fingerprint() of what was imported: a job whose code differs runs its own driver
    preloaded: bool = False  # the driver's modules are imported (warm_up)
    release_after_s: float = 0.0  # back to lean after this long without a driver (0: never)
    _idle_since: float = field(default_factory=time.monotonic)
    drivers: dict[int, _Driver] = field(default_factory=dict)  # pid -> its driver
    _listener: socket.socket | None = None
    _wakeup_read: int = -1
    _wakeup_write: int = -1
    _stopping: bool = False

    def listen(self) -> None:
        """Bind the socket, readable and writable by this user only (a client chooses a driver's environment)."""
        self.socket_path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        previous = os.umask(0o177)
        try:
            listener.bind(str(self.socket_path))
        finally:
            os.umask(previous)
        listener.listen(64)
        self._listener = listener

    def adopt(self, fd: int) -> None:
        """Serve on a listening socket this process inherited (from the server it was before `_release`)."""
        self._listener = socket.socket(fileno=fd)
        self._listener.set_inheritable(False)

    def warm_up(self) -> None:
        """Import what a driver imports. The code's fingerprint is taken first: what is imported is at least
        as new as it."""
        self.code = code_fingerprint()
        _say(f"preloaded the driver's modules in {preload():.1f} s")
        if threading.active_count() > 1:
            raise SystemExit("a preloaded module started a Python thread: forking drivers would be unsafe")
        self.preloaded = True

    def serve_forever(self) -> None:
        """Accept, fork and reap until SIGTERM or SIGINT; then close the socket. Running drivers are left
        to their clients (and the stack's stop, which ends this server's descendants with it)."""
        assert self._listener is not None, "listen() first"
        self._wakeup_read, self._wakeup_write = os.pipe()
        os.set_blocking(self._wakeup_write, False)
        signal.set_wakeup_fd(self._wakeup_write)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # wakes select through the pipe
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        try:
            while not self._stopping:
                self._serve_once()
        finally:
            signal.set_wakeup_fd(-1)
            self._listener.close()
            self.socket_path.unlink(missing_ok=True)
            os.close(self._wakeup_read)
            os.close(self._wakeup_write)

    def _stop(self, signum: int, frame: object) -> None:
        self._stopping = True

    def _serve_once(self) -> None:
        assert self._listener is not None
        clients = {d.client.fileno(): d for d in self.drivers.values() if not d.client_gone}
        listening = self._listener.fileno()
        readable, _, _ = select.select([listening, self._wakeup_read, *clients], [], [], 5.0)
        for ready in readable:
            try:
                if ready == listening:
                    self._accept()
                elif ready == self._wakeup_read:
                    os.read(self._wakeup_read, 512)
                else:
                    self._client_spoke(clients[ready])
            except Exception:  # one bad connection must not end the server (and its drivers' guard)
                _say(f"error serving a connection:\n{traceback.format_exc()}")
        self._reap()
        if self.drivers or not self.preloaded:
            self._idle_since = time.monotonic()
        elif self.release_after_s > 0 and time.monotonic() - self._idle_since >= self.release_after_s:
            self._release()

    def _release(self) -> None:
        """Give the preloaded modules' memory back: re-execute this server, lean, on the same listening socket
        (the same process, so whoever started it still knows it). Only with no driver running: the new
        program would not know them."""
        assert self._listener is not None and not self.drivers
        _say(f"no driver for {self.release_after_s:g} s: releasing the preloaded modules")
        fd = self._listener.fileno()
        os.set_inheritable(fd, True)
        signal.set_wakeup_fd(-1)
        sys.stdout.flush()
        sys.stderr.flush()
        argv = ["-m", "workers.driver.warm_server", "--socket", str(self.socket_path), "--entry", self.entry]
        argv += ["--lazy", "--release-after", f"{self.release_after_s:g}", "--listen-fd", str(fd)]
        os.execv(sys.executable, [sys.executable, *argv])

    def _accept(self) -> None:
        assert self._listener is not None
        client, _ = self._listener.accept()
        fds: list[int] = []
        try:
            message, fds, _, _ = socket.recv_fds(client, 1 << 20, len(_FORWARDED_FDS))
            request = json.loads(message)
            argv = [str(arg) for arg in request["argv"]]
            env = {str(name): str(value) for name, value in dict(request["env"]).items()}
            cwd = str(request["cwd"])
            if len(fds) != len(_FORWARDED_FDS):
                raise ValueError(f"expected stdin, stdout and stderr, got {len(fds)} descriptors")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self._refuse(client, fds, f"bad request: {exc}")
            return
        if not self.preloaded:
            self.warm_up()  # the first study since start or release: it waits for the imports
        if self.code and request.get("code") != self.code:
            self._refuse(
                client, fds, "the code changed since this server imported it (restart `normlab serve`)"
            )
            return
        sys.stdout.flush()
        sys.stderr.flush()
        # Blocked across the fork: a signal meant for the child before it resets its handlers would run
        # the server's (and be lost); the child unblocks them once its own are in place.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _SERVER_SIGNALS)
        try:
            pid = os.fork()
        except OSError as exc:  # out of memory or processes: the client runs the driver itself
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            self._refuse(client, fds, f"cannot fork a driver: {exc}")
            return
        if pid == 0:  # the child never returns from here
            self._become_driver(client, fds, argv=argv, env=env, cwd=cwd, mask=blocked)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        for fd in fds:
            os.close(fd)
        self.drivers[pid] = _Driver(pid=pid, client=client)
        changed = sorted(k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k))
        _say(f"driver {pid} started: {' '.join(argv)} (environment differs in {', '.join(changed)})")

    def _refuse(self, client: socket.socket, fds: list[int], why: str) -> None:
        _say(f"no driver started: {why}")
        _send(client, {"error": why})
        client.close()
        for fd in fds:
            os.close(fd)

    def _become_driver(
        self,
        client: socket.socket,
        fds: list[int],
        *,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        mask: set[int | signal.Signals],
    ) -> None:
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for signum in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            assert self._listener is not None
            self._listener.close()
            os.close(self._wakeup_read)
            os.close(self._wakeup_write)
            for other in self.drivers.values():
                other.client.close()
            for target, fd in zip(_FORWARDED_FDS, fds, strict=True):
                os.dup2(fd, target)
                os.close(fd)
            os.environ.clear()
            os.environ.update(env)
            # As the interpreter would have set up stdout for this environment (Ray runs jobs unbuffered).
            if env.get("PYTHONUNBUFFERED"):  # each line reaches the job's log as it is printed
                sys.stdout.reconfigure(line_buffering=True, write_through=True)  # type: ignore[union-attr]
            os.chdir(cwd)
            sys.argv = ["workers.driver", *argv]
            # Said by the child, not the server: a client that hears it knows a driver runs, one that does not
            # knows none does and may run the driver itself.
            _send(client, {"pid": os.getpid()})
            client.close()
            code = run_driver(argv, self.entry)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code & 0xFF)  # as the interpreter truncates an exit status; os._exit must not raise

    def _client_spoke(self, driver: _Driver) -> None:
        try:
            data = driver.client.recv(4096)
        except OSError:
            data = b""
        if data:
            return  # a client says nothing after its request: ignore
        # The job's process is gone without passing a signal on (it forwards those): end the driver as the
        # kernel would have ended a driver running in that process.
        driver.client_gone = True
        _say(f"the job process of driver {driver.pid} is gone: killing the driver")
        _kill(driver.pid, _KILL_AFTER_CLIENT_LOSS)

    def _reap(self) -> None:
        while self.drivers:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            driver = self.drivers.pop(pid, None)
            if driver is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            _send(driver.client, {"exit": code})
            driver.client.close()
            _say(f"driver {pid} ended ({code})")


def run_driver(argv: Sequence[str], entry: str = DRIVER_ENTRY) -> int:
    """Run `entry` (module:function, by default what `python -m workers.driver` runs) on `argv` in this
    (forked) process as the interpreter would, and return its exit status: SystemExit's code (a message is
    printed and gives 1), 1 and a traceback for an exception; then what the interpreter does at exit (join
    non-daemon threads, atexit handlers, flush)."""
    code = 0
    try:
        module, _, function = entry.partition(":")
        getattr(importlib.import_module(module), function)(list(argv))
    except SystemExit as exc:
        code = _exit_status(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 128 + signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    # What the interpreter does at exit, in its order: join non-daemon threads and stop the thread pools
    # (concurrent.futures' workers end there), then the atexit handlers.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return code


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    print(code, file=sys.stderr)
    return 1


def _send(client: socket.socket, message: dict) -> None:
    with contextlib.suppress(OSError):  # the client is gone; reaping tells the rest
        client.send(json.dumps(message).encode())


def _kill(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


def preload(modules: Sequence[str] = PRELOADED_MODULES) -> float:
    """Import what a driver will import; returns the seconds it took. A module that fails is skipped."""
    started = time.perf_counter()
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:
            _say(f"not preloaded: {name} ({type(exc).__name__}: {exc})")
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m workers.driver.warm_server", description=__doc__)
    parser.add_argument("--socket", required=True, type=Path, help="the Unix socket to listen on")
    parser.add_argument("--entry", default=DRIVER_ENTRY, help="module:function a driver runs (tests)")
    parser.add_argument(
        "--lazy", action="store_true", help="import the driver's modules at the first request"
    )
    parser.add_argument(
        "--release-after", type=float, default=0.0, help="seconds without a driver before going lean again"
    )
    parser.add_argument("--listen-fd", type=int, default=None, help=argparse.SUPPRESS)  # set by _release
    args = parser.parse_args(argv)
    server = WarmDriverServer(args.socket, entry=args.entry, release_after_s=args.release_after)
    # Listen before the imports, so that whoever started this need not wait for them: a client that
    # connects meanwhile waits in the backlog and is served once they are done.
    if args.listen_fd is None:
        server.listen()
        _say(f"{READY_LINE} on {args.socket}")
    else:
        server.adopt(args.listen_fd)
        _say(f"lean again, listening on {args.socket}")
    if not args.lazy:
        server.warm_up()
    server.serve_forever()


if __name__ == "__main__":
    main()
