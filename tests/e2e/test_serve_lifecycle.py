"""`normlab serve` (what `make run` runs): prints where everything is, and Ctrl-C stops all of it in under
10 s (the other ways of stopping it: test_serve_shutdown.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from service.stack.processes import http_ok, wait_until
from tests.e2e.conftest import serve_environment, start_serve

pytestmark = pytest.mark.slow


def _processes_mentioning(needle: str) -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if needle in line and "ps -ww" not in line]


def test_serve_starts_mlflow_ray_and_the_api_and_ctrl_c_stops_them_all(tmp_path):
    ray_temp = Path("/tmp") / f"nl-life-{uuid.uuid4().hex[:6]}"
    env = serve_environment(tmp_path / "data", ray_temp)
    api = f"http://127.0.0.1:{env['NORMLAB_API_PORT']}"
    mlflow = f"http://127.0.0.1:{env['NORMLAB_MLFLOW_PORT']}/health"
    log_path = tmp_path / "serve.log"
    process = start_serve(env, log_path)
    try:
        assert wait_until(lambda: process.poll() is not None or http_ok(f"{api}/healthz"), timeout=300)
        assert process.poll() is None, log_path.read_text()
        ready = httpx.get(f"{api}/readyz", timeout=10).json()
        assert ready["status"] == "ready" and ready["mlflow"]["reachable"] and ready["ray"]["reachable"]
        banner = log_path.read_text()
        assert api in banner and "MLflow UI" in banner and "token` prints it" in banner
        assert env["NORMLAB_API_TOKEN"] not in banner  # where the token is, never the token
        assert _processes_mentioning(str(ray_temp)), "the Ray head should be running under its temp dir"
    finally:
        interrupted = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in the terminal sends to the foreground group
        code = process.wait(timeout=120)
        took = time.monotonic() - interrupted
    assert code == 0, log_path.read_text()[-3000:]
    assert took < 10, f"Ctrl-C took {took:.1f} s:\n{log_path.read_text()[-3000:]}"
    assert not http_ok(f"{api}/healthz") and not http_ok(mlflow)
    # Ray's head is a dozen processes, some in sessions of their own: none outlives the launcher.
    assert _processes_mentioning(str(ray_temp)) == []
    assert list((tmp_path / "data" / "run").glob("serve-*.json")) == []  # a clean stop leaves no record
