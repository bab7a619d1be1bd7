"""Before "succeeded": trials the store lacks are recovered from Tune's results and from MLflow (a real
SQLite-backed tracking store), a stored outcome is never replaced, a sequential design's replayed looks
decide which finals are planned, and a study still missing trials fails naming every one."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from studies.spec import StudySpec
from studies.store import list_trials, session_scope, study_looks, trial_history
from tests.factories import add_study, add_trial, digits_spec, start_study, trial_key
from workers.driver.completeness import IncompleteStudyError, ensure_complete

FIXED = digits_spec(name="complete", methods=["frozen_ln", "dyt"], seeds=[0, 1])
TUNED = digits_spec(
    name="tuned",
    methods=["frozen_ln", "dyt"],
    seeds=[0, 1],
    search={"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2}},
    num_samples=2,
)
SEQUENTIAL = {
    **{k: v for k, v in digits_spec(name="sequential", methods=["frozen_ln", "dyt"]).items() if k != "seeds"},
    "sequential": {"first_seeds": 2, "seeds_per_look": 1, "max_seeds": 4, "effect": 0.02},
}


@dataclass
class Result:
    """What ray.tune.Result gives the driver: the trial's config, its last report, its error, its history."""

    config: dict[str, Any]
    metrics: dict[str, Any]
    error: Exception | None = None
    metrics_dataframe: pd.DataFrame | None = field(default=None)


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def mlflow(tracking_uri, request) -> tuple[MlflowClient, str]:
    client = MlflowClient(tracking_uri)
    experiment = client.create_experiment(
        f"normlab/test/{abs(hash(request.node.name)):x}{time.monotonic_ns()}"
    )
    return client, experiment


def _study(engine, spec: dict) -> tuple[str, StudySpec]:
    study = add_study(engine, spec)
    start_study(engine, study.id)
    return study.id, StudySpec.model_validate(study.spec)


def _final(study_id: str, method: str, seed: int, value: float, *, epochs: int = 2) -> Result:
    config = {"study_id": study_id, "phase": "final", "method": method, "seed": seed, "knobs": {"lr": 1e-3}}
    history = pd.DataFrame(
        [
            {"epoch": e, "test_accuracy": value - 0.1 * (epochs - 1 - e), "trial_id": "t"}
            for e in range(epochs)
        ]
    )
    return Result(
        config, {"test_accuracy": value, "epoch": epochs - 1, "trial_id": f"t{seed}"}, None, history
    )


def _stored(engine, study_id: str) -> dict[str, Any]:
    with session_scope(engine, readonly=True) as session:
        return {t.trial_key: t for t in list_trials(session, study_id=study_id)}


def test_final_trials_only_in_tunes_results_are_recorded_with_their_metrics_and_history(engine):
    study_id, spec = _study(engine, FIXED)
    add_trial(
        engine, study_id, trial_key(study_id, "final", "frozen_ln", 0), method="frozen_ln", metric_value=0.8
    )
    add_trial(engine, study_id, trial_key(study_id, "final", "dyt", 0), method="dyt", metric_value=0.7)
    # The database was restored from a copy older than two trials' ends; Tune's results hold all four.
    results = [_final(study_id, m, s, 0.9) for m in ("frozen_ln", "dyt") for s in (0, 1)]
    found = ensure_complete(study_id, spec, engine, results=results, client=None, experiment_id="0")
    assert sorted(found.from_tune) == [trial_key(study_id, "final", m, 1) for m in ("dyt", "frozen_ln")]
    stored = _stored(engine, study_id)
    recovered = stored[trial_key(study_id, "final", "dyt", 1)]
    assert (recovered.status, recovered.metric_value, recovered.seed) == ("succeeded", 0.9, 1)
    assert recovered.config["knobs"] == {"lr": 1e-3} and "study_id" not in recovered.config
    assert stored[trial_key(study_id, "final", "dyt", 0)].metric_value == 0.7  # a stored outcome stays
    with session_scope(engine, readonly=True) as session:
        history = trial_history(session, study_id=study_id, trial_key=recovered.trial_key)
    assert [row["epoch"] for row in history] == [0, 1]


def test_a_seed_batch_is_recovered_seed_by_seed_and_a_failed_trial_as_failed(engine):
    study_id, spec = _study(engine, FIXED)
    batch = Result(
        {"study_id": study_id, "phase": "final", "method": "frozen_ln", "seed": 0, "seeds": [0, 1]},
        {"per_seed": {"0": {"test_accuracy": 0.81}, "1": {"test_accuracy": 0.82}}, "trial_id": "b"},
    )
    crashed = [
        Result({"study_id": study_id, "phase": "final", "method": "dyt", "seed": s}, {}, RuntimeError("boom"))
        for s in (0, 1)
    ]
    ensure_complete(study_id, spec, engine, results=[batch, *crashed], client=None, experiment_id="0")
    stored = _stored(engine, study_id)
    assert [stored[trial_key(study_id, "final", "frozen_ln", s)].metric_value for s in (0, 1)] == [0.81, 0.82]
    failed = stored[trial_key(study_id, "final", "dyt", 0)]
    assert failed.status == "failed" and failed.error == "RuntimeError: boom"


