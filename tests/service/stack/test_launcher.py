"""The launcher's pieces: what a study driver is told, and supervised processes that always stop, with
everything they started, however the launcher ends."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

import service.stack.launcher as launcher
from service.settings import Settings
from service.stack.launcher import Origin, driver_environment
from service.stack.local_stack import StackRecord, stop_stale_stacks
from service.stack.processes import (
    STOP_GRACE_S,
    ManagedProcess,
    ProcessIdentity,
    ProcessStartError,
    free_port,
    http_ok,
    marked_processes,
    wait_until,
)
from service.stack.stop_signals import hurried_by_signals, stopped_by_signals


def test_a_local_sqlite_database_url_travels_to_the_driver(tmp_path):
    settings = Settings(data_dir=tmp_path)
    env = driver_environment(settings)
    assert env["DATABASE_URL"] == f"sqlite:///{tmp_path / 'normlab.db'}"
    assert env["NORMLAB_DATA_DIR"] == str(tmp_path)
    assert env["MLFLOW_TRACKING_URI"] == settings.mlflow_tracking_uri


def test_the_trial_switches_travel_to_the_driver_and_its_trials(tmp_path):
    assert driver_environment(Settings(data_dir=tmp_path))["NORMLAB_TRAIN_AHEAD"] == "1"
    off = driver_environment(Settings(data_dir=tmp_path, trial_hosts=False, train_ahead=False))
    assert (off["NORMLAB_TRIAL_HOSTS"], off["NORMLAB_TRAIN_AHEAD"]) == ("0", "0")


def test_the_checkpoint_interval_travels_to_the_driver_and_its_trials(tmp_path):
    assert driver_environment(Settings(data_dir=tmp_path))["NORMLAB_CHECKPOINT_EVERY_S"] == "10"
    every = driver_environment(Settings(data_dir=tmp_path, checkpoint_every_s=0.5))
    assert every["NORMLAB_CHECKPOINT_EVERY_S"] == "0.5"


def test_drivers_and_trials_print_no_mlflow_run_links_in_the_genai_view(tmp_path):
    # MLflow's client would print "View run ... at: <url>" for every run it ends, opening the GenAI view.
    env = driver_environment(Settings(data_dir=tmp_path))
    assert env["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] == "true"


def test_a_database_password_never_travels_in_the_jobs_runtime_env(tmp_path):
    settings = Settings(
        data_dir=tmp_path, database_url="postgresql+psycopg://normlab:s3cret@postgres/normlab"
    )
    env = driver_environment(settings)
    assert "DATABASE_URL" not in env
    assert all("s3cret" not in value for value in env.values())


def test_mlflow_credentials_never_travel_in_the_jobs_runtime_env(tmp_path):
    # Ray shows a job's runtime_env to whoever reads its job API: they reach jobs through the head's environment.
    settings = Settings(data_dir=tmp_path, mlflow_password="s3cret-mlflow-password")
    env = driver_environment(settings)
    assert not {"MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"} & set(env)
    assert all("s3cret" not in value for value in env.values())


def test_the_stack_signs_in_only_to_a_local_mlflow_with_sign_in_on(tmp_path, monkeypatch):
    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    local = Settings(_env_file=None, data_dir=tmp_path)
    for origin in (Origin.STARTED, Origin.ATTACHED):
        credentials = launcher._mlflow_credentials(local, origin)
        assert credentials is not None and credentials.username == "normlab"
    assert launcher._mlflow_credentials(local, Origin.CONFIGURED) is None
    # Compose's or another team's MLflow: its credentials, if any, are MLFLOW_TRACKING_* as they are.
    remote = Settings(_env_file=None, data_dir=tmp_path, mlflow_tracking_uri="http://mlflow:5000")
    assert launcher._mlflow_credentials(remote, Origin.ATTACHED) is None
    off = Settings(_env_file=None, data_dir=tmp_path / "off", mlflow_auth=False)
    assert launcher._mlflow_credentials(off, Origin.STARTED) is None
    assert not off.mlflow_password_path.exists()


def _http_server(tmp_path: Path, port: int, delay_s: float = 0.0) -> ManagedProcess:
    code = f"import time, http.server; time.sleep({delay_s}); http.server.test(HandlerClass=http.server.SimpleHTTPRequestHandler, port={port}, bind='127.0.0.1')"
    return ManagedProcess(
        name="http",
        argv=[sys.executable, "-c", code],
        log_path=tmp_path / "http.log",
        health_url=f"http://127.0.0.1:{port}/",
    )


def test_a_managed_process_starts_healthy_and_stop_takes_it_down(tmp_path):
    port = free_port()
    server = _http_server(tmp_path, port)
    server.start(timeout=30)
    assert server.alive and http_ok(f"http://127.0.0.1:{port}/")
    server.stop()
    assert not server.alive and not http_ok(f"http://127.0.0.1:{port}/")


def test_a_process_that_never_gets_healthy_is_stopped_and_the_error_carries_its_log(tmp_path):
    port = free_port()
    server = _http_server(tmp_path, port, delay_s=60)
    started = time.monotonic()
    with pytest.raises(ProcessStartError, match="did not become healthy"):
        server.start(timeout=2)
    assert time.monotonic() - started < 30
    assert not server.alive


def test_a_process_that_dies_at_start_reports_its_output(tmp_path):
    dying = ManagedProcess(
        name="dying",
        argv=[sys.executable, "-c", "import sys; print('bad config'); sys.exit(3)"],
        log_path=tmp_path / "dying.log",
        health_url=f"http://127.0.0.1:{free_port()}/",
    )
    with pytest.raises(ProcessStartError, match="bad config"):
        dying.start(timeout=30)


# --- Stopping: a child with everything it started, however the launcher ends ---

# A child that starts what Ray's head and MLflow's server start: a daemon in a session of its own, and
# a process whose parent exits (reparented away from the tree). It prints their pids, then "ready".
_TREE = """
import os, subprocess, sys, time
sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
daemon = subprocess.Popen(sleep, start_new_session=True)
middle = subprocess.Popen(
    [sys.executable, "-c", f"import subprocess; print(subprocess.Popen({sleep!r}, start_new_session=True).pid)"],
    stdout=subprocess.PIPE, text=True,
)
orphan = int(middle.stdout.readline())
middle.wait()
print("pids", os.getpid(), daemon.pid, orphan, flush=True)
print("ready", flush=True)
time.sleep(600)
"""

# What `normlab serve` does with a child, without the services: record it, guard it, wait.
_LAUNCHER = """
import sys, time
from pathlib import Path
from service.stack.local_stack import StartedStack
from service.stack.processes import ManagedProcess
data_dir = Path(sys.argv[1])
started = StartedStack(data_dir)
tree = ManagedProcess(name="tree", argv=[sys.executable, "-c", sys.argv[2]], log_path=data_dir / "tree.log",
                      ready_text="ready")
