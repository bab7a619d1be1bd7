"""The trainable under a real local Ray Tune (token auth on) logging to a real MLflow server."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

import workers.trials.trainable as trainable_module
from tests.workers.trials.trial_configs import TINY_TRIAL
from workers.trials.stop import TrialGone, closing_status
from workers.trials.trainable import train_trial, trial_device, trial_num_threads

EPOCHS = 4


def test_outside_a_tune_session_a_trial_runs_on_one_cpu_thread():
    assert trial_device() == "cpu"
    assert trial_num_threads() == 1


class RecordingTracker:
    """Stands in for the MLflow tracker in the tests of run_trial's ordering: it records what it is told."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def start(self, resolve_timeout_s: float) -> None:
        self.events.append("run opened")

    def log_metrics(self, metrics: dict, step: int) -> None:
        self.events.append(f"logged {step}")

    def close(self, status: str) -> None:
        self.events.append(f"run closed {status}")


def _run_trial_with_early_send(
    monkeypatch, *, stop_after: int | None = None, stop: SystemExit | None = None
) -> list[str]:
    """run_trial with a send that returns at once and a settle that answers the last report (Tune's answer),
    stopping the trial after epoch `stop_after` by raising `stop` (Tune's SystemExit(0) by default)."""
    events: list[str] = []
    monkeypatch.setattr(
        trainable_module, "tracker_from_trial_config", lambda config: RecordingTracker(events)
    )
    sent: list[int] = []

    def send(metrics, checkpoint_dir):
        sent.append(metrics["epoch"])
        events.append(f"sent {metrics['epoch']}")

    def settle():
        events.append("settled")
        if sent[-1] == stop_after:
            raise stop if stop is not None else SystemExit(0)

    config = {**TINY_TRIAL, "seed": 0, "study_id": "s", "phase": "final", "trial_key": "s/final/x/seed0"}
    try:
        trainable_module.run_trial(
            config, device="cpu", num_threads=1, restored=None, send=send, settle=settle
        )
    except SystemExit:
        events.append("stopped")
    return events


def test_a_trial_whose_send_returns_early_logs_an_epoch_only_once_the_report_before_it_is_settled(
    monkeypatch,
):
    assert _run_trial_with_early_send(monkeypatch) == [
        "run opened",
        "logged 0", "sent 0", "settled",
        "logged 1", "sent 1", "settled",
        "logged 2", "sent 2", "settled",  # the last report is answered before the run closes
        "run closed FINISHED",
    ]  # fmt: skip


def test_a_stop_answered_to_a_report_ends_the_trial_before_the_next_epoch_is_logged(monkeypatch):
    assert _run_trial_with_early_send(monkeypatch, stop_after=1) == [
        "run opened",
        "logged 0", "sent 0", "settled",
        "logged 1", "sent 1", "settled",  # epoch 2 has trained by now; it is neither logged nor sent
        "run closed FINISHED",
        "stopped",
    ]  # fmt: skip


def test_a_trial_whose_tune_trial_is_gone_closes_its_run_killed_and_a_failed_stop_failed(monkeypatch):
    # KILLED: what MLflow calls a run whose process was stopped from outside, and what the README promises
    # for a trial lost with its killed driver (its warm host stops it with TrialGone).
    gone = _run_trial_with_early_send(monkeypatch, stop_after=0, stop=TrialGone("its Tune trial is gone"))
    assert gone[-2:] == ["run closed KILLED", "stopped"]
    failed = _run_trial_with_early_send(monkeypatch, stop_after=0, stop=SystemExit("some failure"))
    assert failed[-2:] == ["run closed FAILED", "stopped"]


def test_closing_status_names_mlflows_status_for_each_way_a_trial_stops():
    assert closing_status(SystemExit(0)) == closing_status(SystemExit()) == "FINISHED"  # Tune stopped it
    assert closing_status(SystemExit(1)) == closing_status(SystemExit("boom")) == "FAILED"
    assert closing_status(TrialGone("gone")) == "KILLED"