def test_a_trial_left_running_in_the_store_is_ended_as_tune_ended_it(engine):
    study_id, spec = _study(engine, FIXED)
    for method in ("frozen_ln", "dyt"):
        for seed in (0, 1):
            status = "running" if (method, seed) == ("dyt", 1) else "succeeded"
            add_trial(engine, study_id, trial_key(study_id, "final", method, seed), method=method, seed=seed,
                      status=status, metric_value=0.5 if status == "succeeded" else None)  # fmt: skip
    ensure_complete(
        study_id, spec, engine, results=[_final(study_id, "dyt", 1, 0.6)], client=None, experiment_id="0"
    )
    assert _stored(engine, study_id)[trial_key(study_id, "final", "dyt", 1)].status == "succeeded"


def test_a_trial_only_in_mlflow_is_recorded_from_its_run(engine, mlflow):
    client, experiment = mlflow
    study_id, spec = _study(engine, FIXED)
    for method, seed in (("frozen_ln", 0), ("frozen_ln", 1), ("dyt", 0)):
        add_trial(engine, study_id, trial_key(study_id, "final", method, seed), method=method, seed=seed,
                  metric_value=0.5)  # fmt: skip
    key = trial_key(study_id, "final", "dyt", 1)
    tags = {"normlab.study_id": study_id, "normlab.trial_key": key, "normlab.phase": "final"}
    run = client.create_run(experiment, tags={**tags, "normlab.method": "dyt", "normlab.seed": "1"})
    client.log_metric(run.info.run_id, "test_accuracy", 0.77)
    client.log_param(run.info.run_id, "knobs.lr", "0.001")
    client.log_param(run.info.run_id, "epochs", "3")
    # A run without its final metric (it never ended) is no trial to recover.
    unfinished = {**tags, "normlab.trial_key": f"{study_id}/tune/dyt/x", "normlab.phase": "tune"}
    client.create_run(experiment, tags={**unfinished, "normlab.method": "dyt"})
    found = ensure_complete(study_id, spec, engine, results=[], client=client, experiment_id=experiment)
    assert found.from_mlflow == [key]
    recovered = _stored(engine, study_id)[key]
    assert (recovered.status, recovered.metric_value, recovered.mlflow_run_id) == (
        "succeeded",
        0.77,
        run.info.run_id,
    )
    assert recovered.config["knobs"] == {"lr": 0.001} and recovered.config["epochs"] == 3


def test_a_study_whose_trials_are_nowhere_fails_naming_every_missing_trial(engine, mlflow):
    client, experiment = mlflow
    study_id, spec = _study(engine, FIXED)
    add_trial(
        engine, study_id, trial_key(study_id, "final", "frozen_ln", 0), method="frozen_ln", metric_value=0.5
    )
    with pytest.raises(IncompleteStudyError) as raised:
        ensure_complete(study_id, spec, engine, results=[], client=client, experiment_id=experiment)
    message = str(raised.value)
    assert "3 final trials (frozen_ln seed 1, dyt seed 0, dyt seed 1)" in message
    for method, seed in (("frozen_ln", 1), ("dyt", 0), ("dyt", 1)):
        assert trial_key(study_id, "final", method, seed) in message


def test_missing_tuning_trials_are_named_by_method_and_recovered_from_tune_when_it_has_them(engine):
    study_id, spec = _study(engine, TUNED)
    for method in ("frozen_ln", "dyt"):
        for seed in (0, 1):
            add_trial(engine, study_id, trial_key(study_id, "final", method, seed), method=method, seed=seed,
                      metric_value=0.5)  # fmt: skip
        add_trial(engine, study_id, f"{study_id}/tune/{method}/a", phase="tune", method=method, seed=2,
                  metric_value=0.4)  # fmt: skip
    with pytest.raises(IncompleteStudyError, match="1 tuning trial of frozen_ln and 1 tuning trial of dyt"):
        ensure_complete(study_id, spec, engine, results=[], client=None, experiment_id="0")
    tuning = [
        Result(
            {"study_id": study_id, "phase": "tune", "method": m, "seed": 2},
            {"objective": 0.4, "trial_id": "b"},
        )
        for m in ("frozen_ln", "dyt")
    ]
    found = ensure_complete(study_id, spec, engine, results=tuning, client=None, experiment_id="0")
    assert sorted(found.from_tune) == [f"{study_id}/tune/dyt/b", f"{study_id}/tune/frozen_ln/b"]
    assert found.complete


def test_a_sequential_designs_replayed_looks_decide_the_finals_and_are_stored_once_complete(engine):
    study_id, spec = _study(engine, SEQUENTIAL)
    # Seeds 0 and 1 of both methods give the first look; dyt is far from frozen_ln but two seeds cannot
    # decide at alpha 0.05, so the second look needs seed 2 of both.
    values = {"frozen_ln": [0.80, 0.81, 0.79], "dyt": [0.60, 0.62, 0.61]}
    for method, by_seed in values.items():
        for seed, value in enumerate(by_seed[:2]):
            add_trial(engine, study_id, trial_key(study_id, "final", method, seed), method=method, seed=seed,
                      metric_value=value)  # fmt: skip
    with pytest.raises(IncompleteStudyError, match="frozen_ln seed 2, dyt seed 2"):
        ensure_complete(study_id, spec, engine, results=[], client=None, experiment_id="0")
    with session_scope(engine, readonly=True) as session:
        assert study_looks(session, study_id) == []  # no look is stored over incomplete results
    results = [_final(study_id, m, 2, values[m][2]) for m in values]
    found = ensure_complete(study_id, spec, engine, results=results, client=None, experiment_id="0")
    assert found.complete and found.planned >= 6
    with session_scope(engine, readonly=True) as session:
        assert len(study_looks(session, study_id)) >= 2