started.start(tree, timeout=60)
print("started", flush=True)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _tree_pids(log_path: Path) -> list[int]:
    line = next(line for line in log_path.read_text().splitlines() if line.startswith("pids "))
    return [int(pid) for pid in line.split()[1:]]


def _tree(tmp_path: Path, *, ignore_sigterm: bool = False) -> ManagedProcess:
    code = _TREE
    if ignore_sigterm:
        code = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + code
    return ManagedProcess(
        name="tree", argv=[sys.executable, "-c", code], log_path=tmp_path / "tree.log", ready_text="ready"
    )


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_stop_takes_down_what_the_child_started_in_other_sessions_and_after_leaving_its_tree(tmp_path):
    tree = _tree(tmp_path)
    tree.start(timeout=60)
    pids = _tree_pids(tree.log_path)
    try:
        assert all(_running(pid) for pid in pids)
        started = time.monotonic()
        tree.stop()
        assert time.monotonic() - started < STOP_GRACE_S  # they all end on SIGTERM: no waiting it out
        assert [pid for pid in pids if _running(pid)] == []
    finally:
        _kill_all(pids)


def test_what_ignores_sigterm_is_killed_once_the_grace_period_is_over(tmp_path):
    tree = _tree(tmp_path, ignore_sigterm=True)
    tree.start(timeout=60)
    pids = _tree_pids(tree.log_path)
    try:
        started = time.monotonic()
        tree.stop(timeout=1.0)
        assert 1.0 <= time.monotonic() - started < 5.0
        assert [pid for pid in pids if _running(pid)] == []
    finally:
        _kill_all(pids)


def test_a_hurried_stop_kills_at_once(tmp_path):
    tree = _tree(tmp_path, ignore_sigterm=True)
    tree.start(timeout=60)
    pids = _tree_pids(tree.log_path)
    hurry = threading.Event()
    hurry.set()
    try:
        started = time.monotonic()
        tree.stop(timeout=30.0, hurry=hurry)
        assert time.monotonic() - started < 5.0
        assert [pid for pid in pids if _running(pid)] == []
    finally:
        _kill_all(pids)


def test_a_pid_that_now_names_another_process_is_never_signalled():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        identity = ProcessIdentity.of(sleeper.pid)
        assert identity is not None and identity.is_running()
        recycled = ProcessIdentity(sleeper.pid, identity.started + 1)  # same pid, another start time
        assert not recycled.is_running()
        recycled.send(signal.SIGKILL)
        time.sleep(0.2)
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_every_descendant_carries_the_childs_mark(tmp_path):
    tree = _tree(tmp_path)
    tree.start(timeout=60)
    pids = _tree_pids(tree.log_path)
    try:
        assert {process.pid for process in marked_processes([tree.mark])} == set(pids)
        assert marked_processes(["another-mark"]) == set()
    finally:
        tree.stop()
        _kill_all(pids)


