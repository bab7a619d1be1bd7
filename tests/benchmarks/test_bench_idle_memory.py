"""The idle-memory benchmark's table: one line per kind of process, largest first, and the stack's total."""

from __future__ import annotations

import os

from benchmarks.bench_idle_memory import ProcessMemory, process_memory, role, table


def test_processes_are_named_by_what_they_are():
    assert role(["ray::TrialHost"], "ray::TrialHost") == "ray::TrialHost"
    assert role(["python", "-m", "workers.driver.warm_server", "--lazy"], "python") == "warm driver server"
    assert role(["ray-dashboard-JobHead-0 (python)"], "ray-dashboard-J") == "ray dashboard module"
    assert (
        role(["python", "-m", "service.stack.ray_start", "start", "--head"], "python") == "ray start --block"
    )
    # What that becomes once the head runs: its arguments name the head's processes, gcs_server among them.
    watcher = ["python", "-I", "-S", "/repo/service/stack/ray_watch.py", "gcs_server=12", "raylet=13"]
    assert role(watcher, "python") == "ray head watcher"
    mlflow = ["python", "-m", "uvicorn", "--port", "5000", "mlflow.server.fastapi_app:app"]
    assert role(mlflow, "python") == "mlflow server (uvicorn)"


def test_the_table_groups_kinds_largest_first_and_adds_up_the_stack():
    rows = [
        ProcessMemory(1, "ray::TrialHost", 380.0, 560.0),
        ProcessMemory(2, "mlflow server", 200.0, 290.0),
        ProcessMemory(3, "ray::TrialHost", 370.0, 550.0),
    ]
    lines = table(rows).splitlines()
    assert lines[2] == "| ray::TrialHost | 2 | 750 |"
    assert lines[3] == "| mlflow server | 1 | 200 |"
    assert lines[-1] == "| **total** | **3** | **950** |"


def test_this_process_has_a_pss():
    memory = process_memory(os.getpid())
    assert memory is not None and 0 < memory.pss_mb <= memory.rss_mb
