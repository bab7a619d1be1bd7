"""`normlab serve` leaves nothing running however it is stopped: Ctrl-C with a study running (in under
10 s; idle: test_serve_lifecycle.py), Ctrl-C twice, SIGTERM with SIGKILL five seconds later (supervisors,
`docker stop`), the terminal closed, SIGKILL (its guard stops the rest) and SIGKILL of launcher and guard
together (the next start stops the rest).

What belongs to a stack is found without asking the code under test: every process whose command line
names the stack's private data dir, Ray temp dir or one of its ports, whose environment names its data dir
(everything `normlab serve` starts inherits NORMLAB_DATA_DIR from it), every descendant of the launcher,
and every pid the stack recorded.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import termios
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

from service.stack.processes import http_ok, wait_until
from tests.e2e.conftest import API_TOKEN, REPO, serve_environment, start_serve

pytestmark = pytest.mark.slow

CTRL_C_LIMIT_S = 10.0
# SIGTERM, the grace period (service.stack.processes.STOP_GRACE_S) and some slack on a busy 2-core machine.
KILLED_LIMIT_S = 15.0
_PORT_SETTINGS = (
    "NORMLAB_API_PORT",
    "NORMLAB_MLFLOW_PORT",
    "NORMLAB_RAY_GCS_PORT",
    "NORMLAB_RAY_DASHBOARD_PORT",
    "NORMLAB_RAY_DASHBOARD_AGENT_LISTEN_PORT",
)


@dataclass
class Stack:
    """One private `normlab serve` and what is known to belong to it."""

    data_dir: Path
    ray_temp: Path
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    known: dict[int, float] = field(default_factory=dict)  # pid -> create time, of all seen running

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.env['NORMLAB_API_PORT']}"

    @property
    def launcher(self) -> subprocess.Popen[bytes]:
        assert self.process is not None
        return self.process

    def wait_up(self) -> None:
        up = wait_until(
            lambda: self.launcher.poll() is not None or http_ok(f"{self.api_url}/healthz"),
            timeout=300,
            interval=1,
        )
        assert up and self.launcher.poll() is None, self.log_tail()
        self.remember()
        assert len(self.known) >= 10, f"MLflow and Ray should be running: {self.running()}"

    def _recorded_pids(self) -> set[int]:
        pids = set()
        for record in (self.data_dir / "run").glob("serve-*.json"):
            with contextlib.suppress(OSError, ValueError):
                raw = json.loads(record.read_text())
                pids.update(int(p["pid"]) for p in raw["processes"] if "pid" in p)
                pids.add(int(raw["launcher"]["pid"]))
        return pids

    def running(self) -> dict[int, str]:
        """pid -> command line of every process of this stack running now."""
        needles = [str(self.data_dir), str(self.ray_temp)]
        ports = re.compile(r"(?<!\d)(" + "|".join(self.env[name] for name in _PORT_SETTINGS) + r")(?!\d)")
        launcher_tree: set[int] = set()
        if self.process is not None:
            with contextlib.suppress(psutil.NoSuchProcess):
                root = psutil.Process(self.process.pid)
                launcher_tree = {root.pid, *(child.pid for child in root.children(recursive=True))}
        by_pid = launcher_tree | self._recorded_pids()
        found = {}
        for process in psutil.process_iter(["cmdline", "environ", "status"]):
            if process.pid == os.getpid() or process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmdline = " ".join(process.info["cmdline"] or [])
            environ = process.info["environ"] or {}
            if (
                process.pid in by_pid
                or any(needle in cmdline for needle in needles)
                or ports.search(cmdline)
                or environ.get("NORMLAB_DATA_DIR") == str(self.data_dir)
            ):
                found[process.pid] = cmdline[:160]
        return found

    def remember(self) -> dict[int, str]:
        running = self.running()
        for pid in running:
            with contextlib.suppress(psutil.NoSuchProcess):
                self.known[pid] = psutil.Process(pid).create_time()
        return running

    def survivors(self) -> dict[int, str]:
        """Every process of this stack still running: found now, or seen before and not since ended."""
        return {**self.running(), **self.known_survivors()}

    def known_survivors(self) -> dict[int, str]:
        """The processes seen running before that still run (the same pid and creation time)."""
        left = {}
        for pid, created in self.known.items():
            with contextlib.suppress(psutil.NoSuchProcess):
                process = psutil.Process(pid)
                if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                    left.setdefault(pid, " ".join(process.cmdline())[:160])
        return left

    def all_gone_within(self, seconds: float) -> bool:
        return wait_until(lambda: not self.survivors(), timeout=seconds, interval=0.2)

    def exits_within(self, seconds: float) -> float:
        """Seconds until the launcher exits; fails past `seconds`."""
        started = time.monotonic()
        try:
            self.launcher.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`normlab serve` still running {seconds} s after the signal:\n{self.log_tail()}")
        return time.monotonic() - started

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def kill_what_is_left(self) -> None:
        """After a failure: SIGKILL whatever the test could not get stopped, so no test leaks a stack."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pid in self.survivors():
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()


