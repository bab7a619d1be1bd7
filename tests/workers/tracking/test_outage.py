"""An MLflow outage holds no trial up: the real tracking server `make run` starts, paused with SIGSTOP on its
whole process group (it accepts connections and never answers, the worst kind of outage) for longer than
the close timeout, while trials log, close and are recorded. Its metrics wait in the node's spool and reach
MLflow once, each step once, when the server is resumed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

import workers.trials.trainable as trainable_module
from service.stack.local_stack import mlflow_server as mlflow_server_process
from service.stack.processes import free_port, http_ok, wait_until
from studies.store import (
    create_study,
    list_trials,
    make_engine,
    record_trial,
    session_scope,
    upgrade_database,
)
from tests.process_groups import stop_process_group
from workers.driver.finalize import finalize_mlflow_runs
from workers.driver.recorder import TrialRecorder
from workers.tracking.deadline import TrackingTimeoutError
from workers.tracking.delivery import deliver_spool
from workers.tracking.spool import journal_paths, read_spooled_run
from workers.tracking.tracker import (
    CLOSE_TIMEOUT_S,
    LOOKUP_TIMEOUT_S,
    close_trackers,
    finalize_trial_run,
    find_trial_run,
    tracker_from_trial_config,
)

pytestmark = pytest.mark.slow

# Slack for a loaded 2-core machine; an outage costs minutes without the bounds under test.
SLACK_S = 3.0
# Every outage here lasts longer than a trial's close may wait.
OUTAGE_S = CLOSE_TIMEOUT_S + 3.0
DELIVERY_TIMEOUT_S = 180.0


@dataclass
class PausableMlflow:
    uri: str
    process: subprocess.Popen[bytes]

    @contextlib.contextmanager
    def paused(self) -> Iterator[float]:
        """SIGSTOP on the server's process group (its workers too) until the block ends; yields the start."""
        os.killpg(self.process.pid, signal.SIGSTOP)
        started = time.monotonic()
        try:
            yield started
            time.sleep(max(0.0, started + OUTAGE_S - time.monotonic()))
        finally:
            os.killpg(self.process.pid, signal.SIGCONT)


