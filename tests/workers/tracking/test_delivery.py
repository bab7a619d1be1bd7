"""Delivering the spool, against an in-memory stand-in for MlflowClient (the real server: test_tracking_outage)."""

import os
import uuid
from types import SimpleNamespace

import pytest
from mlflow.entities import Metric
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

from workers.tracking.delivery import deliver_spool, spool_trial_history
from workers.tracking.spool import RunJournal, TrialRunIdentity, journal_paths
from workers.tracking.tracker import finalize_trial_run

URI = "http://mlflow.test:5000"
KEY = "s1/final/dyt/seed0"
IDENTITY = TrialRunIdentity(
    tracking_uri=URI,
    experiment_id="3",
    trial_key=KEY,
    tags={"normlab.trial_key": KEY, "normlab.phase": "final"},
    params={"lr": "0.001"},
)


class InMemoryMlflow:
    """What deliver_spool calls on MlflowClient, kept in dicts; every call fails while `down` is True."""

    def __init__(self, tracking_uri: str = URI):
        self.tracking_uri = tracking_uri
        self.down = False
        self.runs: dict[str, SimpleNamespace] = {}
        self.metrics: dict[str, list[Metric]] = {}

    def _check(self):
        if self.down:
            raise ConnectionError("server down")

    def search_runs(self, experiment_ids, filter_string, **kwargs):
        self._check()
        return [
            run
            for run in self.runs.values()
            if run.info.experiment_id in experiment_ids and filter_string.endswith(f"'{run.key}'")
        ]

    def create_run(self, experiment_id, tags, run_name):
        self._check()
        run_id = uuid.uuid4().hex
        run = SimpleNamespace(
            key=tags["normlab.trial_key"],
            info=SimpleNamespace(run_id=run_id, experiment_id=experiment_id, status="RUNNING"),
            data=SimpleNamespace(params={}, tags=dict(tags)),
        )
        self.runs[run_id] = run
        self.metrics[run_id] = []
        return run

    def log_batch(self, run_id, metrics=(), params=(), synchronous=None):
        self._check()
        self.metrics[run_id].extend(metrics)
        self.runs[run_id].data.params.update({p.key: p.value for p in params})

    def get_metric_history(self, run_id, key):
        self._check()
        return [m for m in self.metrics[run_id] if m.key == key]

    def set_terminated(self, run_id, status):
        self._check()
        self.runs[run_id].info.status = status

    def steps(self, run_id, key):
        return sorted(m.step for m in self.metrics[run_id] if m.key == key)


def spool(tmp_path, identity=IDENTITY, *, epochs=range(3), status="FINISHED", timestamp=1_000):
    journal = RunJournal.create(tmp_path, identity)
    for epoch in epochs:
        journal.append_metrics(
            [
                Metric("objective", 0.1 * epoch, timestamp + epoch, epoch),
                Metric("train_loss", 1.0 / (epoch + 1), timestamp + epoch, epoch),
            ]
        )
    if status is not None:
        journal.record_status(status)
    journal.release()
    return journal.path


def test_a_run_never_created_during_the_outage_is_created_with_its_tags_params_metrics_and_status(tmp_path):
    client = InMemoryMlflow()
    spool(tmp_path)
    delivery = deliver_spool(client, tmp_path)
    assert (delivery.delivered, delivery.left, delivery.failed) == (1, 0, False)
    (run,) = client.runs.values()
    assert run.data.tags["normlab.phase"] == "final" and run.data.params == {"lr": "0.001"}
    assert run.info.status == "FINISHED"
    assert client.steps(run.info.run_id, "objective") == [0, 1, 2]
    assert [m.timestamp for m in client.get_metric_history(run.info.run_id, "objective")] == [
        1000,
        1001,
        1002,
    ]
    assert journal_paths(tmp_path) == []


def test_delivery_sends_only_the_steps_the_run_lacks_so_no_step_is_logged_twice(tmp_path):
    client = InMemoryMlflow()
    run = client.create_run("3", tags=IDENTITY.tags, run_name=KEY)
    # The tracker delivered epoch 0 before the outage; the driver's finalize (other timestamps) epoch 1.
    client.log_batch(
        run.info.run_id, metrics=[Metric("objective", 0.0, 1000, 0), Metric("train_loss", 1.0, 1000, 0)]
    )
    finalize_trial_run(
        client, "3", KEY, history=[{"epoch": 1, "objective": 0.1, "train_loss": 0.5}], status="FINISHED"
    )
    client.runs[run.info.run_id].info.status = "RUNNING"  # as if the trial were still running
    spool(tmp_path, epochs=range(4))
    deliver_spool(client, tmp_path)
    spool(tmp_path, epochs=range(4))  # the same journal delivered twice (a second node's copy, a retry)
    deliver_spool(client, tmp_path)
    for key in ("objective", "train_loss"):
        assert client.steps(run.info.run_id, key) == [0, 1, 2, 3]
    assert len(client.runs) == 1


