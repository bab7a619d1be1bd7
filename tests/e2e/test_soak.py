"""Soak: a few small studies back to back through the real stack while it is broken on purpose.

In every study one trial process is SIGKILLed (a seeded random choice of process and moment, once a trial
runs); in the second, the kill falls inside an MLflow outage (SIGSTOP on the server's process group) longer
than a trial's tracking close may wait. At the end every study has succeeded with every trial once in the database and
once in MLflow, no MLflow run is left RUNNING, and the API process has not grown past a stated bound.

Bounded: STUDIES grid studies of four one-epoch trials on digits within SOAK_BUDGET_S together (measured on
2 busy cores: 95 to 160 s, plus about 45 s to start the stack).
"""

from __future__ import annotations

import random
import time

import psutil
import pytest
from mlflow.tracking import MlflowClient

from service.stack.processes import wait_until
from tests.e2e.conftest import (
    RunningService,
    mlflow_process_group,
    paused_process_group,
    study_trials,
    trial_processes,
)
from tests.e2e.specs import GRID_METHODS, GRID_SEEDS, two_method_grid
from workers.tracking.tracker import CLOSE_TIMEOUT_S

pytestmark = pytest.mark.slow

SEED = 20261201
STUDIES = 3
PAUSED_STUDY = 1  # the second study runs through the MLflow outage
OUTAGE_S = CLOSE_TIMEOUT_S + 3.0
SOAK_BUDGET_S = 240.0  # every study started, broken and finished within this
TERMINAL = {"succeeded", "failed", "cancelled"}
METHODS, SEEDS = GRID_METHODS, GRID_SEEDS
# The API process may hold more after the last study than after the first by at most this much: per-study
# state that is never released (sessions, engines, clients, results caches) shows as steady growth.
RSS_GROWTH_BOUND_MIB = 64.0
SETTLE_S = 5.0  # reconcile-loop ticks (NORMLAB_POLL_INTERVAL_S is 1 s here) after a study ends


def soak_spec(index: int) -> dict:
    return two_method_grid(
        f"soak-{index}",
        epochs=1,
        batch_size=32,
        resources={"cpu": 1, "gpu": 0},
        max_failures=3,  # a killed trial is retried, not failed
    )


def _wait_for_a_running_trial(
    service: RunningService, study_id: str, deadline: float
) -> list[psutil.Process]:
    """The stack's trial processes, once the study has a trial running in one of them."""
    while time.monotonic() < deadline:
        processes = trial_processes(service)
        if processes and any(t.status == "running" for t in study_trials(service, study_id)):
            return processes
        time.sleep(0.2)
    pytest.fail(f"study {study_id} never ran a trial:\n{service.log_tail()}")


def _kill_a_trial_process(service: RunningService, study_id: str, rng: random.Random, deadline: float) -> str:
    processes = _wait_for_a_running_trial(service, study_id, deadline)
    time.sleep(rng.uniform(0.0, 1.0))  # somewhere inside the trial, not always at its start
    victim = rng.choice(sorted(processes, key=lambda p: p.pid))
    try:
        described = " ".join(victim.cmdline())[:80]
        victim.kill()
    except psutil.NoSuchProcess:  # it ended in the moment between listing and killing
        return "gone before the kill"
    return f"SIGKILL {victim.pid} ({described})"


def _wait_for_study(service: RunningService, study_id: str, deadline: float) -> dict:
    with service.client() as client:
        while (study := client.get(f"/studies/{study_id}").json())["status"] not in TERMINAL:
            assert time.monotonic() < deadline, f"study still {study['status']}:\n{service.log_tail()}"
            time.sleep(1)
    return study


def _api_rss_mib(service: RunningService) -> float:
    """RSS of the process serving the API (`normlab serve` runs uvicorn in the launcher's own process), once
    the reconcile loop has done its after-study work (closing the study's MLflow runs imports MLflow into
    the API process on the first study's end: a one-time ~90 MiB that is no growth)."""
    time.sleep(SETTLE_S)
    return psutil.Process(service.process.pid).memory_info().rss / 2**20


def test_studies_back_to_back_survive_trial_kills_and_an_mlflow_outage_with_every_trial_once(
    running_service, record_property
):
    service = running_service
    rng = random.Random(SEED)
    started = time.monotonic()
    deadline = started + SOAK_BUDGET_S
    studies: list[dict] = []
    events: list[str] = []
    rss: list[float] = []
    for index in range(STUDIES):
        with service.client() as client:
            created = client.post("/studies", json=soak_spec(index), headers=service.auth())
        assert created.status_code == 201, created.text
        study_id = created.json()["id"]
        if index == PAUSED_STUDY:
            # The kill falls inside the outage: the killed trial's journal reaches MLflow only afterwards.
            _wait_for_a_running_trial(service, study_id, deadline)
            with paused_process_group(mlflow_process_group(service), OUTAGE_S):
                events.append(f"study {index}: MLflow paused {OUTAGE_S:g} s")
                events.append(f"study {index}: {_kill_a_trial_process(service, study_id, rng, deadline)}")
        else:
            events.append(f"study {index}: {_kill_a_trial_process(service, study_id, rng, deadline)}")
        studies.append(_wait_for_study(service, study_id, deadline))
        rss.append(_api_rss_mib(service))
    elapsed = time.monotonic() - started
    record_property("soak_wall_s", round(elapsed, 1))
    record_property("api_rss_mib", [round(r, 1) for r in rss])
    print(f"soak: {elapsed:.0f} s; API RSS after each study (MiB): {[round(r) for r in rss]}; {events}")

    for study in studies:
        assert study["status"] == "succeeded", f"{study['name']}: {study.get('error')}\n{service.log_tail()}"

    mlflow = MlflowClient(service.mlflow_url)
    for study in studies:
        trials = study_trials(service, study["id"])
        keys = sorted(t.trial_key for t in trials)
        assert len(keys) == len(METHODS) * len(SEEDS) and len(set(keys)) == len(keys), keys
        assert all(t.status == "succeeded" and t.mlflow_run_id for t in trials), [
            (t.trial_key, t.status, t.error) for t in trials
        ]

        def runs(study=study):
            return mlflow.search_runs([study["mlflow_experiment_id"]], max_results=500)

        # Journals from the outage reach MLflow in the background; nothing may stay RUNNING.
        assert wait_until(lambda: all(r.info.status != "RUNNING" for r in runs()), timeout=60, interval=2), [
            (r.data.tags.get("normlab.trial_key"), r.info.status)
            for r in runs()
            if r.info.status == "RUNNING"
        ]
        children = [r for r in runs() if r.data.tags.get("normlab.role") != "parent"]
        parents = [r for r in runs() if r.data.tags.get("normlab.role") == "parent"]
        assert [p.info.run_id for p in parents] == [study["mlflow_parent_run_id"]]
        assert sorted(r.data.tags["normlab.trial_key"] for r in children) == keys  # one run per trial
        assert {t.mlflow_run_id for t in trials} == {r.info.run_id for r in children}
        assert all(r.info.status == "FINISHED" for r in children)

    growth = rss[-1] - rss[0]
    assert growth < RSS_GROWTH_BOUND_MIB, f"API RSS grew {growth:.0f} MiB over {STUDIES} studies: {rss}"