def test_a_trial_checkpoints_on_the_schedule_its_config_names_and_every_epoch_without_one(monkeypatch):
    monkeypatch.setattr(trainable_module, "tracker_from_trial_config", lambda config: None)

    def checkpointed_epochs(**schedule) -> list[int]:
        sent: list[tuple[int, bool]] = []
        trainable_module.run_trial(
            {**TINY_TRIAL, "epochs": 3, "seed": 0, **schedule},
            device="cpu",
            num_threads=1,
            restored=None,
            send=lambda metrics, directory: sent.append((metrics["epoch"], directory is not None)),
        )
        assert [epoch for epoch, _ in sent] == [0, 1, 2, 3]
        return [epoch for epoch, written in sent if written]

    assert checkpointed_epochs() == [1, 2, 3]
    assert checkpointed_epochs(checkpoint_every_s=0) == [1, 2, 3]
    assert checkpointed_epochs(checkpoint_every_s=3600) == [3]


def crash_once_after_epoch_2(config: dict) -> None:
    """train_trial, except that the first attempt dies right after epoch 2 was reported (as a killed process
    would, mid-epoch 3); every report is appended to a log so the test can see what each attempt did."""
    config = dict(config)
    log = Path(config.pop("test_report_log"))
    crash_marker = log.with_suffix(".crashed")
    real_report = trainable_module._report_to_tune

    def report(metrics, checkpoint_dir):
        real_report(metrics, checkpoint_dir)
        with log.open("a") as handle:
            handle.write(f"{metrics['epoch']}\n")
        if metrics["epoch"] == 2 and config["seed"] == 1 and not crash_marker.exists():
            crash_marker.touch()
            raise RuntimeError("simulated crash during epoch 3")

    trainable_module._report_to_tune = report
    try:
        train_trial(config)
    finally:
        trainable_module._report_to_tune = real_report


