"""A real `normlab serve`: its banner and /readyz say a study can run, every port its Ray head and agents
(and a job's driver and workers) listen on is one its settings name, and Ctrl-C removes the Ray session
folder its head made under the Ray temp dir while another stack's folder there stays."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import psutil
import pytest

from service.stack.processes import http_ok, wait_until
from tests.e2e.conftest import serve_environment, start_serve

pytestmark = pytest.mark.slow

_SINGLE_PORTS = (
    "NORMLAB_API_PORT",
    "NORMLAB_MLFLOW_PORT",
    "NORMLAB_RAY_GCS_PORT",
    "NORMLAB_RAY_DASHBOARD_PORT",
    "NORMLAB_RAY_DASHBOARD_AGENT_LISTEN_PORT",
    "NORMLAB_RAY_DASHBOARD_AGENT_GRPC_PORT",
    "NORMLAB_RAY_NODE_MANAGER_PORT",
    "NORMLAB_RAY_OBJECT_MANAGER_PORT",
    "NORMLAB_RAY_METRICS_EXPORT_PORT",
    "NORMLAB_RAY_RUNTIME_ENV_AGENT_PORT",
    "NORMLAB_RAY_DASHBOARD_METRICS_PORT",
)
# A job whose driver and task hold Ray worker processes (each listens on a port) while the test looks.
_JOB = "python -c \"import ray, time; ray.init(); ray.get(ray.remote(lambda: 1).remote()); print('up', flush=True); time.sleep(60)\""


def _stack_processes(serve: subprocess.Popen, data_dir: Path) -> list[psutil.Process]:
    """The launcher, everything below it, and every process that inherited its data dir from it (a process
    that left the tree)."""
    found = {}
    with contextlib.suppress(psutil.NoSuchProcess):
        root = psutil.Process(serve.pid)
        found = {p.pid: p for p in [root, *root.children(recursive=True)]}
    marker = f"NORMLAB_DATA_DIR={data_dir}"
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if (
                process.pid not in found
                and marker.encode() in Path(f"/proc/{process.pid}/environ").read_bytes()
            ):
                found[process.pid] = process
    return list(found.values())


def _listening(processes: list[psutil.Process]) -> dict[int, str]:
    names = {}
    for process in processes:
        with contextlib.suppress(psutil.Error):
            names[process.pid] = process.name()
    return {
        conn.laddr.port: names[conn.pid]
        for conn in psutil.net_connections(kind="tcp")
        if conn.status == psutil.CONN_LISTEN and conn.pid in names
    }


def test_serve_is_ready_listens_only_on_its_ports_and_its_stop_removes_its_ray_sessions(tmp_path):
    data_dir = tmp_path / "data"
    ray_temp = Path("/tmp") / f"nl-ports-{uuid.uuid4().hex[:6]}"
    theirs = ray_temp / "session_2025-01-01_00-00-00_000000_1"  # another stack given the same temp dir
    (theirs / "logs").mkdir(parents=True)
    env = serve_environment(data_dir, ray_temp)
    api = f"http://127.0.0.1:{env['NORMLAB_API_PORT']}"
    log_path = tmp_path / "serve.log"
    process = start_serve(env, log_path)
    try:
        assert wait_until(lambda: process.poll() is not None or http_ok(f"{api}/healthz"), timeout=300)
        assert process.poll() is None, log_path.read_text()
        assert "Ready      yes" in log_path.read_text(), log_path.read_text()
        ready = httpx.get(f"{api}/readyz", timeout=30)
        assert ready.status_code == 200, ready.text
        assert ready.json()["ray"]["detail"].endswith("takes jobs (its job agent answered)")

        from ray.job_submission import JobStatus, JobSubmissionClient

        token = (data_dir / "ray_auth_token").read_text().strip()
        client = JobSubmissionClient(
            f"http://127.0.0.1:{env['NORMLAB_RAY_DASHBOARD_PORT']}",
            headers={"Authorization": f"Bearer {token}"},
        )
        job = client.submit_job(entrypoint=_JOB)
        assert wait_until(lambda: "up" in client.get_job_logs(job), timeout=120, interval=1), (
            client.get_job_status(job),
            client.get_job_logs(job),
        )
        time.sleep(3)  # the agents' servers beside the head's are up by now
        listening = _listening(_stack_processes(process, data_dir))
        singles = {int(env[name]) for name in _SINGLE_PORTS}
        workers = range(int(env["NORMLAB_RAY_MIN_WORKER_PORT"]), int(env["NORMLAB_RAY_MAX_WORKER_PORT"]) + 1)
        stray = {
            port: name for port, name in listening.items() if port not in singles and port not in workers
        }
        assert stray == {}, f"listening on ports no setting names: {stray}"
        assert singles <= set(listening), f"configured but not listening: {singles - set(listening)}"
        assert any(port in workers for port in listening)  # the job's driver and task processes
        client.stop_job(job)
        assert wait_until(lambda: client.get_job_status(job) == JobStatus.STOPPED, timeout=60)
        ours = [p for p in ray_temp.iterdir() if p.name.startswith("session_2") and p != theirs]
        assert len(ours) == 1 and ours[0].name.endswith(f"_{_head_pid(process)}"), list(ray_temp.iterdir())
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C
        code = process.wait(timeout=120)
    try:
        assert code == 0, log_path.read_text()[-3000:]
        assert sorted(p.name for p in ray_temp.iterdir()) == [theirs.name]  # ours, and its links, gone
    finally:
        import shutil

        shutil.rmtree(ray_temp, ignore_errors=True)


def _head_pid(serve: subprocess.Popen) -> int:
    """The pid of the head's `ray start` (now its watcher), which Ray names its session folder after."""
    for child in psutil.Process(serve.pid).children():
        with contextlib.suppress(psutil.Error):
            if "ray_watch.py" in " ".join(child.cmdline()) or "service.stack.ray_start" in child.cmdline():
                return child.pid
    raise AssertionError("no Ray head among the launcher's children")
