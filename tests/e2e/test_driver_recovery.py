"""A study outlives its driver: SIGKILL the driver mid-study and the reconcile loop submits a second one,
which restores the study's Tune experiment; the study succeeds with every trial once (the finished ones not
run again) and leaves no MLflow run RUNNING."""

from __future__ import annotations

import signal
import time
from datetime import datetime, timezone

import psutil
import pytest
import sqlalchemy as sa
from mlflow.tracking import MlflowClient

from service.orchestration.dispatcher import submission_id_for
from service.stack.processes import wait_until
from studies.store import TrialEpoch, make_engine, session_scope
from tests.e2e.conftest import study_trials
from tests.e2e.specs import INTERRUPTIBLE_METHODS, INTERRUPTIBLE_SEEDS, interruptible_study

pytestmark = pytest.mark.slow

TERMINAL = {"succeeded", "failed", "cancelled"}
METHODS, SEEDS = INTERRUPTIBLE_METHODS, INTERRUPTIBLE_SEEDS
SPEC = interruptible_study("driver-killed")
STEADY_S = 0.5


def _driver_processes(study_id: str) -> list[psutil.Process]:
    """The study's driver: `python -m workers.driver --study-id ID`, as the Ray job runs it."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "workers.driver" in cmdline and study_id in cmdline and "-c" not in cmdline:
            found.append(process)
    return found


def _checkpoints_recorded(service, study_id: str) -> dict[str, datetime]:
    """When each trial's last checkpointed epoch (1, 2, ...; epoch 0 has no checkpoint) was recorded: the
    driver records it as Tune takes the checkpoint, and Tune snapshots the experiment (what a new driver
    restores) right after every checkpoint."""
    engine = make_engine(service.database_url)
    try:
        with session_scope(engine, readonly=True) as session:
            rows = session.execute(
                sa.select(TrialEpoch.trial_key, sa.func.max(TrialEpoch.recorded_at))
                .where(TrialEpoch.study_id == study_id, TrialEpoch.epoch >= 1)
                .group_by(TrialEpoch.trial_key)
            )
            return {key: _aware(moment) for key, moment in rows}
    finally:
        engine.dispose()


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _kill_mid_study(service, study_id: str) -> dict[str, datetime]:
    """SIGKILL the driver once every running trial has checkpointed an epoch and two trials finished before
    the latest checkpoint (so Tune's last snapshot knows all of them); returns the finished trials' keys ->
    updated_at.

    A trial that starts in the moment before a kill can miss the snapshot; the README says what then
    happens. That moment comes right after a trial ends (Tune starts the next one in its slot), which is
    also when the condition first holds: so the kill waits until the study's trials have kept their
    statuses for STEADY_S, long enough for a trial started meanwhile to show up in the store, and kills
    right after that check.
    """
    drivers: list[psutil.Process] = []
    steady: tuple[list[tuple[str, str]], float] | None = None  # (trial statuses seen, since when)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        drivers = drivers or _driver_processes(study_id)
        trials = study_trials(service, study_id)
        running = [t.trial_key for t in trials if t.status == "running"]
        epochs = _checkpoints_recorded(service, study_id)
        if drivers and running and all(key in epochs for key in running):
            snapshot = max(epochs[key] for key in running)  # the latest checkpoint: Tune snapshotted after it
            done = {
                t.trial_key: t.updated_at
                for t in trials
                if t.status == "succeeded" and t.updated_at < snapshot
            }
            seen = sorted((t.trial_key, t.status) for t in trials)
            if steady is None or steady[0] != seen:
                steady = (seen, time.monotonic())
            elif len(done) >= 2 and time.monotonic() - steady[1] >= STEADY_S:
                for driver in drivers:
                    driver.send_signal(signal.SIGKILL)
                return done
        else:
            steady = None
        time.sleep(0.1)
    pytest.fail(f"study {study_id} never had finished and running trials at once:\n{service.log_tail()}")


def test_a_killed_driver_is_resubmitted_and_the_study_succeeds_with_every_trial_once(running_service):
    service = running_service
    with service.client() as client:
        created = client.post("/studies", json=SPEC, headers=service.auth())
        assert created.status_code == 201, created.text
        study_id = created.json()["id"]
        finished_before = _kill_mid_study(service, study_id)

        deadline = time.monotonic() + 600
        while (study := client.get(f"/studies/{study_id}").json())["status"] not in TERMINAL:
            assert time.monotonic() < deadline, f"study still {study['status']}:\n{service.log_tail()}"
            time.sleep(1)

    assert study["status"] == "succeeded", f"{study['error']}\n{service.log_tail()}"
    first, second = study["attempts"]
    assert first["ray_job_id"] == submission_id_for(study_id, 1) and not first["interrupted"]
    assert "killed by SIGKILL" in first["death_reason"], first["death_reason"]
    assert second["ray_job_id"] == study["ray_job_id"] == submission_id_for(study_id, 2)
    assert second["death_reason"] is None

    trials = study_trials(service, study_id)
    tune = [t for t in trials if t.phase == "tune"]
    final = [t for t in trials if t.phase == "final"]
    # Only the trials that did not succeed, so that pytest does not cut the one that matters off the message.
    assert [(t.trial_key, t.status, t.error) for t in trials if t.status != "succeeded"] == [], (
        service.log_tail()
    )
    assert sorted(t.method for t in tune) == sorted(METHODS * 2)  # num_samples per method, no more
    assert sorted((t.method, t.seed) for t in final) == sorted((m, s) for m in METHODS for s in SEEDS)
    # Finished before the kill, and not run again: their rows were not written since.
    rows = {t.trial_key: t.updated_at for t in trials}
    assert {key: rows[key] for key in finished_before} == finished_before

    mlflow = MlflowClient(service.mlflow_url)

    def runs():
        return mlflow.search_runs([study["mlflow_experiment_id"]], max_results=500)

    assert wait_until(lambda: all(r.info.status != "RUNNING" for r in runs()), timeout=60, interval=2), [
        (r.data.tags.get("normlab.trial_key"), r.info.status) for r in runs() if r.info.status == "RUNNING"
    ]
    children = [r for r in runs() if r.data.tags.get("normlab.role") != "parent"]
    keys = sorted(r.data.tags["normlab.trial_key"] for r in children)
    assert keys == sorted(t.trial_key for t in trials)  # one run per trial, none left over from attempt 1
    assert {t.mlflow_run_id for t in trials} == {r.info.run_id for r in children}
    assert all(r.info.status == "FINISHED" for r in children)
