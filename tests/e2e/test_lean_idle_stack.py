"""An idle `normlab serve` holds nothing warm: no trial host and no driver imports until a study comes, and
they go again NORMLAB_WARM_IDLE_S after the last study (benchmarks/bench_idle_memory.py measures what
that saves)."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from benchmarks.bench_idle_memory import GOAL_MB, stack_memory, table
from service.stack.processes import http_ok, wait_until
from tests.e2e.conftest import API_TOKEN, _shutdown, serve_environment, start_serve
from tests.e2e.specs import two_method_grid

pytestmark = pytest.mark.slow

IDLE_S = 20  # NORMLAB_WARM_IDLE_S of this stack


def _stack(launcher: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.NoSuchProcess):
        return psutil.Process(launcher).children(recursive=True)
    return []


def _named(launcher: int, needle: str) -> list[psutil.Process]:
    found = []
    for process in _stack(launcher):
        with contextlib.suppress(psutil.NoSuchProcess):
            if process.status() != psutil.STATUS_ZOMBIE and needle in " ".join(process.cmdline()):
                found.append(process)
    return found


def _pss_mb(process: psutil.Process) -> float:
    rollup = Path(f"/proc/{process.pid}/smaps_rollup").read_text()
    return next(float(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")) / 1024


def _warm_server(launcher: int) -> psutil.Process:
    """The server itself, not a driver it forked (which carries its command line)."""
    (server,) = [p for p in _named(launcher, "workers.driver.warm_server") if p.ppid() == launcher]
    return server


def test_warm_processes_start_with_the_first_study_and_go_after_the_idle_period(tmp_path):
    ray_temp = Path("/tmp") / f"nl-lean-{uuid.uuid4().hex[:6]}"
    env = {**serve_environment(tmp_path / "data", ray_temp), "NORMLAB_WARM_IDLE_S": str(IDLE_S)}
    api = f"http://127.0.0.1:{env['NORMLAB_API_PORT']}"
    log_path = tmp_path / "serve.log"
    process = start_serve(env, log_path)
    try:
        assert wait_until(lambda: process.poll() is not None or http_ok(f"{api}/healthz"), timeout=300)
        assert process.poll() is None, log_path.read_text()
        time.sleep(5)  # what a start-up would still start (the old warm-up job) has had time to show

        # Idle: no trial host, and a warm driver server that has imported nothing (an interpreter's worth).
        assert _named(process.pid, "TrialHost") == []
        server = _warm_server(process.pid)
        assert _pss_mb(server) < 50, "the warm driver server imported the driver before any study"
        # Nor anything else a stack at rest has no use for (benchmarks/bench_idle_memory.py has the table).
        assert _named(process.pid, "ray.util.client.server") == []  # Ray's client server: no port set
        assert _named(process.pid, "service.stack.ray_start") == []  # `ray start` handed over to its watcher
        assert _named(process.pid, "mlflow.server.auth:create_app") != []  # MLflow with its sign-in
        assert _named(process.pid, "service.stack.mlflow_start") == []  # the server became its uvicorn
        idle = stack_memory(process.pid)
        assert sum(p.pss_mb for p in idle) < GOAL_MB, "the idle stack holds more than the goal:\n" + table(
            idle
        )

        spec = yaml.safe_dump(two_method_grid("lean-idle", epochs=1))
        headers = {"Authorization": f"Bearer {API_TOKEN}", "Content-Type": "application/yaml"}
        with httpx.Client(base_url=api, timeout=30) as client:
            study_id = client.post("/studies", content=spec, headers=headers).json()["id"]
            assert wait_until(
                lambda: client.get(f"/studies/{study_id}").json()["status"] in ("succeeded", "failed"),
                timeout=600,
                interval=1,
            )
            study = client.get(f"/studies/{study_id}").json()
        assert study["status"] == "succeeded", study.get("error")

        # The study started them: the hosts its CPU trials trained on, the driver's imports in the server.
        assert len(_named(process.pid, "TrialHost")) == 2  # one per Ray CPU
        assert _pss_mb(server) > 100
        drivers_log = tmp_path / "data" / "logs" / "warm-drivers.log"
        assert f"--study-id {study_id}" in drivers_log.read_text()

        # IDLE_S without work: both give their memory back; the server is the same process, lean again.
        assert wait_until(lambda: _named(process.pid, "TrialHost") == [], timeout=IDLE_S + 60, interval=1)
        assert wait_until(lambda: "lean again" in drivers_log.read_text(), timeout=IDLE_S + 30, interval=1)
        assert _warm_server(process.pid).pid == server.pid
        assert _pss_mb(server) < 50
    finally:
        _shutdown(process)
        shutil.rmtree(ray_temp, ignore_errors=True)
    assert not os.path.exists(ray_temp)