@pytest.mark.slow
def test_tune_trials_log_one_mlflow_run_each_and_a_crashed_trial_resumes_its_run(
    ray_cluster, mlflow_server, tmp_path
):
    from ray import tune
    from ray._raylet import AuthenticationMode, get_authentication_mode

    assert get_authentication_mode() == AuthenticationMode.TOKEN

    client = MlflowClient(mlflow_server)
    experiment_id = client.create_experiment(f"trainable-{uuid.uuid4().hex[:8]}")
    parent = client.create_run(experiment_id, run_name="study-parent").info.run_id
    param_space = {
        "method": "autonorm_s",
        "dataset": "digits",
        "model": "vit_lite_tiny",
        "knobs": {"t_freeze": 2, "eps_h": 0.0},
        "epochs": EPOCHS,
        "batch_size": 32,
        "lr": 3e-3,
        "warmup_epochs": 1,
        "max_steps_per_epoch": 4,
        "seed": tune.grid_search([0, 1]),
        "study_id": "study-x",
        "phase": "tune",
        "trial_key": tune.sample_from(lambda spec: f"study-x/autonorm_s/seed{spec.config.seed}"),
        "mlflow_tracking_uri": mlflow_server,
        "mlflow_experiment_id": experiment_id,
        "mlflow_parent_run_id": parent,
        "test_report_log": tune.sample_from(lambda spec: str(tmp_path / f"reports-{spec.config.seed}.log")),
    }
    tuner = tune.Tuner(
        tune.with_resources(crash_once_after_epoch_2, {"cpu": 1}),
        param_space=param_space,
        tune_config=tune.TuneConfig(metric="objective", mode="max"),
        run_config=tune.RunConfig(
            name="trainable-test",
            storage_path=str(tmp_path / "ray_results"),
            failure_config=tune.FailureConfig(max_failures=1),
            verbose=0,
        ),
    )
    results = tuner.fit()

    assert results.num_errors == 0
    assert sorted(r.metrics["epoch"] for r in results) == [EPOCHS, EPOCHS]
    for result in results:
        assert result.checkpoint is not None and result.metrics["gates_frozen"] == 1
    assert (tmp_path / "reports-1.crashed").exists()
    # The crashed trial resumed from its epoch-2 checkpoint: no epoch reported twice, none skipped.
    assert (tmp_path / "reports-1.log").read_text().split() == ["0", "1", "2", "3", "4"]
    assert (tmp_path / "reports-0.log").read_text().split() == ["0", "1", "2", "3", "4"]

    children = client.search_runs([experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'")
    assert sorted(run.data.tags["normlab.trial_key"] for run in children) == [
        "study-x/autonorm_s/seed0",
        "study-x/autonorm_s/seed1",
    ]  # exactly one run per trial, the restarted one included
    for run in children:
        tags = run.data.tags
        assert tags["normlab.study_id"] == "study-x" and tags["normlab.method"] == "autonorm_s"
        assert tags["normlab.phase"] == "tune" and tags["normlab.seed"] in {"0", "1"}
        assert run.info.status == "FINISHED"
        assert run.data.params["knobs.t_freeze"] == "2" and run.data.params["epochs"] == str(EPOCHS)
        steps = sorted(m.step for m in client.get_metric_history(run.info.run_id, "objective"))
        assert steps == list(range(EPOCHS + 1))
        assert {"train_loss", "val_accuracy", "gate_entropy_mean", "init_erank_jacobian"} <= set(
            run.data.metrics
        )


def report_pid(config: dict) -> None:
    """train_trial, with each report's process id appended to a log the test reads."""
    config = dict(config)
    log = Path(config.pop("test_report_log"))
    real_report = trainable_module._report_to_tune

    def report(metrics, checkpoint_dir):
        real_report(metrics, checkpoint_dir)
        with log.open("a") as handle:
            handle.write(f"{metrics['epoch']} {os.getpid()}\n")

    trainable_module._report_to_tune = report
    try:
        train_trial(config)
    finally:
        trainable_module._report_to_tune = real_report


@pytest.mark.slow
def test_a_reused_trial_process_runs_each_trial_from_scratch_with_its_own_mlflow_run(
    ray_cluster, mlflow_server, tmp_path
):
    from ray import tune

    client = MlflowClient(mlflow_server)
    experiment_id = client.create_experiment(f"reuse-{uuid.uuid4().hex[:8]}")
    seeds = [0, 1, 2]
    param_space = {
        **TINY_TRIAL,
        "max_steps_per_epoch": 3,
        "seed": tune.grid_search(seeds),
        "study_id": "study-r",
        "phase": "final",
        "trial_key": tune.sample_from(lambda spec: f"study-r/final/frozen_ln/seed{spec.config.seed}"),
        "mlflow_tracking_uri": mlflow_server,
        "mlflow_experiment_id": experiment_id,
        "test_report_log": tune.sample_from(lambda spec: str(tmp_path / f"reports-{spec.config.seed}.log")),
    }
    tuner = tune.Tuner(
        tune.with_resources(report_pid, {"cpu": 2}),  # one slot on the 2-CPU cluster: trials run in turn
        param_space=param_space,
        tune_config=tune.TuneConfig(reuse_actors=True),
        run_config=tune.RunConfig(name="reuse-test", storage_path=str(tmp_path / "ray_results"), verbose=0),
    )
    results = tuner.fit()

    assert results.num_errors == 0
    logs = {seed: (tmp_path / f"reports-{seed}.log").read_text().split("\n")[:-1] for seed in seeds}
    # Every trial started from epoch 0 (none resumed the previous trial's checkpoint) ...
    assert all([line.split()[0] for line in lines] == ["0", "1", "2"] for lines in logs.values())
    # ... in one process, which Tune handed from trial to trial.
    assert len({line.split()[1] for lines in logs.values() for line in lines}) == 1
    runs = client.search_runs([experiment_id])
    assert sorted(run.data.tags["normlab.trial_key"] for run in runs) == [
        f"study-r/final/frozen_ln/seed{seed}" for seed in seeds
    ]
    for run in runs:
        assert run.info.status == "FINISHED" and run.data.params["seed"] == run.data.tags["normlab.seed"]
        steps = sorted(m.step for m in client.get_metric_history(run.info.run_id, "objective"))
        assert steps == [0, 1, 2]
