"""A study cancelled at any moment after its driver starts, its first seconds included (ray.init, the trial
hosts, the MLflow experiment and parent run, the first trials), leaves no MLflow run RUNNING once its Ray
job has stopped: on the real stack (`normlab serve`: Ray head, MLflow server, API, reconcile loop).

Ray stops a job with SIGTERM and, 3 s later, SIGKILL; the driver closes its parent run on SIGTERM, and the
reconcile loop closes whatever is left in the experiment the database names, which the driver records
before it creates any run there (tests/workers/driver/test_driver_stop.py stops it at every MLflow request).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml
from mlflow.entities import Run, ViewType
from mlflow.tracking import MlflowClient
from sqlalchemy.engine import Engine

from service.orchestration.dispatcher import RayJobDispatcher
from service.stack.processes import wait_until
from studies.store import get_study, make_engine, session_scope
from workers.driver.parent_run import experiment_name

pytestmark = pytest.mark.slow

QUICK = Path(__file__).resolve().parents[2] / "studies" / "examples" / "quick.yaml"
# Seconds after the driver process appears (ray.init, the trial hosts, the MLflow experiment and parent run
# about 2.5-4 s in on a busy 2-core machine: where the leak was seen, then the first trials).
CANCEL_DELAYS_S = (0.0, 0.5, 1.0, 2.0, 3.0)
# And the moments of that window themselves, whatever the machine's speed: as soon as MLflow shows them.
CANCEL_MILESTONES = ("experiment", "parent run", "trial run")


@dataclass(frozen=True)
class Stack:
    service: Any
    client: httpx.Client
    engine: Engine
    ray_jobs: RayJobDispatcher
    mlflow: MlflowClient


def _driver_started(study_id: str) -> bool:
    """The study's Ray job runs `python -m workers.driver --study-id ID` (which may hand the study to the
    warm driver server)."""
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "workers.driver" in cmdline and study_id in cmdline:
            return True
    return False


def _study_runs(mlflow: MlflowClient, study_name: str, study_id: str) -> list[Run]:
    """The study's runs, found through its experiment's name (not the database, which may not know it)."""
    experiment = mlflow.get_experiment_by_name(experiment_name(study_name, study_id))
    if experiment is None:
        return []
    return mlflow.search_runs([experiment.experiment_id], run_view_type=ViewType.ALL, max_results=500)


def _reached(stack: Stack, study_name: str, study_id: str, moment: str | float) -> Callable[[], bool]:
    """Whether the study's driver has reached `moment`: a milestone that MLflow shows, or seconds after the
    driver process appeared (that wait is done here, once the process is seen)."""
    if isinstance(moment, float):

        def after_start() -> bool:
            if not _driver_started(study_id):
                return False
            time.sleep(moment)
            return True

        return after_start
    if moment == "experiment":
        return lambda: stack.mlflow.get_experiment_by_name(experiment_name(study_name, study_id)) is not None
    role = "parent" if moment == "parent run" else None
    return lambda: any(
        r.data.tags.get("normlab.role") == role for r in _study_runs(stack.mlflow, study_name, study_id)
    )


def _cancel_at(stack: Stack, moment: str | float) -> list[tuple[str, str]]:
    """Submit a study, cancel it at `moment`, and return (role, run id) of its MLflow runs still RUNNING once
    its Ray job has stopped and the reconcile loop has closed what it found."""
    spec = yaml.safe_load(QUICK.read_text())
    spec["name"] = f"cancel-at-{moment}".replace(" ", "-")
    spec["budget"]["epochs"] = 50  # far from done when cancelled
    created = stack.client.post("/studies", json=spec, headers=stack.service.auth())
    assert created.status_code == 201, created.text
    study_id = created.json()["id"]
    reached = _reached(stack, spec["name"], study_id, moment)
    assert wait_until(reached, timeout=300, interval=0.02), stack.service.log_tail()
    cancelled = stack.client.post(f"/studies/{study_id}/cancel", headers=stack.service.auth())
    assert cancelled.status_code == 200, cancelled.text

    def closed() -> bool:
        with session_scope(stack.engine, readonly=True) as session:
            study = get_study(session, study_id=study_id)
        return study.mlflow_closed_at is not None and stack.ray_jobs.state(str(study.ray_job_id)).terminal

    assert wait_until(closed, timeout=180, interval=0.5), stack.service.log_tail()
    return [
        (r.data.tags.get("normlab.role", "trial"), r.info.run_id)
        for r in _study_runs(stack.mlflow, spec["name"], study_id)
        if r.info.status == "RUNNING"
    ]


def test_a_study_cancelled_at_any_moment_after_its_driver_starts_leaves_no_running_mlflow_run(
    running_service,
):
    token = (running_service.data_dir / "ray_auth_token").read_text().strip()
    engine = make_engine(running_service.database_url)
    moments: list[str | float] = [*CANCEL_DELAYS_S, *CANCEL_MILESTONES]
    try:
        with running_service.client() as client:
            stack = Stack(
                service=running_service,
                client=client,
                engine=engine,
                ray_jobs=RayJobDispatcher(dashboard_url=running_service.ray_dashboard_url, auth_token=token),
                mlflow=MlflowClient(running_service.mlflow_url),
            )
            left_running = {moment: _cancel_at(stack, moment) for moment in moments}
    finally:
        engine.dispose()
    assert left_running == {moment: [] for moment in moments}
