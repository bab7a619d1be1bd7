"""Bookkeeping after a killed driver matches the README: SIGKILL the driver just as a trial starts after an
earlier one finished, before Tune's next snapshot of the experiment, and the next attempt runs that sample
again under a new key. The lost trial keeps a `cancelled` row ("the study's driver died ...") with its MLflow
run's id, that run is KILLED, and progress counts each planned trial once (done never above planned)."""

from __future__ import annotations

import signal
import time

import psutil
import pytest
from mlflow.tracking import MlflowClient

from service.stack.processes import wait_until
from tests.e2e.conftest import study_trials
from tests.e2e.specs import interruptible_study

pytestmark = pytest.mark.slow

TERMINAL = {"succeeded", "failed", "cancelled"}
SPEC = interruptible_study("trial-lost")
# Only each trial's last epoch checkpoints, so Tune snapshots the experiment when a trial ends and otherwise
# every 10 s: a trial that starts right after another ended is in no snapshot for a while.
SPEC["budget"]["checkpoint_every_s"] = 3600


def _driver_processes(study_id: str) -> list[psutil.Process]:
    """The study's driver: `python -m workers.driver --study-id ID`, as the Ray job runs it."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "workers.driver" in cmdline and study_id in cmdline and "-c" not in cmdline:
            found.append(process)
    return found


def _kill_as_a_trial_starts_after_another_ended(service, study_id: str) -> None:
    running_before: set[str] = set()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        drivers = _driver_processes(study_id)
        trials = study_trials(service, study_id)
        running = {t.trial_key for t in trials if t.status == "running"}
        if (
            drivers
            and running_before
            and running - running_before
            and any(t.status == "succeeded" for t in trials)
        ):
            for driver in drivers:
                driver.send_signal(signal.SIGKILL)
            return
        running_before |= running
        time.sleep(0.02)
    pytest.fail(f"study {study_id} never started a trial after one ended:\n{service.log_tail()}")


# Where the kill lands after Tune's snapshot after all (the machine is slow, and Tune snapshots when a trial
# ends), nothing is lost and the scenario did not happen: a new study tries again, up to this many times.
ATTEMPTS_TO_LOSE_A_TRIAL = 3


def _study_whose_driver_is_killed_once(service) -> tuple[dict, list]:  # type: ignore[no-untyped-def]
    """Run one study, SIGKILL its driver as a trial starts after another ended, and check the bookkeeping
    every such study must keep, lost trial or not; returns the study and its trials."""
    with service.client() as client:
        created = client.post("/studies", json=SPEC, headers=service.auth())
        assert created.status_code == 201, created.text
        study_id = created.json()["id"]
        _kill_as_a_trial_starts_after_another_ended(service, study_id)
        deadline = time.monotonic() + 900
        while (study := client.get(f"/studies/{study_id}").json())["status"] not in TERMINAL:
            assert time.monotonic() < deadline, f"study still {study['status']}:\n{service.log_tail()}"
            progress = study["progress"]
            assert progress["done"] <= progress["planned"], progress
            time.sleep(1)

    assert study["status"] == "succeeded", f"{study['error']}\n{service.log_tail()}"
    assert len(study["attempts"]) == 2
    progress = study["progress"]
    assert (progress["done"], progress["succeeded"], progress["cancelled"]) == (progress["planned"],) * 2 + (
        0,
    )
    return study, study_trials(service, study_id)


def test_trials_lost_with_a_killed_driver_keep_a_killed_run_and_are_not_counted_done(running_service):
    service = running_service
    for _ in range(ATTEMPTS_TO_LOSE_A_TRIAL):
        study, trials = _study_whose_driver_is_killed_once(service)
        lost = [t for t in trials if t.status != "succeeded"]
        if lost:
            break
    assert lost, (
        f"no trial was lost in {ATTEMPTS_TO_LOSE_A_TRIAL} studies: Tune snapshotted each new trial first"
    )
    assert all(t.status == "cancelled" and t.error.startswith("the study's driver died") for t in lost), [
        (t.trial_key, t.status, t.error) for t in lost
    ]
    assert len(trials) - len(lost) == study["progress"]["planned"]

    mlflow = MlflowClient(service.mlflow_url)

    def runs():
        return mlflow.search_runs([study["mlflow_experiment_id"]], max_results=500)

    assert wait_until(lambda: all(r.info.status != "RUNNING" for r in runs()), timeout=60, interval=2)
    by_key = {r.data.tags.get("normlab.trial_key"): r for r in runs()}
    assert [(t.trial_key, t.mlflow_run_id) for t in lost] == [
        (t.trial_key, by_key[t.trial_key].info.run_id) for t in lost
    ]
    assert {t.trial_key: by_key[t.trial_key].info.status for t in lost} == {
        t.trial_key: "KILLED" for t in lost
    }
