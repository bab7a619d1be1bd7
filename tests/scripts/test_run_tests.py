"""`make test`'s runner: with a Docker engine, the docker tests run beside the main run, and both runs'
pytest summaries come last, where CI's truncated tail still shows them."""

import os
import stat
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNNER = REPO_ROOT / "scripts" / "run_tests.sh"

# Stands in for `python -m pytest`: writes a pytest-like report for the run it was asked for
# (`-m docker` or `-m "not docker"`) and exits with that run's status.
FAKE_PYTHON = """#!/usr/bin/env bash
if [[ "$4" == "docker" ]]; then
  echo "docker progress line"
  echo "============================= slowest 30 durations ============================="
  for i in $(seq 40); do echo "${i}.00s call     tests/docker/test_compose_stack.py::test_$i"; done
  echo "================ 8 passed, 2051 deselected in 741.13s ================"
  exit "${DOCKER_STATUS:-0}"
fi
echo "main progress line"
echo "__________ test_the_thing __________"
echo "E   AssertionError: the traceback of the main run"
echo "=========================== short test summary info ============================"
echo "FAILED tests/e2e/test_soak.py::test_the_thing - AssertionError: the traceback"
echo "=== 1 failed, 2042 passed in 1358.84s (0:22:38) ==="
# What the interpreter writes at exit, after pytest's counts (nanobind's leak report of Triton).
for i in $(seq 40); do echo " - leaked function f$i" >&2; done
exit "${MAIN_STATUS:-0}"
"""


def run_the_runner(tmp_path: Path, main_status: int, docker_status: int):
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    tools = tmp_path / "tools"
    tools.mkdir()
    for path, text in ((venv_bin / "python", FAKE_PYTHON), (tools / "docker", "#!/bin/sh\nexit 0\n")):
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    env = {
        "PATH": f"{tools}:/usr/bin:/bin",
        "VENV": str(tmp_path / "venv"),
        "TMPDIR": str(tmp_path),
        "MAIN_STATUS": str(main_status),
        "DOCKER_STATUS": str(docker_status),
    }
    return subprocess.run(
        ["bash", str(RUNNER)], cwd=tmp_path, env={**os.environ, **env}, capture_output=True, text=True
    )


def test_a_failed_main_run_is_named_in_the_last_lines_after_the_docker_log(tmp_path):
    completed = run_the_runner(tmp_path, main_status=1, docker_status=0)

    assert completed.returncode == 1
    last_lines = completed.stdout.splitlines()[-8:]
    assert "FAILED tests/e2e/test_soak.py::test_the_thing - AssertionError: the traceback" in last_lines
    assert "=== 1 failed, 2042 passed in 1358.84s (0:22:38) ===" in last_lines
    assert "================ 8 passed, 2051 deselected in 741.13s ================" in last_lines
    assert last_lines[-1] == "make test: FAILED (main run exit 1, docker run exit 0)"
    # The whole main run is still printed first, then the docker log.
    assert completed.stdout.index("main progress line") < completed.stdout.index("docker progress line")


def test_a_docker_failure_alone_fails_the_run_and_both_passing_runs_pass(tmp_path):
    failed = run_the_runner(tmp_path / "a", main_status=0, docker_status=2)
    passed = run_the_runner(tmp_path / "b", main_status=0, docker_status=0)

    assert failed.returncode == 1
    assert failed.stdout.splitlines()[-1] == "make test: FAILED (main run exit 0, docker run exit 2)"
    assert passed.returncode == 0
    assert "summary: main run (exit 0)" in passed.stdout
