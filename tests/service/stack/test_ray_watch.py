"""The Ray head's lean watcher (service.stack.ray_watch) waits on the head's processes as `ray start --block`
does: it stops them all when told to, raylet first, and it stops the rest when one of them ends.

Each test starts the watcher the way service.stack.ray_start does: a process starts the head's processes,
then replaces itself with the watcher, so they are its children."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from service.stack import ray_watch
from service.stack.processes import wait_until
from service.stack.ray_start import watcher_command

# A stand-in for one of the head's processes: notes its name in a shared file when SIGTERM comes, then exits
# as Ray's processes do (or, `stubborn`, ignores it).
_CHILD = textwrap.dedent(
    """
    import signal, sys, time
    name, notes, stubborn = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    def on_term(*_):
        with open(notes, "a") as f:
            f.write(name + "\\n")
        if not stubborn:
            sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)
    print("ready", flush=True)
    while True:
        time.sleep(1)
    """
)

# Starts the children, waits until each handles SIGTERM, then becomes the watcher (exec), as ray_start does.
_LAUNCH = textwrap.dedent(
    """
    import os, subprocess, sys
    from service.stack.ray_start import watcher_command
    child, notes, names, stubborn = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4]
    started = {}
    for name in names:
        process = subprocess.Popen(
            [sys.executable, "-c", child, name, notes, "1" if name == stubborn else "0"], stdout=subprocess.PIPE
        )
        assert process.stdout.readline().strip() == b"ready"
        started[name] = [process.pid]
    command = watcher_command(started)
    os.execv(command[0], command)
    """
)

NAMES = ("dashboard", "gcs_server", "log_monitor", "raylet")


def _start(
    tmp_path: Path, *, stubborn: str = ""
) -> tuple[subprocess.Popen[bytes], dict[str, psutil.Process]]:
    notes = tmp_path / "stopped.txt"
    notes.touch()
    watcher = subprocess.Popen(
        [sys.executable, "-c", _LAUNCH, _CHILD, str(notes), ",".join(NAMES), stubborn],
        stderr=subprocess.PIPE,
    )
    assert wait_until(lambda: _is_watcher(watcher.pid) and len(_children(watcher.pid)) == 4, timeout=30)
    children = {_child_name(p): p for p in _children(watcher.pid)}
    return watcher, children


def _is_watcher(pid: int) -> bool:
    try:
        return "ray_watch.py" in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


def _children(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children()


def _child_name(process: psutil.Process) -> str:
    return process.cmdline()[3]


def _gone(processes: dict[str, psutil.Process]) -> bool:
    return not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in processes.values())


def test_the_watcher_reads_one_name_and_pid_per_process_of_the_head():
    assert ray_watch.parse(["raylet=12", "gcs_server=13", "dashboard_agent=14"]) == {
        12: "raylet",
        13: "gcs_server",
        14: "dashboard_agent",
    }
    with pytest.raises(ValueError, match="NAME=PID"):
        ray_watch.parse(["raylet"])


def test_the_raylet_is_stopped_first_then_the_gcs_then_the_rest():
    order = ray_watch.stop_order({1: "dashboard", 2: "gcs_server", 3: "raylet", 4: "log_monitor"})
    assert order == [[3], [2], [1, 4]]


def test_exit_0_and_sigterm_are_how_rays_own_stop_ends_a_process_and_anything_else_is_a_failure():
    graceful = [0, signal.SIGTERM, (128 + signal.SIGTERM) << 8]  # wait statuses: exit 0, signal, exit 143
    assert all(ray_watch.ended_gracefully(status) for status in graceful)
    assert not ray_watch.ended_gracefully(signal.SIGKILL)
    assert not ray_watch.ended_gracefully(1 << 8)
    assert ray_watch.describe(signal.SIGKILL) == "killed by SIGKILL"
    assert ray_watch.describe(3 << 8) == "exited with status 3"


def test_the_watcher_runs_without_the_venv_and_imports_nothing_beyond_the_standard_library():
    command = watcher_command({"raylet": [1]})
    assert command[1:3] == ["-I", "-S"]
    source = Path(ray_watch.__file__).read_text()
    imported = {line.split()[1] for line in source.splitlines() if line.startswith(("import ", "from "))}
    assert imported <= {"__future__", "contextlib", "os", "signal", "sys", "time", "collections.abc"}


def test_sigterm_stops_every_process_of_the_head_raylet_first_and_the_watcher_exits_0(tmp_path):
    watcher, children = _start(tmp_path)
    watcher.send_signal(signal.SIGTERM)
    assert watcher.wait(timeout=20) == 0
    assert wait_until(lambda: _gone(children), timeout=10)
    stopped = (tmp_path / "stopped.txt").read_text().split()
    assert stopped[:2] == ["raylet", "gcs_server"]
    assert sorted(stopped[2:]) == ["dashboard", "log_monitor"]


def test_a_process_that_dies_takes_the_rest_of_the_head_down_and_the_watcher_exits_1(tmp_path):
    watcher, children = _start(tmp_path)
    children["log_monitor"].kill()
    assert watcher.wait(timeout=20) == 1
    assert wait_until(lambda: _gone(children), timeout=10)
    assert watcher.stderr is not None
    assert b"log_monitor killed by SIGKILL: stopping the rest of the head" in watcher.stderr.read()


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path):
    watcher, children = _start(tmp_path, stubborn="dashboard")
    started = time.monotonic()
    watcher.send_signal(signal.SIGTERM)
    assert watcher.wait(timeout=ray_watch.GRACE_S + 20) == 0
    assert time.monotonic() - started >= ray_watch.GRACE_S - 0.5
    assert wait_until(lambda: _gone(children), timeout=10)
    assert watcher.stderr is not None
    assert b"dashboard (pid" in watcher.stderr.read()  # "... outlived 5 s: SIGKILL"
    assert "dashboard" in (tmp_path / "stopped.txt").read_text().split()  # it was asked first


def test_a_killed_watcher_takes_the_heads_processes_with_it_when_they_were_started_bound_to_it(tmp_path):
    """Ray starts the head's processes with PR_SET_PDEATHSIG: exec keeps that binding to the watcher."""
    notes = tmp_path / "stopped.txt"
    notes.touch()
    bound = textwrap.dedent(
        """
        import ctypes, os, signal, subprocess, sys
        from service.stack.ray_start import watcher_command
        libc = ctypes.CDLL(None, use_errno=True)
        def bind():
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG, as Ray's fate sharing does
        child, notes = sys.argv[1], sys.argv[2]
        process = subprocess.Popen(
            [sys.executable, "-c", child, "raylet", notes, "0"], stdout=subprocess.PIPE, preexec_fn=bind
        )
        assert process.stdout.readline().strip() == b"ready"
        command = watcher_command({"raylet": [process.pid]})
        os.execv(command[0], command)
        """
    )
    watcher = subprocess.Popen([sys.executable, "-c", bound, _CHILD, str(notes)])
    assert wait_until(lambda: _is_watcher(watcher.pid) and len(_children(watcher.pid)) == 1, timeout=30)
    (raylet,) = _children(watcher.pid)
    os.kill(watcher.pid, signal.SIGKILL)
    watcher.wait(timeout=10)
    assert wait_until(lambda: not raylet.is_running() or raylet.status() == psutil.STATUS_ZOMBIE, timeout=10)