def _new_stack(tmp_path: Path, name: str, data_dir: Path | None = None) -> Stack:
    data_dir = data_dir or tmp_path / f"{name}-data"
    # Ray's unix sockets live under its temp dir; keep the path short (107-byte limit).
    ray_temp = Path("/tmp") / f"nl-stop-{uuid.uuid4().hex[:6]}"
    return Stack(data_dir, ray_temp, serve_environment(data_dir, ray_temp), tmp_path / f"{name}.log")


@contextlib.contextmanager
def _serving(tmp_path: Path, name: str, data_dir: Path | None = None) -> Iterator[Stack]:
    stack = _new_stack(tmp_path, name, data_dir)
    stack.process = start_serve(stack.env, stack.log_path)
    try:
        stack.wait_up()
        yield stack
    finally:
        stack.kill_what_is_left()
        shutil.rmtree(stack.ray_temp, ignore_errors=True)


def _launcher_and_guard(stack: Stack) -> tuple[int, int]:
    guard = next(
        child
        for child in psutil.Process(stack.launcher.pid).children()
        if "service.stack.local_stack" in child.cmdline()
    )
    return stack.launcher.pid, guard.pid


def test_ctrl_c_twice_stops_everything(tmp_path):
    with _serving(tmp_path, "ctrl-c-twice") as stack:
        os.killpg(stack.launcher.pid, signal.SIGINT)
        time.sleep(1)
        os.killpg(stack.launcher.pid, signal.SIGINT)
        took = stack.exits_within(60)
        assert took < CTRL_C_LIMIT_S, f"Ctrl-C twice took {took:.1f} s:\n{stack.log_tail()}"
        assert stack.all_gone_within(1), stack.survivors()