def _start_launcher(tmp_path: Path) -> tuple[subprocess.Popen[str], list[int]]:
    launcher = subprocess.Popen(
        [sys.executable, "-c", _LAUNCHER, str(tmp_path), _TREE],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert launcher.stdout is not None
    assert launcher.stdout.readline().strip() == "started", launcher.stdout.read()
    return launcher, _tree_pids(tmp_path / "tree.log")


def _guard_of(launcher: subprocess.Popen[str]) -> psutil.Process:
    children = psutil.Process(launcher.pid).children()
    return next(child for child in children if "guard" in child.cmdline())


def test_a_launcher_killed_outright_leaves_its_guard_to_stop_everything_it_started(tmp_path):
    launcher, pids = _start_launcher(tmp_path)
    records = list((tmp_path / "run").glob("serve-*.json"))
    try:
        assert len(records) == 1 and "tree" in records[0].read_text()
        launcher.kill()  # SIGKILL: no handler of the launcher runs
        launcher.wait()
        assert wait_until(lambda: not any(_running(pid) for pid in pids), timeout=STOP_GRACE_S + 10)
        assert wait_until(lambda: not records[0].exists(), timeout=5)
        # The kernel may have stopped the direct child first (PR_SET_PDEATHSIG): what the guard stopped is
        # the rest, at least the two processes out of the child's reach.
        assert re.search(
            r"launcher is gone: stopped [23] process", (tmp_path / "logs" / "stack-guard.log").read_text()
        )
    finally:
        _kill_all(pids)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_when_launcher_and_guard_die_the_child_follows_and_the_next_start_stops_the_rest(tmp_path):
    launcher, pids = _start_launcher(tmp_path)
    child, daemon, orphan = pids
    try:
        guard = _guard_of(launcher)
        guard.kill()
        launcher.kill()
        launcher.wait()
        # The kernel signals the direct child (PR_SET_PDEATHSIG); what it started is out of its reach.
        assert wait_until(lambda: not _running(child), timeout=5)
        time.sleep(0.5)
        assert _running(daemon) and _running(orphan)
        assert len(list((tmp_path / "run").glob("serve-*.json"))) == 1

        stopped = stop_stale_stacks(tmp_path)

        assert len(stopped) == 1 and "2 process(es) of tree" in stopped[0], stopped
        assert not _running(daemon) and not _running(orphan)
        assert list((tmp_path / "run").glob("serve-*.json")) == []
    finally:
        _kill_all(pids)


def test_the_record_of_a_launcher_still_running_is_left_alone(tmp_path):
    record = StackRecord.for_this_launcher(tmp_path)  # this test process is a running launcher
    tree = _tree(tmp_path)
    tree.start(timeout=60)
    pids = _tree_pids(tree.log_path)
    try:
        record.track(tree)
        assert stop_stale_stacks(tmp_path) == []
        assert all(_running(pid) for pid in pids)
        assert record.path.exists()
        assert {process.pid for process in record.running()} == set(pids)
    finally:
        tree.stop()
        _kill_all(pids)


def test_a_record_from_another_machine_or_before_a_reboot_stops_nothing_here(tmp_path):
    tree = _tree(tmp_path)
    tree.start(timeout=60)
    pids = _tree_pids(tree.log_path)
    gone = ProcessIdentity(os.getpid(), 0)  # no such launcher any more
    try:
        elsewhere = StackRecord(tmp_path / "run" / "serve-1.json", gone, "other-host", "", [])
        elsewhere.track(tree)
        rebooted = StackRecord(tmp_path / "run" / "serve-2.json", gone, socket.gethostname(), "old-boot", [])
        rebooted.track(tree)
        assert stop_stale_stacks(tmp_path) == []
        assert all(_running(pid) for pid in pids)
        assert elsewhere.path.exists()  # another machine's launcher may still run
        assert not rebooted.path.exists()  # nothing of it can still run
    finally:
        tree.stop()
        _kill_all(pids)


def test_an_unreadable_record_is_ignored(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "serve-7.json").write_text("{not json")
    assert stop_stale_stacks(tmp_path) == []


def test_sigterm_and_sighup_stop_serve_as_ctrl_c_does():
    for signum in (signal.SIGTERM, signal.SIGHUP):
        with pytest.raises(KeyboardInterrupt), stopped_by_signals():
            signal.raise_signal(signum)
            time.sleep(1)  # the handler runs between bytecodes; this must not finish


def test_a_signal_while_the_stack_stops_hurries_the_stop_instead_of_interrupting_it():
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with hurried_by_signals() as hurry:
            signal.raise_signal(signum)
            assert hurry.wait(timeout=1)
