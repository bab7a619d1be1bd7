"""A study's job hands its driver to the warm driver server, which forks it; the job process stands in for it
(unit tests of workers.driver.warm_server and workers.driver.warm_client, on a real server process running a
stand-in driver, tests/workers/driver/warm_fake_driver.py)."""

from __future__ import annotations

import importlib
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.stack.processes import wait_until
from workers.driver.warm_client import run_on_warm_server
from workers.driver.warm_server import PRELOADED_MODULES, READY_LINE

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
FAKE_DRIVER = "tests.workers.driver.warm_fake_driver:main"


def _start_server(
    socket_path: Path, log_path: Path, *extra: str, ready: str = "preloaded"
) -> subprocess.Popen:
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "workers.driver.warm_server",
                "--socket",
                str(socket_path),
                "--entry",
                FAKE_DRIVER,
                *extra,
            ],
            cwd=REPO,
            # Buffered, as a server started without it is: each driver takes its job's setting.
            env={name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    assert wait_until(lambda: ready in log_path.read_text(), timeout=120, interval=0.2)
    return server


@pytest.fixture(scope="module")
def server_socket() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="nl-ws-") as tmp:  # short: Unix socket paths are limited
        socket_path = Path(tmp) / "drivers.sock"
        server = _start_server(socket_path, Path(tmp) / "server.log")
        yield socket_path
        server.terminate()
        server.wait(timeout=30)


def _job(
    socket_path: Path, *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None, **popen
) -> subprocess.Popen:
    """`python -m workers.driver ARGV`, as a study's Ray job runs it."""
    env = {**os.environ, "NORMLAB_WARM_DRIVER_SOCKET": str(socket_path), "FAKE_JOB": "job-7", **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "workers.driver", *argv],
        cwd=cwd or REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def test_the_driver_runs_in_a_forked_process_with_the_jobs_arguments_environment_and_output(
    server_socket, tmp_path
):
    job = _job(server_socket, "describe", "--study-id", "s1", cwd=tmp_path)
    out, err = job.communicate(timeout=60)
    assert job.returncode == 0, err
    assert f"argv=['describe', '--study-id', 's1'] cwd={tmp_path} job=job-7" in out
    forked = re.search(r"the driver runs in process (\d+), forked by the warm driver server", err)
    assert forked is not None, err
    assert f"pid={forked.group(1)}\n" in out  # the server's child, not the job's process
    assert int(forked.group(1)) != job.pid
    assert "to stderr" in err


def test_the_job_exits_with_the_drivers_exit_status(server_socket):
    jobs = {  # at once: the server reaps each driver and answers its own job
        "exit 7": _job(server_socket, "exit", "7"),
        "exit None": _job(server_socket, "exit", "none"),
        "exit with a message": _job(server_socket, "exit", "no DATABASE_URL"),
        "exception": _job(server_socket, "raise"),
        "killed by SIGKILL": _job(server_socket, "kill-self"),
    }
    done = {name: (job, *job.communicate(timeout=60)) for name, job in jobs.items()}
    assert done["exit 7"][0].returncode == 7
    assert done["exit None"][0].returncode == 0
    assert done["killed by SIGKILL"][0].returncode == 128 + signal.SIGKILL
    assert done["exit with a message"][0].returncode == 1
    assert "no DATABASE_URL" in done["exit with a message"][2]
    assert done["exception"][0].returncode == 1
    assert "RuntimeError: the fake driver failed" in done["exception"][2]


def test_a_job_run_unbuffered_shows_each_line_of_its_driver_as_it_is_printed(server_socket, tmp_path):
    note = tmp_path / "note"
    job = _job(server_socket, "print-and-wait", str(note), env={"PYTHONUNBUFFERED": "1"})  # as Ray runs jobs
    try:
        _started(note)  # the driver is still running, its line printed
        assert job.stdout is not None
        readable, _, _ = select.select([job.stdout], [], [], 10)
        assert readable, "the driver's line is still in its buffer"
        assert job.stdout.readline() == "a line the job's log shows at once\n"
    finally:
        job.kill()
        job.communicate(timeout=30)


def test_a_driver_exits_as_the_interpreter_would_after_its_threads_and_thread_pools(server_socket, tmp_path):
    note = tmp_path / "note"
    job = _job(server_socket, "leave-threads", str(note))
    job.communicate(timeout=30)  # a driver that waited for its pool's workers forever would hang here
    assert job.returncode == 0
    assert note.read_text() == "joined"


def test_a_stopping_signal_before_the_driver_starts_reaches_it_once_it_does(server_socket, tmp_path):
    server = _server_process(server_socket)
    note = tmp_path / "note"
    os.kill(server, signal.SIGSTOP)  # the job connects and waits for the server's answer
    try:
        job = _job(server_socket, "wait-for-sigterm", str(note))
        time.sleep(1.0)
        job.send_signal(signal.SIGTERM)
    finally:
        os.kill(server, signal.SIGCONT)
    _out, err = job.communicate(timeout=30)
    assert "forked by the warm driver server" in err
    assert job.returncode == 128 + signal.SIGTERM