def test_sigterm_then_sigkill_five_seconds_later_leaves_nothing(tmp_path):
    """What `docker stop` and process supervisors do."""
    with _serving(tmp_path, "sigterm") as stack:
        os.kill(stack.launcher.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            stack.launcher.wait(timeout=5)
        if stack.launcher.poll() is None:
            stack.launcher.kill()
        stack.launcher.wait()
        assert stack.all_gone_within(KILLED_LIMIT_S - 5), stack.survivors()


def test_sigkill_of_the_launcher_leaves_its_guard_to_stop_everything(tmp_path):
    with _serving(tmp_path, "sigkill") as stack:
        stack.launcher.kill()
        stack.launcher.wait()
        assert stack.all_gone_within(KILLED_LIMIT_S), stack.survivors()


def test_the_next_start_stops_what_a_killed_launcher_and_guard_left_and_ctrl_c_stops_a_study_in_10_s(
    tmp_path,
):
    data_dir = tmp_path / "shared-data"
    with _serving(tmp_path, "killed", data_dir) as killed:
        for pid in _launcher_and_guard(killed):
            os.kill(pid, signal.SIGKILL)
        killed.launcher.wait()
        time.sleep(2)
        left = killed.remember()
        # The kernel stopped the direct children (PR_SET_PDEATHSIG). Since the lean stack nothing else is
        # usually left either (`ray start --block` takes its daemons with it, MLflow's worker follows its
        # server, no trial host or driver runs at rest); whatever is, the next start must stop. That path,
        # with a process that does outlive its launcher and guard: tests/service/stack/test_launcher.py.
        # Frozen, so that none ends on its own before the next start looks (MLflow's workers do once they
        # see their server gone, seconds later on a busy machine): the next start must stop them all.
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

        with _serving(tmp_path, "next", data_dir) as following:
            # The same data dir: what is running now under it is the new stack's; the old one's are known.
            assert killed.known_survivors() == {}, killed.known_survivors()
            if left:
                assert re.search(r"stopped \d+ process\(es\) of mlflow, ray-head", following.log_tail(200))
            _run_a_study(following)
            os.killpg(following.launcher.pid, signal.SIGINT)  # what Ctrl-C in the terminal sends
            took = following.exits_within(60)
            assert following.launcher.returncode == 0, following.log_tail()
            assert took < CTRL_C_LIMIT_S, f"Ctrl-C with a study running took {took:.1f} s"
            assert following.all_gone_within(1), following.survivors()
            assert list((data_dir / "run").glob("serve-*.json")) == []  # a clean stop leaves no record


def _run_a_study(stack: Stack) -> None:
    """Submit the quick example and wait until its driver and trials run (processes of this stack)."""
    spec = (REPO / "studies" / "examples" / "quick.yaml").read_text()
    response = httpx.post(
        f"{stack.api_url}/studies",
        content=spec,
        headers={"Authorization": f"Bearer {API_TOKEN}", "Content-Type": "application/yaml"},
        timeout=30,
    )
    assert response.status_code in (200, 201, 202), response.text

    def trials_running() -> bool:
        commands = stack.remember().values()
        return any("workers.driver" in c for c in commands) and any("ImplicitFunc" in c for c in commands)

    assert wait_until(trials_running, timeout=240, interval=1), stack.log_tail()


class _Terminal:
    """A pseudo-terminal that `normlab serve` runs in as a login shell's job does: its controlling
    terminal, so closing it sends the hangup a closed terminal window sends."""

    def __init__(self, log_path: Path) -> None:
        self.master, self.slave = os.openpty()
        self._log_path = log_path
        self._closing = threading.Event()
        self._reader = threading.Thread(target=self._copy_output, daemon=True)

    def start(self, env: dict[str, str]) -> subprocess.Popen[bytes]:
        slave = self.slave

        def take_the_terminal() -> None:
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "normlab"), "serve"],
            cwd=REPO,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            preexec_fn=take_the_terminal,
        )
        os.close(slave)
        self._reader.start()
        return process

    def _copy_output(self) -> None:
        # A reader blocked in read() would keep the terminal open after close(): poll, and stop first.
        with open(self._log_path, "ab") as log:
            while not self._closing.is_set():
                ready, _, _ = select.select([self.master], [], [], 0.2)
                if not ready:
                    continue
                try:
                    log.write(os.read(self.master, 65536))
                except OSError:
                    return
                log.flush()

    def close(self) -> None:
        self._closing.set()
        self._reader.join(timeout=5)
        os.close(self.master)


def test_closing_the_terminal_stops_everything(tmp_path):
    stack = _new_stack(tmp_path, "hangup")
    terminal = _Terminal(stack.log_path)
    stack.process = terminal.start(stack.env)
    try:
        stack.wait_up()
        terminal.close()  # the kernel sends SIGHUP; the launcher's output now fails
        took = stack.exits_within(60)
        assert took < CTRL_C_LIMIT_S, f"a hangup took {took:.1f} s"
        assert stack.all_gone_within(1), stack.survivors()
    finally:
        stack.kill_what_is_left()
        shutil.rmtree(stack.ray_temp, ignore_errors=True)
