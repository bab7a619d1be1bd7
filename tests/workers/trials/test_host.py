"""A warm trial host trains the trials its relays hand it, one at a time, waiting for each report to be
taken (or, for a trial no scheduler can stop early, training its next epoch meanwhile); it stops a trial
when told to, or when the relay that handed it over is gone, and then takes the next one (the host is
driven here in-process, as its relays drive it through Ray)."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from service.stack.processes import wait_until
from tests.workers.trials.trial_configs import TINY_TRIAL
from workers.training import CHECKPOINT_FILE, load_checkpoint
from workers.training.loop import TrainingRun
from workers.trials.host import CLAIM_START_S, HostEvent, TrialHost, process_started_at

CONFIG = {
    **TINY_TRIAL,
    "epochs": 3,
    "seed": 0,
    "study_id": "study-h",
    "phase": "final",
    "trial_key": "study-h/final/frozen_ln/seed0",
}


@pytest.fixture(scope="module")
def host() -> TrialHost:
    return TrialHost(idle_exit_s=0)


def _start(
    host: TrialHost,
    token: str,
    config: dict = CONFIG,
    *,
    relay_pid: int | None = None,
    train_ahead: bool = False,
    checkpoint_every_s: float = 0.0,
) -> None:
    pid = os.getpid() if relay_pid is None else relay_pid
    assert host.claim(token)
    host.start(token, dict(config), None, 1, pid, process_started_at(pid), train_ahead, checkpoint_every_s)


def _next(host: TrialHost, token: str) -> HostEvent:
    deadline = time.monotonic() + 120
    while (event := host.next_event(token, 1.0)).kind == "waiting":
        assert time.monotonic() < deadline, "the host sent nothing for two minutes"
    return event


def _wait_until_free(host: TrialHost) -> None:
    deadline = time.monotonic() + 60
    while host.state()["busy"]:
        assert time.monotonic() < deadline, "the host never became free"
        time.sleep(0.2)


def test_a_trial_reports_every_epoch_and_waits_for_each_to_be_taken(host):
    _start(host, "whole")
    epochs = []
    while (event := _next(host, "whole")).kind == "report":
        epochs.append(event.metrics["epoch"])
        # Until resumed, the trial stays at this report: nothing further arrives.
        assert host.next_event("whole", 0.3).kind == "waiting"
        assert (event.checkpoint_dir is None) == (event.metrics["epoch"] == 0)
        host.resume("whole", False)
    assert event.kind == "finished"
    assert epochs == [0, 1, 2, 3]


def test_a_trial_checkpoints_on_the_interval_the_relay_names():
    host = TrialHost(idle_exit_s=0)  # its own: the module's host counts the trials of the other tests
    _start(host, "sparse", checkpoint_every_s=3600.0)
    checkpointed = []
    while (event := _next(host, "sparse")).kind == "report":
        checkpointed.append(event.checkpoint_dir is not None)
        host.resume("sparse", False)
    assert event.kind == "finished"
    assert checkpointed == [False, False, False, True]  # epochs 0..3: only the last one


def test_a_busy_host_refuses_a_second_claim_and_takes_the_next_trial_once_free(host):
    _start(host, "first")
    assert not host.claim("second")
    assert _next(host, "first").kind == "report"
    host.resume("first", True)  # Tune stopped it (ASHA): the trial ends at once, closed as finished
    assert _next(host, "first").kind == "finished"
    _wait_until_free(host)
    assert host.claim("second")
    host.start("second", dict(CONFIG), None, 1, os.getpid(), process_started_at(os.getpid()))
    assert _next(host, "second").metrics["epoch"] == 0
    host.resume("second", True)
    assert _next(host, "second").kind == "finished"
    _wait_until_free(host)
    host._current = None  # release the claim the wait took


def test_a_trial_whose_relay_is_gone_stops_at_its_next_report_and_frees_the_host(host):
    dead = subprocess.Popen(["true"])  # a process that has exited: a dead relay
    dead.wait()
    assert host.claim("orphan")
    host.start("orphan", dict(CONFIG), None, 1, dead.pid, 1.0)  # no such process (or not that one)
    assert _next(host, "orphan").kind == "report"  # nobody will resume it
    _wait_until_free(host)
    assert host.next_event("orphan", 0.1).kind == "failed"  # forgotten: no relay will ask for it


def test_a_trial_whose_relay_is_gone_closes_its_mlflow_run_killed(mlflow_server):
    # A killed driver takes its Tune trials (the relays) with it; the host goes on training until it sees
    # that. The README says a trial lost with its driver keeps a KILLED run (MLflow's "stopped from outside").
    host = TrialHost(idle_exit_s=0)  # its own: the module's host counts the trials of the other tests
    client = MlflowClient(mlflow_server)
    experiment_id = client.create_experiment(f"orphan-{uuid.uuid4().hex[:8]}")
    dead = subprocess.Popen(["true"])
    dead.wait()
    config = {**CONFIG, "mlflow_tracking_uri": mlflow_server, "mlflow_experiment_id": experiment_id}
    assert host.claim("orphan-tracked")
    host.start("orphan-tracked", config, None, 1, dead.pid, 1.0)
    assert _next(host, "orphan-tracked").kind == "report"
    _wait_until_free(host)

    def statuses() -> list[tuple[str, str]]:
        return [
            (r.data.tags["normlab.trial_key"], r.info.status) for r in client.search_runs([experiment_id])
        ]

    # The tracker closes the run in the background when MLflow is slow (a busy test machine).
    assert wait_until(lambda: statuses() == [(CONFIG["trial_key"], "KILLED")], timeout=60, interval=0.5), (
        statuses()
    )


def test_a_claim_never_started_expires(host, monkeypatch):
    assert host.claim("abandoned")
    assert not host.claim("next")
    monkeypatch.setattr(
        "workers.trials.host.time.monotonic", lambda: time.perf_counter() + CLAIM_START_S + 1e6
    )
    assert host.claim("next")
    monkeypatch.undo()
    host.release("next")
    assert not host.state()["busy"]


def test_a_failing_trial_hands_its_error_to_the_relay_with_the_hosts_traceback(host):
    _start(host, "broken", {**CONFIG, "lr": -1.0})
    event = _next(host, "broken")
    assert event.kind == "failed" and isinstance(event.error, ValueError)
    assert any("on its warm trial host" in note for note in getattr(event.error, "__notes__", []))
    _wait_until_free(host)


def test_the_host_counts_the_trials_it_trained(host):
    assert host.state() == {"pid": os.getpid(), "busy": False, "trials": 5}


def _epochs_trained(monkeypatch) -> list[int]:
    """The epochs the host's trials finish training, in order, as they finish."""
    trained: list[int] = []
    real = TrainingRun.train_one_epoch

    def train_one_epoch(run: TrainingRun) -> dict:
        metrics = real(run)
        trained.append(metrics["epoch"])
        return metrics

    monkeypatch.setattr(TrainingRun, "train_one_epoch", train_one_epoch)
    return trained


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def test_a_trial_that_trains_ahead_trains_its_next_epoch_while_tune_takes_its_report(host, monkeypatch):
    trained = _epochs_trained(monkeypatch)
    _start(host, "ahead", train_ahead=True)
    for epoch in range(CONFIG["epochs"] + 1):
        event = _next(host, "ahead")
        assert event.kind == "report" and event.metrics["epoch"] == epoch
        if epoch < CONFIG["epochs"]:
            _wait_for(
                lambda e=epoch + 1: e in trained, f"epoch {epoch + 1} trained while report {epoch} waited"
            )
            # ...but it is neither reported nor checkpointed before Tune's answer.
            assert host.next_event("ahead", 0.2).kind == "waiting"
            if event.checkpoint_dir is not None:
                assert load_checkpoint(Path(event.checkpoint_dir) / CHECKPOINT_FILE)["epoch"] == epoch
        host.resume("ahead", False)
    assert _next(host, "ahead").kind == "finished"
    assert trained == [1, 2, 3]
    _wait_until_free(host)


def test_a_trial_that_does_not_train_ahead_trains_nothing_while_its_report_waits(host, monkeypatch):
    trained = _epochs_trained(monkeypatch)
    _start(host, "in-step")
    assert _next(host, "in-step").metrics["epoch"] == 0
    time.sleep(0.5)  # a tiny epoch takes a fraction of this
    assert trained == []
    host.resume("in-step", True)
    assert _next(host, "in-step").kind == "finished"
    _wait_until_free(host)


def test_a_stop_while_training_ahead_ends_the_trial_without_reporting_the_epoch_trained_ahead(
    host, monkeypatch
):
    trained = _epochs_trained(monkeypatch)
    _start(host, "stopped-ahead", train_ahead=True)
    assert _next(host, "stopped-ahead").metrics["epoch"] == 0
    host.resume("stopped-ahead", False)
    assert _next(host, "stopped-ahead").metrics["epoch"] == 1
    _wait_for(lambda: 2 in trained, "epoch 2 trained while report 1 waited")
    host.resume("stopped-ahead", True)  # Tune stopped the trial after epoch 1 (a cancelled study)
    assert _next(host, "stopped-ahead").kind == "finished"
    assert trained == [1, 2]
    _wait_until_free(host)