def _server_process(socket_path: Path) -> int:
    (pid,) = [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit()
        and _cmdline(int(entry.name)).endswith(f"--socket\0{socket_path}\0--entry\0{FAKE_DRIVER}\0")
    ]
    return pid


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def test_a_job_whose_code_changed_since_the_server_started_runs_its_own_driver(server_socket):
    assert run_on_warm_server(server_socket, ["describe"], fingerprint="an older checkout") is None


def test_a_malformed_request_is_refused_and_the_server_serves_on(server_socket):
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as connection:
        connection.connect(str(server_socket))
        socket.send_fds(connection, [b"not json"], [0, 1, 2])
        assert b"bad request" in connection.recv(1 << 16)
    job = _job(server_socket, "exit", "7")
    job.communicate(timeout=60)
    assert job.returncode == 7


def _started(note: Path) -> int:
    assert wait_until(lambda: note.exists() and note.read_text().isdigit(), timeout=60, interval=0.1)
    return int(note.read_text())


def test_sigterm_to_the_job_reaches_the_driver(server_socket, tmp_path):
    note = tmp_path / "note"
    job = _job(server_socket, "wait-for-sigterm", str(note))
    _started(note)
    job.send_signal(signal.SIGTERM)  # how Ray cancels a job
    job.communicate(timeout=30)
    assert note.read_text() == "terminated"
    assert job.returncode == 143


def test_a_job_killed_outright_takes_its_driver_with_it(server_socket, tmp_path):
    note = tmp_path / "note"
    job = _job(server_socket, "wait", str(note))
    driver = _started(note)
    job.kill()
    job.communicate(timeout=30)
    assert wait_until(lambda: not _alive(driver), timeout=10, interval=0.1), "the driver outlived its job"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_without_a_server_the_job_runs_its_driver_itself(tmp_path):
    assert run_on_warm_server(tmp_path / "nobody.sock", ["--study-id", "s1"]) is None


def test_a_server_that_answers_without_starting_a_driver_leaves_the_driver_to_the_job(tmp_path):
    socket_path = tmp_path / "s.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(str(socket_path))
    listener.listen(1)

    def refuse() -> None:
        client, _ = listener.accept()
        client.recv(1 << 20)
        client.send(b'{"error": "cannot fork a driver: out of memory"}')
        client.close()

    threading.Thread(target=refuse, daemon=True).start()
    try:
        assert run_on_warm_server(socket_path, ["--study-id", "s1"]) is None
    finally:
        listener.close()


def test_a_stopped_server_removes_its_socket_and_leaves_a_running_driver_to_its_job(tmp_path):
    with tempfile.TemporaryDirectory(prefix="nl-ws-") as tmp:
        socket_path = Path(tmp) / "drivers.sock"
        server = _start_server(socket_path, Path(tmp) / "server.log")
        note = tmp_path / "note"
        job = _job(socket_path, "wait-for-sigterm", str(note))
        driver = _started(note)
        server.terminate()
        server.wait(timeout=30)
        assert not socket_path.exists()
        assert _alive(driver)
        job.send_signal(signal.SIGTERM)
        job.communicate(timeout=30)
        # The job cannot learn the status of a driver whose server is gone, and says so.
        assert job.returncode == 1
        assert note.read_text() == "terminated"


def test_a_lazy_server_imports_at_the_first_study_and_goes_lean_again_after_its_idle_period(tmp_path):
    with tempfile.TemporaryDirectory(prefix="nl-ws-") as tmp:
        socket_path, log_path = Path(tmp) / "drivers.sock", Path(tmp) / "server.log"
        server = _start_server(socket_path, log_path, "--lazy", "--release-after", "3", ready=READY_LINE)
        try:
            assert "preloaded" not in log_path.read_text()  # lean until a study comes
            first = _job(socket_path, "describe", cwd=tmp_path)
            assert first.communicate(timeout=120)[0].startswith("argv=['describe']")
            assert "preloaded the driver's modules" in log_path.read_text()
            # No driver for 3 s: the same process re-executes itself, lean, on the same socket.
            assert wait_until(lambda: "lean again" in log_path.read_text(), timeout=60, interval=0.2)
            assert server.poll() is None and socket_path.exists()
            cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
            assert b"--listen-fd" in cmdline
            second = _job(socket_path, "describe", cwd=tmp_path)
            out, err = second.communicate(timeout=120)
            assert out.startswith("argv=['describe']") and "forked by the warm driver server" in err
            assert log_path.read_text().count("preloaded the driver's modules") == 2
        finally:
            server.terminate()
            server.wait(timeout=30)
        assert not socket_path.exists()


def test_every_preloaded_module_imports():
    for name in PRELOADED_MODULES:
        importlib.import_module(name)


def test_the_ready_line_is_what_the_stack_waits_for():
    from service.stack.local_stack import warm_driver_server

    process = warm_driver_server(
        data_dir=Path("/tmp"), socket_path=Path("/tmp/x.sock"), token="t", node_ip="127.0.0.1", driver_env={}
    )
    assert process.ready_text == READY_LINE
