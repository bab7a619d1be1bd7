"""Child processes the launcher supervises (MLflow server, Ray head): start, wait healthy, stop.

Kept free of FastAPI so the end-to-end tests start exactly the processes `make run` starts.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

__all__ = [
    "ManagedProcess",
    "ProcessStartError",
    "free_port",
    "http_ok",
    "http_status",
    "private_serve_environment",
    "venv_executable",
    "wait_until",
]


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


def private_serve_environment(
    data_dir: Path, ray_temp: Path, *, api_token: str, ray_cpus: int = 2
) -> dict[str, str]:
    """The environment for a `normlab serve` that shares nothing with another one on this machine: its own
    data dir and Ray temp dir, every port free on loopback, the cluster addresses unset so it starts its own
    (end-to-end tests and the orchestration benchmark run beside a user's stack)."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MLFLOW_TRACKING_URI", "RAY_ADDRESS")
    }
    # Below Linux's ephemeral range (32768+), where free_port() picks the other ports.
    worker_base = random.randint(20000, 32000)
    env.update(
        {
            "NORMLAB_DATA_DIR": str(data_dir),
            "NORMLAB_API_PORT": str(free_port()),
            "NORMLAB_MLFLOW_PORT": str(free_port()),
            "NORMLAB_RAY_GCS_PORT": str(free_port()),
            "NORMLAB_RAY_DASHBOARD_PORT": str(free_port()),
            "NORMLAB_RAY_DASHBOARD_AGENT_LISTEN_PORT": str(free_port()),
            "NORMLAB_RAY_CLIENT_SERVER_PORT": str(free_port()),
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


@dataclass
class ManagedProcess:
    """One long-running child with its own log file and process group (so Ctrl-C reaches us, not it)."""

    name: str
    argv: Sequence[str]
    log_path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    health_url: str | None = None
    health_headers: Mapping[str, str] = field(default_factory=dict)
    stop_argv: Sequence[str] | None = None  # e.g. `ray stop` for daemons that fork away
    ready_text: str | None = None  # healthy once this line appears in the log (children with no HTTP port)
    _popen: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None

    def start(self, *, timeout: float = 120.0) -> None:
        """Start and wait until healthy; on any failure or interruption (Ctrl-C) the child is stopped."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - the child writes to it for its lifetime
        try:
            self._popen = subprocess.Popen(
                list(self.argv),
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                start_new_session=True,
            )
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

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def stop(self, *, timeout: float = 30.0) -> None:
        try:
            self._terminate(timeout)
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None

    def _terminate(self, timeout: float) -> None:
        if self.stop_argv is not None:
            subprocess.run(
                list(self.stop_argv),
                env={**os.environ, **self.env},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=timeout * 2,
                check=False,
            )
        if self._popen is None or self._popen.poll() is not None:
            return
        try:
            os.killpg(self._popen.pid, signal.SIGTERM)
            self._popen.wait(timeout=timeout)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._popen.pid, signal.SIGKILL)
            self._popen.wait(timeout=timeout)
