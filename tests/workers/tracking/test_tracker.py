import time
import uuid
from types import SimpleNamespace

import pytest
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from workers.tracking.tracker import (
    TrialTracker,
    finalize_trial_run,
    tracker_from_trial_config,
    trial_params,
    trial_tags,
)

TRIAL = {
    "method": "autonorm_s",
    "dataset": "digits",
    "seed": 3,
    "knobs": {"tau": 0.5, "t_freeze": 2},
    "lr": 1e-3,
    "study_id": "study-1",
    "phase": "tune",
    "trial_key": "study-1/autonorm_s/3",
    "mlflow_tracking_uri": "http://127.0.0.1:1",
    "mlflow_experiment_id": "7",
    "mlflow_parent_run_id": "parent-run",
}


def test_trial_tags_follow_the_architecture_contract():
    tags = trial_tags(TRIAL)
    assert tags["normlab.study_id"] == "study-1"
    assert tags["normlab.method"] == "autonorm_s"
    assert tags["normlab.seed"] == "3"
    assert tags["normlab.phase"] == "tune"
    assert tags["normlab.trial_key"] == "study-1/autonorm_s/3"
    assert tags["mlflow.parentRunId"] == "parent-run"


def test_params_are_flattened_hyperparameters_without_wiring():
    params = trial_params(TRIAL)
    assert params["knobs.tau"] == "0.5" and params["lr"] == "0.001"
    assert not {"trial_key", "mlflow_tracking_uri", "study_id"} & set(params)


def test_no_tracker_without_a_tracking_uri():
    assert tracker_from_trial_config({**TRIAL, "mlflow_tracking_uri": None}) is None


class FlakyClient:
    """An in-memory stand-in for MlflowClient whose log_batch fails while `down` is True."""

    def __init__(self):
        self.down = False
        self.runs = {}
        self.metrics = []
        self.calls = 0

    def search_runs(self, experiment_ids, filter_string, **kwargs):
        if self.down:
            raise ConnectionError("server down")
        return [run for run in self.runs.values() if filter_string.endswith(f"'{run.key}'")]

    def create_run(self, experiment_id, tags, run_name):
        run = SimpleNamespace(
            key=tags["normlab.trial_key"],
            info=SimpleNamespace(run_id=uuid.uuid4().hex, status="RUNNING"),
            data=SimpleNamespace(params={}),
        )
        self.runs[run.info.run_id] = run
        return run

    def log_batch(self, run_id, metrics=(), params=(), synchronous=None):
        self.calls += 1
        if self.down:
            raise ConnectionError("server down")
        self.metrics.extend(metrics)
        self.runs[run_id].data.params.update({p.key: p.value for p in params})

    def get_metric_history(self, run_id, key):
        return [m for m in self.metrics if m.key == key]

    def update_run(self, run_id, status):
        self.runs[run_id].info.status = status

    def set_terminated(self, run_id, status):
        self.runs[run_id].info.status = status


def test_a_tracking_outage_keeps_the_batch_and_delivers_it_after_recovery(caplog):
    client = FlakyClient()
    tracker = TrialTracker(
        tracking_uri=None, experiment_id="1", trial_key="k", client=client, flush_interval_s=60
    )
    tracker.start()
    client.down = True
    tracker.log_metrics({"objective": 0.5, "train_loss": 1.0}, step=1)
    started = time.monotonic()
    assert tracker.flush(timeout_s=5) is False  # reported, not raised
    assert time.monotonic() - started < 5
    assert "MLflow unreachable" in caplog.text
    client.down = False
    tracker.log_metrics({"objective": 0.6}, step=2)
    assert tracker.flush(timeout_s=5) is True
    assert sorted((m.key, m.step) for m in client.metrics) == [
        ("objective", 1),
        ("objective", 2),
        ("train_loss", 1),
    ]
    assert tracker.close("FINISHED")
    assert client.runs[tracker.run_id].info.status == "FINISHED"


def test_a_server_down_at_trial_start_only_delays_the_run():
    client = FlakyClient()
    client.down = True
    tracker = TrialTracker(
        tracking_uri=None, experiment_id="1", trial_key="k", client=client, flush_interval_s=60
    )
    tracker.start(resolve_timeout_s=2)
    assert tracker.run_id is None
    tracker.log_metrics({"objective": 1.0}, step=1)
    client.down = False
    assert tracker.close("FINISHED")
    assert tracker.run_id is not None and [m.step for m in client.metrics] == [1]


def test_log_metrics_only_enqueues_and_skips_non_numbers():
    client = FlakyClient()
    tracker = TrialTracker(
        tracking_uri=None, experiment_id="1", trial_key="k", client=client, flush_interval_s=60
    )
    tracker.start()
    calls = client.calls
    for step in range(50):
        tracker.log_metrics({"objective": 0.1, "note": "text", "frozen": True}, step=step)
    assert client.calls == calls  # nothing sent from the training thread
    tracker.close()
    assert {m.key for m in client.metrics} == {"objective", "frozen"}
    assert len(client.metrics) == 100


def test_a_restarted_tracker_continues_the_run_and_logs_each_epoch_once():
    client = FlakyClient()
    first = TrialTracker(
        tracking_uri=None, experiment_id="1", trial_key="k", client=client, params={"lr": "1"}
    )
    first.start()
    for epoch in range(3):
        first.log_metrics({"objective": float(epoch)}, step=epoch)
    first.close("FAILED")
    second = TrialTracker(
        tracking_uri=None, experiment_id="1", trial_key="k", client=client, params={"lr": "1"}
    )
    second.start()
    second.backfill([{"epoch": e, "objective": float(e)} for e in range(4)])
    for epoch in (2, 3, 4):  # 2 is recomputed after the restart, 3 came back through backfill
        second.log_metrics({"objective": float(epoch)}, step=epoch)
    second.close("FINISHED")
    assert second.run_id == first.run_id and len(client.runs) == 1
    assert sorted(m.step for m in client.metrics if m.key == "objective") == [0, 1, 2, 3, 4]
    assert client.runs[first.run_id].info.status == "FINISHED"