def test_a_journal_status_does_not_override_a_run_that_was_closed_since(tmp_path):
    client = InMemoryMlflow()
    run = client.create_run("3", tags=IDENTITY.tags, run_name=KEY)
    client.set_terminated(run.info.run_id, "FINISHED")  # a retried attempt finished the run
    spool(tmp_path, status="FAILED")  # the first attempt's journal, delivered late
    deliver_spool(client, tmp_path)
    assert client.runs[run.info.run_id].info.status == "FINISHED"


def test_a_journal_of_a_trial_whose_process_died_brings_its_metrics_but_no_status(tmp_path):
    client = InMemoryMlflow()
    spool(tmp_path, status=None)
    deliver_spool(client, tmp_path)
    (run,) = client.runs.values()
    assert run.info.status == "RUNNING"  # the driver's finalize (or the retried trial) decides
    assert client.steps(run.info.run_id, "objective") == [0, 1, 2]


def test_while_mlflow_is_down_every_journal_stays_and_the_next_delivery_brings_them(tmp_path):
    client = InMemoryMlflow()
    spool(tmp_path)
    spool(
        tmp_path,
        TrialRunIdentity(URI, "3", "s1/final/dyt/seed1", {"normlab.trial_key": "s1/final/dyt/seed1"}),
    )
    client.down = True
    delivery = deliver_spool(client, tmp_path)
    assert (delivery.delivered, delivery.left, delivery.failed) == (0, 2, True)
    client.down = False
    assert deliver_spool(client, tmp_path).delivered == 2
    assert sorted(run.key for run in client.runs.values()) == ["s1/final/dyt/seed0", "s1/final/dyt/seed1"]


def test_journals_of_another_tracking_server_and_of_live_trackers_are_left_alone(tmp_path):
    client = InMemoryMlflow()
    spool(tmp_path, TrialRunIdentity("http://other:5000", "3", KEY, {"normlab.trial_key": KEY}))
    live = RunJournal.create(tmp_path, IDENTITY)
    delivery = deliver_spool(client, tmp_path)
    assert (delivery.delivered, delivery.left) == (0, 2) and client.runs == {}
    live.release()
    assert deliver_spool(client, tmp_path).delivered == 1


def test_the_driver_spools_a_run_it_could_not_finalize_with_its_tune_history(tmp_path):
    config = {
        "method": "dyt",
        "seed": 0,
        "study_id": "s1",
        "phase": "final",
        "trial_key": KEY,
        "lr": 0.001,
        "mlflow_tracking_uri": URI,
        "mlflow_experiment_id": "3",
        "mlflow_parent_run_id": "parent",
        "mlflow_spool_dir": str(tmp_path / "spool"),
    }
    history = [{"epoch": 0, "objective": 0.0}, {"epoch": 1, "objective": 0.5}]
    assert spool_trial_history(config, history, status="FAILED") is not None
    client = InMemoryMlflow()
    deliver_spool(client, tmp_path / "spool")
    (run,) = client.runs.values()
    assert run.info.status == "FAILED" and run.data.tags["mlflow.parentRunId"] == "parent"
    assert run.data.params["lr"] == "0.001" and "mlflow_spool_dir" not in run.data.params
    assert client.steps(run.info.run_id, "objective") == [0, 1]
    assert spool_trial_history({**config, "mlflow_spool_dir": None}, history, status="FAILED") is None


@pytest.mark.parametrize("uri", [URI, URI + "/"])
def test_a_trailing_slash_names_the_same_server(tmp_path, uri):
    spool(tmp_path)
    assert deliver_spool(InMemoryMlflow(uri), tmp_path).delivered == 1


class DeletedExperimentMlflow(InMemoryMlflow):
    """A server that answers, and refuses runs in experiment 3 (deleted since the journal was written)."""

    def search_runs(self, experiment_ids, filter_string, **kwargs):
        if "3" in experiment_ids:
            raise MlflowException("experiment 3 is deleted", error_code=INVALID_PARAMETER_VALUE)
        return super().search_runs(experiment_ids, filter_string, **kwargs)


def test_a_journal_mlflow_refuses_is_set_aside_and_does_not_block_the_ones_after_it(tmp_path):
    client = DeletedExperimentMlflow()
    refused = spool(tmp_path)
    os.utime(refused, (1, 1))  # the oldest: delivered first
    spool(
        tmp_path,
        TrialRunIdentity(URI, "4", "s2/final/dyt/seed0", {"normlab.trial_key": "s2/final/dyt/seed0"}),
    )
    delivery = deliver_spool(client, tmp_path)
    assert (delivery.delivered, delivery.left, delivery.failed) == (1, 0, False)
    assert [run.key for run in client.runs.values()] == ["s2/final/dyt/seed0"]
    assert refused.with_suffix(".refused").exists()  # kept for a person to read, out of the spool


def test_a_server_error_is_an_outage_not_a_refusal(tmp_path):
    class FailingMlflow(InMemoryMlflow):
        def search_runs(self, experiment_ids, filter_string, **kwargs):
            raise MlflowException("database is locked")  # INTERNAL_ERROR: 500

    path = spool(tmp_path)
    assert deliver_spool(FailingMlflow(), tmp_path).failed
    assert journal_paths(tmp_path) == [path]
