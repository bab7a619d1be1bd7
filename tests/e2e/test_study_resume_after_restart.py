"""Ctrl-C on `normlab serve` mid-study, then `normlab serve` again: the study is not failed, its driver is
resubmitted as an interrupted attempt, it resumes from its Tune storage and succeeds, and no MLflow run is
left RUNNING."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest
from mlflow.tracking import MlflowClient

from service.stack.processes import http_ok, wait_until
from studies.store import get_study, list_trials, make_engine, session_scope
from tests.e2e.conftest import serve_environment, start_serve
from tests.e2e.specs import INTERRUPTIBLE_METHODS, INTERRUPTIBLE_SEEDS, interruptible_study

pytestmark = pytest.mark.slow

METHODS, SEEDS = INTERRUPTIBLE_METHODS, INTERRUPTIBLE_SEEDS
SPEC = interruptible_study("interrupted-by-ctrl-c")


def _up(process: subprocess.Popen, api: str, log_path: Path) -> None:
    assert wait_until(
        lambda: process.poll() is not None or http_ok(f"{api}/healthz"), timeout=300, interval=1
    )
    assert process.poll() is None, log_path.read_text()[-3000:]


def _ctrl_c(process: subprocess.Popen) -> int:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
    try:
        return process.wait(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        return process.wait(timeout=30)


def _stored(database_url: str, study_id: str):
    engine = make_engine(database_url)
    try:
        with session_scope(engine, readonly=True) as session:
            return get_study(session, study_id=study_id), list_trials(session, study_id=study_id)
    finally:
        engine.dispose()


def test_a_study_running_when_the_stack_stops_resumes_when_it_starts_again(tmp_path):
    data_dir = tmp_path / "data"
    ray_temp = Path("/tmp") / f"nl-resume-{uuid.uuid4().hex[:6]}"
    env = serve_environment(data_dir, ray_temp)
    api = f"http://127.0.0.1:{env['NORMLAB_API_PORT']}"
    database_url = f"sqlite:///{data_dir / 'normlab.db'}"
    headers = {"Authorization": f"Bearer {env['NORMLAB_API_TOKEN']}"}

    first_log = tmp_path / "serve-1.log"
    first = start_serve(env, first_log)
    try:
        _up(first, api, first_log)
        created = httpx.post(f"{api}/studies", json=SPEC, headers=headers, timeout=30)
        assert created.status_code == 201, created.text
        study_id = created.json()["id"]

        def mid_study() -> bool:
            _, trials = _stored(database_url, study_id)
            return sum(t.status == "succeeded" for t in trials) >= 1 and any(
                t.status == "running" for t in trials
            )

        assert wait_until(mid_study, timeout=600, interval=0.5), first_log.read_text()[-3000:]
    finally:
        assert _ctrl_c(first) == 0, first_log.read_text()[-3000:]

    study, _ = _stored(database_url, study_id)
    assert study.status == "running", study.error  # stopped with the stack, not failed by it

    second_log = tmp_path / "serve-2.log"
    second = start_serve(env, second_log)
    try:
        _up(second, api, second_log)
        deadline = time.monotonic() + 600
        while (body := httpx.get(f"{api}/studies/{study_id}", timeout=30).json())["status"] == "running":
            assert time.monotonic() < deadline, second_log.read_text()[-3000:]
            time.sleep(1)
        assert body["status"] == "succeeded", f"{body['error']}\n{second_log.read_text()[-3000:]}"
        interrupted, resumed = body["attempts"]
        assert interrupted["interrupted"] and "unknown to the cluster" in interrupted["death_reason"]
        assert (resumed["interrupted"], resumed["death_reason"]) == (False, None)

        _, trials = _stored(database_url, study_id)
        final = [t for t in trials if t.phase == "final"]
        tune_done = [t for t in trials if t.phase == "tune" and t.status == "succeeded"]
        assert sorted((t.method, t.seed) for t in final) == sorted((m, s) for m in METHODS for s in SEEDS)
        assert all(t.status == "succeeded" for t in final)
        assert sorted(t.method for t in tune_done) == sorted(METHODS * 2)
        # A tuning trial that started just before the stop may have missed Tune's last snapshot: it was
        # run again under a new key, and its own row ended with the driver (see the README).
        assert all("driver died" in (t.error or "") for t in trials if t.status != "succeeded"), [
            (t.trial_key, t.status, t.error) for t in trials
        ]

        mlflow = MlflowClient(f"http://127.0.0.1:{env['NORMLAB_MLFLOW_PORT']}")

        def running_runs() -> list[str]:
            runs = mlflow.search_runs([body["mlflow_experiment_id"]], max_results=500)
            return [r.info.run_id for r in runs if r.info.status == "RUNNING"]

        assert wait_until(lambda: not running_runs(), timeout=60, interval=2), running_runs()
    finally:
        _ctrl_c(second)
        shutil.rmtree(ray_temp, ignore_errors=True)
