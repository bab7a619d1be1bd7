"""A study's life written straight into the store, as the reconcile loop and the study driver write it:
the page tests move a study along without Ray (started, trials and their epochs recorded, finished)."""

from __future__ import annotations

from collections.abc import Mapping

import sqlalchemy as sa

from studies.store import record_attempt, session_scope, set_study_runtime, set_study_status
from tests.factories import add_epochs, add_trial, digits_spec, finish_study

# A grid: 2 methods x 3 seeds = 6 planned trials, no tuning phase.
SPEC = digits_spec(name="pages", seeds=[0, 1, 2], kind="grid", search={"lr": 0.005}, epochs=3, batch_size=32)
PLANNED = 6
EXPERIMENT = "7"


def start(engine: sa.Engine, study_id: str) -> None:
    """Submitted as a Ray job and running, its MLflow experiment created."""
    with session_scope(engine) as session:
        record_attempt(session, study_id=study_id, ray_job_id=f"raysubmit_{study_id[:8]}")
        set_study_runtime(session, study_id=study_id, mlflow_experiment_id=EXPERIMENT)
        set_study_status(session, study_id=study_id, status="running")


def trial_key(study_id: str, method: str, seed: int) -> str:
    return f"{study_id}/grid/{method}/seed{seed}"  # as workers.driver.trial_keys names a grid trial


def record(
    engine: sa.Engine,
    study_id: str,
    method: str,
    seed: int,
    *,
    epochs: Mapping[int, float] | None = None,
    finished: bool = False,
    name: str | None = None,
) -> None:
    """A grid trial with its epochs ({epoch: val_accuracy}); `finished`: succeeded, with its test metric."""
    key = trial_key(study_id, method, seed)
    accuracies = dict(epochs or {})
    final = max(accuracies.values(), default=0.5) if finished else None
    with session_scope(engine) as session:
        add_epochs(
            session,
            study_id,
            key,
            {
                epoch: {"val_accuracy": accuracy, "train_loss": 1.0 - accuracy}
                for epoch, accuracy in accuracies.items()
            },
        )
        add_trial(
            session,
            study_id,
            key,
            phase="grid",
            method=method,
            group=name,
            config={"lr": 0.005},
            seed=seed,
            status="succeeded" if finished else "running",
            metrics={"test_accuracy": final} if finished else {},
            metric_value=final,
            mlflow_run_id=f"run-{method}-{seed}",
        )


def finish(engine: sa.Engine, study_id: str, status: str = "succeeded") -> None:
    finish_study(engine, study_id, status)