@pytest.fixture(scope="module")
def mlflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PausableMlflow]:
    """A server of this module's own: pausing the session's shared one would stall other tests."""
    data_dir = tmp_path_factory.mktemp("mlflow-outage")
    port = free_port()
    server = mlflow_server_process(data_dir=data_dir, host="127.0.0.1", port=port)
    server.log_path.parent.mkdir(parents=True, exist_ok=True)
    with server.log_path.open("ab") as log:
        process = subprocess.Popen(
            list(server.argv), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        assert wait_until(lambda: http_ok(str(server.health_url)), timeout=300), server.log_tail()
        yield PausableMlflow(uri=f"http://127.0.0.1:{port}", process=process)
    finally:
        stop_process_group(process)


def trial_config(mlflow: PausableMlflow, experiment_id: str, spool: Path, **fields: Any) -> dict[str, Any]:
    return {
        "method": "frozen_ln",
        "dataset": "digits",
        "model": "vit_lite_tiny",
        "epochs": 2,
        "batch_size": 32,
        "max_steps_per_epoch": 2,
        "seed": 0,
        "study_id": "outage",
        "phase": "final",
        "mlflow_tracking_uri": mlflow.uri,
        "mlflow_experiment_id": experiment_id,
        "mlflow_spool_dir": str(spool),
        **fields,
    }


def wait_for(predicate, timeout_s: float = DELIVERY_TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.5)
    return predicate()


def assert_run_complete(client: MlflowClient, experiment_id: str, trial_key: str, epochs: int) -> None:
    """One run for the key, FINISHED, every metric at every epoch exactly once, params logged."""
    runs = client.search_runs([experiment_id], filter_string=f"tags.`normlab.trial_key` = '{trial_key}'")
    assert len(runs) == 1, trial_key
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.params["method"] == "frozen_ln"
    for key in ("epoch", "objective"):
        steps = sorted(m.step for m in client.get_metric_history(run.info.run_id, key))
        assert steps == list(range(epochs + 1)), (trial_key, key, steps)


def new_experiment(client: MlflowClient) -> str:
    return client.create_experiment(f"outage-{uuid.uuid4().hex[:8]}")


def test_trials_close_and_are_recorded_during_the_outage_and_mlflow_gets_everything_once_after_it(
    mlflow, tmp_path
):
    client = MlflowClient(mlflow.uri)
    experiment_id = new_experiment(client)
    spool = tmp_path / "spool"
    database_url = f"sqlite:///{tmp_path / 'normlab.db'}"
    upgrade_database(database_url)
    engine = make_engine(database_url)
    with session_scope(engine) as session:
        study_id = create_study(
            session,
            spec={
                "name": "outage",
                "dataset": "digits",
                "model": "vit_lite_tiny",
                "methods": ["frozen_ln"],
                "seeds": [0, 1],
                "budget": {"epochs": 2, "batch_size": 32},
            },
        ).id
    keys = {seed: f"{study_id}/final/frozen_ln/seed{seed}" for seed in (0, 1)}
    # A seed batch's trackers, their runs created before the outage.
    trackers = [
        tracker_from_trial_config(
            trial_config(mlflow, experiment_id, spool, study_id=study_id, seed=seed, trial_key=key)
        ).start()
        for seed, key in keys.items()
    ]
    assert all(tracker.run_id for tracker in trackers)

    with mlflow.paused():
        for epoch in range(3):
            for tracker in trackers:
                tracker.log_metrics({"epoch": epoch, "objective": 0.1 * epoch}, step=epoch)
        started = time.monotonic()
        assert close_trackers(trackers, "FINISHED") is False
        assert time.monotonic() - started < CLOSE_TIMEOUT_S + SLACK_S
        for tracker in trackers:
            spooled = read_spooled_run(tracker.journal_path)
            assert spooled.status == "FINISHED"
            assert sorted(m.step for m in spooled.metrics if m.key == "objective") == [0, 1, 2]

        # Tune's callback records the finished trial in the database meanwhile, without the MLflow run id.
        recorder = TrialRecorder(
            database_url, metric_key="test_accuracy", tracking_uri=mlflow.uri, experiment_id=experiment_id
        )
        trial = FinishedTrial(
            config={
                "study_id": study_id,
                "phase": "final",
                "variant": {"method": "frozen_ln", "seeds": [0, 1]},
            },
            last_result={
                "epoch": 2,
                "per_seed": {
                    "0": {"epoch": 2, "test_accuracy": 0.8},
                    "1": {"epoch": 2, "test_accuracy": 0.7},
                },
            },
        )
        started = time.monotonic()
        recorder.on_trial_complete(0, [], trial)
        assert time.monotonic() - started < LOOKUP_TIMEOUT_S + SLACK_S  # one bounded lookup, not one per seed
        with session_scope(engine) as session:
            rows = {row.trial_key: row for row in list_trials(session, study_id=study_id)}
        assert {key: (rows[key].status, rows[key].mlflow_run_id) for key in keys.values()} == {
            key: ("succeeded", None) for key in keys.values()
        }

    # The trackers' own threads deliver once the server answers again.
    assert wait_for(lambda: journal_paths(spool) == [])
    for key in keys.values():
        assert_run_complete(client, experiment_id, key, epochs=2)


@dataclass
class FinishedTrial:
    """The attributes of ray.tune.experiment.Trial that TrialRecorder reads."""

    config: dict[str, Any]
    last_result: dict[str, Any]
    trial_id: str = "t_outage"

    def get_error(self) -> None:
        return None


def test_a_trial_trained_entirely_during_the_outage_finishes_and_is_delivered_afterwards(
    mlflow, tmp_path, monkeypatch
):
    client = MlflowClient(mlflow.uri)
    experiment_id = new_experiment(client)
    spool = tmp_path / "spool"
    reported_at: list[float] = []
    monkeypatch.setattr(
        trainable_module, "_report_to_tune", lambda metrics, ckpt: reported_at.append(time.monotonic())
    )
    single = trial_config(mlflow, experiment_id, spool, trial_key="outage/final/frozen_ln/seed0")
    batch_keys = {1: "outage/final/frozen_ln/seed1", 2: "outage/final/frozen_ln/seed2"}
    batch = trial_config(
        mlflow, experiment_id, spool, seeds=[1, 2], seed_trial_keys=batch_keys, trial_key="batch"
    )

    with mlflow.paused():
        for config in (single, batch):
            trainable_module.train_trial(config)
            # From its last report to its return the trial waited at most the close bound.
            assert time.monotonic() - reported_at[-1] < CLOSE_TIMEOUT_S + SLACK_S
        journals = [read_spooled_run(path) for path in journal_paths(spool)]
        assert sorted(j.identity.trial_key for j in journals) == sorted(
            [single["trial_key"], *batch_keys.values()]
        )
        for journal in journals:
            assert journal.status == "FINISHED"
            assert sorted(m.step for m in journal.metrics if m.key == "objective") == [0, 1, 2]

    assert wait_for(lambda: journal_paths(spool) == [])
    for key in (single["trial_key"], *batch_keys.values()):
        assert_run_complete(client, experiment_id, key, epochs=2)


# A trial process that closes its tracker during the outage and then ends (Tune ends the actor): its tracker
# thread dies with it, leaving the journal for the spool's delivery.
TRIAL_PROCESS = textwrap.dedent(
    """
    import json, os, sys
    from workers.tracking.tracker import tracker_from_trial_config
    tracker = tracker_from_trial_config(json.loads(sys.argv[1])).start(resolve_timeout_s=0)
    for epoch in range(3):
        tracker.log_metrics({"epoch": epoch, "objective": epoch / 10}, step=epoch)
    tracker.close("FINISHED")
    print(tracker.journal_path, flush=True)
    os._exit(0)
    """
)


def test_a_trial_process_that_ended_during_the_outage_is_delivered_from_the_spool_once(mlflow, tmp_path):
    client = MlflowClient(mlflow.uri)
    experiment_id = new_experiment(client)
    spool = tmp_path / "spool"
    config = trial_config(mlflow, experiment_id, spool, trial_key="outage/final/frozen_ln/seed7", seed=7)

    with mlflow.paused():
        process = subprocess.run(
            [sys.executable, "-c", TRIAL_PROCESS, json.dumps(config)],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=Path(__file__).resolve().parents[3],
        )
        assert process.returncode == 0, process.stderr[-3000:]
        (journal,) = journal_paths(spool)
        assert str(journal) == process.stdout.strip()
        assert read_spooled_run(journal).status == "FINISHED"
        assert deliver_spool(MlflowClient(mlflow.uri), spool, lookup_timeout_s=1.0).failed

    # As the driver does at the end of the study: the spool first, then Tune's record of the same epochs.
    delivery = deliver_spool(client, spool)
    assert (delivery.delivered, delivery.left, delivery.failed) == (1, 0, False)
    history = [{"epoch": epoch, "objective": epoch / 10} for epoch in range(3)]
    finalize_trial_run(client, experiment_id, config["trial_key"], history=history)
    assert deliver_spool(client, spool).delivered == 0
    assert_run_complete(client, experiment_id, config["trial_key"], epochs=2)
    run = find_trial_run(client, experiment_id, config["trial_key"])
    assert run.data.tags["normlab.seed"] == "7" and run.data.params["epochs"] == "2"


def test_without_the_bounds_a_paused_server_holds_its_caller_for_the_whole_outage(mlflow):
    """What the bounds above prevent: MLflow's own client waits for the paused server to answer."""
    client = MlflowClient(mlflow.uri)
    experiment_id = new_experiment(client)
    with mlflow.paused() as paused_at:
        with pytest.raises(TrackingTimeoutError):
            find_trial_run(client, experiment_id, "k", timeout_s=1.0)
        waited = None

        def unbounded_lookup() -> None:
            nonlocal waited
            find_trial_run(MlflowClient(mlflow.uri), experiment_id, "k", timeout_s=None)
            waited = time.monotonic() - paused_at

        thread = threading.Thread(target=unbounded_lookup, daemon=True)
        thread.start()
    thread.join(60)
    assert waited is not None and waited >= OUTAGE_S  # answered only once the server was resumed


def test_the_driver_journals_runs_it_cannot_complete_during_the_outage_and_they_arrive_afterwards(
    mlflow, tmp_path
):
    client = MlflowClient(mlflow.uri)
    experiment_id = new_experiment(client)
    spool = tmp_path / "spool"
    engine, study_id = _study_with_trials_recorded_during_the_outage(tmp_path, seeds=(3, 4))
    base = trial_config(mlflow, experiment_id, spool, study_id=study_id)
    results = [
        SimpleNamespace(
            metrics={"trial_id": f"t{seed}"},
            config={**base, "variant": {"method": "frozen_ln", "seed": seed}},
            metrics_dataframe=pd.DataFrame(
                [{"epoch": epoch, "objective": 0.1 * epoch, "trial_id": f"t{seed}"} for epoch in range(3)]
            ),
            error=None,
        )
        for seed in (3, 4)
    ]
    keys = [f"{study_id}/final/frozen_ln/seed{seed}" for seed in (3, 4)]

    with mlflow.paused():
        started = time.monotonic()
        finalize_mlflow_runs(results, client, experiment_id, engine=engine)
        assert time.monotonic() - started < LOOKUP_TIMEOUT_S + SLACK_S  # one bounded lookup, then the spool
        journals = [read_spooled_run(path) for path in journal_paths(spool)]
        assert sorted(j.identity.trial_key for j in journals) == keys
        assert {j.status for j in journals} == {"FINISHED"}

    # Once MLflow answers, a driver's next pass (with a client that has no unanswered request) delivers
    # them and gives the trials' rows their runs' ids.
    finalize_mlflow_runs(results, MlflowClient(mlflow.uri), experiment_id, engine=engine)
    assert journal_paths(spool) == []
    with session_scope(engine, readonly=True) as session:
        run_ids = {t.trial_key: t.mlflow_run_id for t in list_trials(session, study_id=study_id)}
    for key in keys:
        assert_run_complete(client, experiment_id, key, epochs=2)
        assert run_ids[key] == find_trial_run(client, experiment_id, key).info.run_id


def _study_with_trials_recorded_during_the_outage(tmp_path: Path, seeds: tuple[int, ...]):
    """A study whose trials the recorder wrote while MLflow was down: no run id could be looked up."""
    url = f"sqlite:///{tmp_path / 'normlab.db'}"
    upgrade_database(url)
    engine = make_engine(url)
    spec = {"name": "outage", "dataset": "digits", "methods": ["frozen_ln"], "seeds": list(seeds)}
    with session_scope(engine) as session:
        study_id = create_study(session, spec=spec).id
        for seed in seeds:
            record_trial(
                session,
                study_id=study_id,
                trial_key=f"{study_id}/final/frozen_ln/seed{seed}",
                phase="final",
                method="frozen_ln",
                config={"seed": seed},
                seed=seed,
                status="succeeded",
                metrics={"objective": 0.2},
                metric_value=0.2,
                mlflow_run_id=None,
            )
    return engine, study_id