def test_a_continued_run_skips_epochs_that_the_attempt_before_delivers_after_the_run_was_found():
    client = FlakyClient()
    first = TrialTracker(tracking_uri=None, experiment_id="1", trial_key="k", client=client)
    first.start()
    first.log_metrics({"objective": 0.0}, step=0)
    assert first.flush()
    second = TrialTracker(tracking_uri=None, experiment_id="1", trial_key="k", client=client)
    second.start()  # finds the run holding epoch 0
    # Epochs 1 and 2 of the first attempt arrive only now (its journal delivered late, say) ...
    client.log_batch(first.run_id, metrics=[Metric("objective", float(e), 0, e) for e in (1, 2)])
    for epoch in (1, 2, 3):  # ... while the second recomputes them from its checkpoint of epoch 0
        second.log_metrics({"objective": float(epoch)}, step=epoch)
    second.close("FINISHED")
    assert sorted(m.step for m in client.metrics if m.key == "objective") == [0, 1, 2, 3]


def test_finalize_completes_a_run_whose_trial_was_stopped_before_its_tracker_closed():
    client = FlakyClient()
    tracker = TrialTracker(tracking_uri=None, experiment_id="1", trial_key="k", client=client)
    tracker.start()
    tracker.log_metrics({"epoch": 0, "objective": 0.0}, step=0)
    tracker.flush()  # epoch 1 was queued but the actor died: neither it nor the status reached MLflow
    history = [{"epoch": 0, "objective": 0.0}, {"epoch": 1, "objective": 0.5, "note": "x"}]
    run_id = finalize_trial_run(client, "1", "k", history=history)
    assert run_id == tracker.run_id and client.runs[run_id].info.status == "FINISHED"
    assert sorted((m.key, m.step) for m in client.metrics) == [
        ("epoch", 0), ("epoch", 1), ("objective", 0), ("objective", 1),
    ]  # fmt: skip
    finalize_trial_run(client, "1", "k", history=history)  # a second call changes nothing
    assert len(client.metrics) == 4
    assert finalize_trial_run(client, "1", "never-started", history=history) is None


@pytest.mark.slow
def test_real_server_gets_one_run_per_trial_key_and_a_resumed_tracker_continues_it(mlflow_server):
    client = MlflowClient(mlflow_server)
    experiment_id = client.create_experiment(f"tracking-{uuid.uuid4().hex[:8]}")
    parent = client.create_run(experiment_id, run_name="study").info.run_id
    config = {
        **TRIAL,
        "mlflow_tracking_uri": mlflow_server,
        "mlflow_experiment_id": experiment_id,
        "mlflow_parent_run_id": parent,
    }

    first = tracker_from_trial_config(config).start()
    assert first.created_run
    for epoch in range(3):
        first.log_metrics({"epoch": epoch, "objective": 0.1 * epoch}, step=epoch)
    # The process "dies" after epoch 2 was queued but before it was delivered: simulate by not closing.
    assert first.flush()

    second = tracker_from_trial_config(config).start()
    assert second.run_id == first.run_id and not second.created_run
    second.backfill([{"epoch": e, "objective": 0.1 * e} for e in range(5)])
    second.log_metrics({"epoch": 2, "objective": 0.2}, step=2)  # an epoch recomputed after the restart
    second.log_metrics({"epoch": 5, "objective": 0.5}, step=5)
    assert second.close("FINISHED")

    runs = client.search_runs(
        [experiment_id], filter_string="tags.`normlab.trial_key` = 'study-1/autonorm_s/3'"
    )
    assert len(runs) == 1
    run = client.get_run(first.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["mlflow.parentRunId"] == parent
    assert run.data.params["knobs.tau"] == "0.5"
    steps = [m.step for m in client.get_metric_history(first.run_id, "objective")]
    assert sorted(steps) == [0, 1, 2, 3, 4, 5]  # backfill added 3 and 4; the recomputed 2 is not doubled


class SlowClient(FlakyClient):
    """FlakyClient whose run lookup takes `delay_s`, as a busy tracking server does."""

    def __init__(self, delay_s: float):
        super().__init__()
        self.delay_s = delay_s

    def search_runs(self, experiment_ids, filter_string, **kwargs):
        time.sleep(self.delay_s)
        return super().search_runs(experiment_ids, filter_string, **kwargs)


def test_a_start_that_does_not_wait_returns_at_once_and_the_thread_creates_the_run_meanwhile():
    client = SlowClient(delay_s=0.5)
    tracker = TrialTracker(
        tracking_uri=None, experiment_id="1", trial_key="k", client=client, flush_interval_s=60
    )
    started = time.monotonic()
    tracker.start(resolve_timeout_s=0)
    assert time.monotonic() - started < 0.25  # the trial goes on loading its data and model
    deadline = time.monotonic() + 5
    while tracker.run_id is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tracker.run_id is not None and tracker.created_run  # created without any flush or metric
    tracker.log_metrics({"objective": 0.5}, step=0)
    assert tracker.close("FINISHED")
    assert len(client.runs) == 1 and client.runs[tracker.run_id].info.status == "FINISHED"
    assert [(m.key, m.step) for m in client.metrics] == [("objective", 0)]
