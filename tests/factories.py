"""What tests build again and again, in one place: specs to submit, studies and trial rows in the store.

Specs: QUICK_SPEC_YAML (a compare study with a tuning phase: 15 planned trials), `quick_spec` (the same as
a dict, with changes) and `digits_spec` (the smallest valid study on digits, every field overridable).

Rows: `add_study`, `add_trial`, `add_epochs` and `add_final_trials` write what the API, the reconcile loop
and the study driver would, through the store's own functions. Each takes `store`: an engine (the write
is committed in a session of its own) or a session the test holds open (the write joins it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
import yaml
from sqlalchemy.orm import Session

from studies.spec import StudySpec
from studies.store import (
    StudyView,
    TrialView,
    create_study,
    record_attempt,
    record_trial,
    record_trial_epoch,
    session_scope,
    set_study_runtime,
    set_study_status,
)

QUICK_SPEC_YAML = """
name: tiny
dataset: digits
model: vit_lite_tiny
methods: [autonorm_s, frozen_ln, dyt]
search:
  lr: {type: loguniform, low: 1.0e-4, high: 1.0e-2}
method_search:
  autonorm_s: {tau: 0.5, t_freeze: {type: int, low: 1, high: 3}}
num_samples: 2
seeds: [0, 1, 2]
budget: {epochs: 4, batch_size: 32}
"""

Store = sa.Engine | Session


# ------------------------------------------------------------------------------------------------ specs


def quick_spec(**changes: Any) -> dict[str, Any]:
    """QUICK_SPEC_YAML as a dict, top-level fields replaced by `changes`."""
    return {**yaml.safe_load(QUICK_SPEC_YAML), **changes}


def digits_spec(
    *,
    name: str = "digits",
    methods: Sequence[str] = ("frozen_ln", "dyt"),
    seeds: Sequence[int] = (0, 1),
    epochs: int = 1,
    batch_size: int = 64,
    **fields: Any,
) -> dict[str, Any]:
    """A valid spec of a small study on digits (vit_lite_tiny, defaults for the rest); `fields` adds or
    replaces top-level fields (kind, search, method_search, num_samples, a whole budget)."""
    return {
        "name": name,
        "dataset": "digits",
        "model": "vit_lite_tiny",
        "methods": list(methods),
        "seeds": list(seeds),
        "budget": {"epochs": epochs, "batch_size": batch_size},
        **fields,
    }


def submit(client: Any, spec: Mapping[str, Any] | None = None) -> str:
    """POST `spec` (QUICK_SPEC_YAML by default) to the test app's /studies as JSON, as a client would; the
    new study's id. `client`: a TestClient of tests/service/conftest.py's app."""
    from tests.service.conftest import AUTH  # the app's token: only the service tests submit

    body = json.dumps(quick_spec() if spec is None else dict(spec))
    response = client.post("/studies", content=body, headers={"Content-Type": "application/json", **AUTH})
    assert response.status_code == 201, response.text
    return response.json()["id"]


# ------------------------------------------------------------------------------------------------- rows


@contextmanager
def _session(store: Store) -> Iterator[Session]:
    if isinstance(store, Session):
        yield store
    else:
        with session_scope(store) as session:
            yield session


def trial_key(study_id: str, phase: str, method: str, seed: int) -> str:
    """A trial's key as the driver names a per-seed trial (workers.driver.trial_keys)."""
    return f"{study_id}/{phase}/{method}/seed{seed}"


def add_study(
    store: Store,
    spec: StudySpec | Mapping[str, Any] | None = None,
    *,
    ray_job_id: str | None = None,
    status: str | None = None,
) -> StudyView:
    """A queued study of `spec` (QUICK_SPEC_YAML by default), as POST /studies stores it; with `ray_job_id`
    its driver's first attempt is recorded, then `status` is set (running, then succeeded: in turn)."""
    with _session(store) as session:
        study = create_study(session, spec=quick_spec() if spec is None else spec)
        if ray_job_id is not None:
            study = record_attempt(session, study_id=study.id, ray_job_id=ray_job_id)
        if status is not None:
            study = set_study_status(session, study_id=study.id, status=status)
        return study


def add_trial(
    store: Store,
    study_id: str,
    key: str,
    *,
    phase: str = "final",
    method: str = "dyt",
    config: Mapping[str, Any] | None = None,
    seed: int | None = 0,
    status: str = "succeeded",
    metrics: Mapping[str, Any] | None = None,
    metric_value: float | None = None,
    mlflow_run_id: str | None = None,
    error: str | None = None,
    group: str | None = None,
) -> TrialView:
    """A trial row (record_trial: inserted, or updated where `key` exists), defaults for what is not said."""
    with _session(store) as session:
        return record_trial(
            session,
            study_id=study_id,
            trial_key=key,
            phase=phase,
            method=method,
            config={} if config is None else config,
            seed=seed,
            status=status,
            metrics={} if metrics is None else metrics,
            metric_value=metric_value,
            mlflow_run_id=mlflow_run_id,
            error=error,
            group=group,
        )


def add_epochs(store: Store, study_id: str, key: str, epochs: Mapping[int, Mapping[str, Any]]) -> None:
    """Trial `key`'s history: {epoch: metrics}, as its trial reports them."""
    with _session(store) as session:
        for epoch, metrics in epochs.items():
            record_trial_epoch(session, study_id=study_id, trial_key=key, epoch=epoch, metrics=metrics)


def add_final_trials(
    store: Store,
    study_id: str,
    values: Mapping[str, Sequence[float]],
    *,
    phase: str = "final",
    metrics: Mapping[str, Any] | None = None,
) -> list[TrialView]:
    """A succeeded trial per method and seed: `values` is {method: [metric value of seed 0, 1, ...]}."""
    with _session(store) as session:
        return [
            add_trial(
                session,
                study_id,
                trial_key(study_id, phase, method, seed),
                phase=phase,
                method=method,
                seed=seed,
                metrics=metrics,
                metric_value=value,
            )
            for method, by_seed in values.items()
            for seed, value in enumerate(by_seed)
        ]


def start_study(
    store: Store, study_id: str, *, ray_job_id: str | None = "raysubmit_1", **runtime: str
) -> None:
    """What the reconcile loop and the driver write when a study starts: its Ray job (no attempt row, as
    set_study_runtime records it) and MLflow ids (`runtime`: mlflow_experiment_id, mlflow_parent_run_id),
    then status running."""
    with _session(store) as session:
        set_study_runtime(session, study_id=study_id, ray_job_id=ray_job_id, **runtime)
        set_study_status(session, study_id=study_id, status="running")


def finish_study(store: Store, study_id: str, status: str = "succeeded", error: str | None = None) -> None:
    with _session(store) as session:
        set_study_status(session, study_id=study_id, status=status, error=error)


def run_to_the_end(
    store: Store, study_id: str, values: Mapping[str, Sequence[float]], *, ray_job_id: str = "raysubmit_1"
) -> None:
    """What the cluster does with a submitted study: run it, record its final trials, end it succeeded."""
    with _session(store) as session:
        start_study(session, study_id, ray_job_id=ray_job_id)
        trials = add_final_trials(session, study_id, values)
        for trial in trials:  # AutoNorm-S froze in every seed, as a claim about it requires
            if trial.method == "autonorm_s":
                add_epochs(session, study_id, trial.trial_key, {1: {"gates_frozen": 1, "freeze_epoch": 0}})
        finish_study(session, study_id)
