"""Response bodies of the HTTP API (built from the store's value objects)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from normlab.loading import changed_on_disk, entry_ref, provided_names
from service.api.mlflow_links import mlflow_ui_url
from studies.spec import StudySpec
from studies.store import AttemptView, DeletedStudy, StudyStatus, StudyView, SubmitFailureView, TrialView
from studies.tables.sequential import SequentialSummary

__all__ = [
    "AttemptOut",
    "ProgressOut",
    "ReadinessCheckOut",
    "ReadinessOut",
    "StudyDeletedOut",
    "StudyLinks",
    "StudyOut",
    "SubmitFailureOut",
    "TrialEpochOut",
    "TrialHistoryOut",
    "TrialOut",
    "study_phase",
]


class ReadinessCheckOut(BaseModel, extra="allow"):
    """One part a study needs; besides these, what the check found (url, backend, free_mb, ...)."""

    ready: bool
    detail: str  # what answered, or what is not ready and why
    reachable: bool | None = None  # answers at all (database, mlflow, ray); ready asks more of it


class ReadinessOut(BaseModel):
    status: str  # ready | not ready
    not_ready: list[str]  # one line per part that is not ready: "ray: <why>"
    database: ReadinessCheckOut  # takes a write (a rolled-back one)
    disk: ReadinessCheckOut  # the data dir's filesystem: writable, NORMLAB_MIN_FREE_DISK_MB free
    mlflow: ReadinessCheckOut  # the tracking server answers /health
    ray: ReadinessCheckOut  # the job server takes jobs (a probe its job agent refuses)


class ProgressOut(BaseModel):
    planned: int  # trials the spec plans, all phases
    done: int  # finished trials, whatever the outcome
    running: int
    succeeded: int
    failed: int
    cancelled: int
    lost: int = 0  # trials lost with a dead driver and run again by a later attempt: not counted as done
    fraction: float  # done / planned, capped at 1


class StudyLinks(BaseModel):
    self: str
    trials: str
    results: str
    # The study's MLflow experiment in the UI's training view (runs and metric charts); null until the
    # driver has created the experiment, or where MLFLOW_TRACKING_URI is no HTTP server.
    mlflow: str | None = None


class AttemptOut(BaseModel):
    """One submission of the study's driver as a Ray job; a driver that dies without recording the study's
    outcome is followed by the next attempt (up to NORMLAB_MAX_STUDY_ATTEMPTS), which resumes the study."""

    number: int  # 1, 2, ...
    ray_job_id: str
    submitted_at: datetime
    # When its driver was found dead; null while it runs, or once it recorded the study's outcome.
    ended_at: datetime | None
    # Why its driver died, e.g. "Ray job ... ended failed: ... exit code 137 (killed by SIGKILL)".
    death_reason: str | None
    interrupted: bool  # found dead when the service started (the stack was stopped): not counted as a death

    @classmethod
    def from_view(cls, attempt: AttemptView) -> AttemptOut:
        return cls.model_validate(attempt, from_attributes=True)


class SubmitFailureOut(BaseModel):
    """A submission of the study's driver that Ray refused or did not answer. The same attempt is tried again
    at `retry_at` (the wait doubles per failure); after NORMLAB_MAX_SUBMIT_FAILURES the study fails."""

    number: int  # 1, 2, ... per study
    attempt: int  # the driver attempt it was to start
    failed_at: datetime
    error: str  # what Ray said, or that it did not answer
    retry_at: datetime | None  # null: not tried again (the study failed with this error)

    @classmethod
    def from_view(cls, failure: SubmitFailureView) -> SubmitFailureOut:
        return cls.model_validate(failure, from_attributes=True)


class TrialPlanOut(BaseModel):
    """The trial plan a study's driver resolved (workers.trials.plan.TrialPlan.to_dict)."""

    cpu: float
    gpu: float
    seeds_per_trial: int  # seeds one trial trains side by side (stacked with torch.func)
    compile: str  # torch.compile mode, or "none"
    gpu_reason: str  # why the trials got the GPU share they did
    describe: str  # the plan in one sentence, as the study page prints it
    # On a GPU with settings left open: every candidate measured, the one chosen and why (null elsewhere).
    throughput: dict[str, Any] | None = None


class StudyOut(BaseModel):
    id: str
    name: str
    dataset: str
    kind: str
    status: str  # queued | running | succeeded | failed | cancelled
    error: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    ray_job_id: str | None  # the current attempt's job
    attempts: list[AttemptOut]  # the driver's attempts, oldest first
    submit_failures: list[SubmitFailureOut]  # submissions Ray did not take, oldest first
    mlflow_experiment_id: str | None
    mlflow_parent_run_id: str | None
    progress: ProgressOut
    # Seconds to the study's end at the pace so far (time since start per finished trial); null before a
    # trial finished and once it ended. Rough: tuning trials that ASHA stops early run faster than finals.
    seconds_left: float | None = None
    # What a running study does now (study_phase): "tuning", "final seeds", "grid", or a sequential design's
    # "look 2 of 5"; null unless it runs. GET /studies says no look (it reads none): "final seeds" or "grid".
    phase: str | None = None
    links: StudyLinks
    spec: dict[str, Any]  # the validated spec, defaults filled in
    # The study's plugins as stored (studies.spec.plugins): what each is and whether its path changed since.
    plugins: list[PluginOut] = []
    tags: list[str] = []  # in alphabetical order; PUT /studies/{id}/tags sets them
    sequential: SequentialSummary | None = Field(
        None,
        description="A sequential study's design, looks and outcomes: each comparison's decision, stop "
        "look, repeated confidence interval and stage-wise p-value, the seeds each arm received and the "
        "trials saved against the fixed design. Given by GET /studies/{id}; null for a fixed-seed study, "
        "and in the study listing and the answers of POST and cancel, which do not read looks.",
    )
    trial_plan: TrialPlanOut | None = Field(
        None,
        description="How the study's driver planned its trials when it started: CPUs and GPU per trial, "
        "seeds per trial, compile mode, and on a GPU what it measured to choose them. Given by GET "
        "/studies/{id}; null before the driver started, and in the study listing and the answers of POST "
        "and cancel.",
    )

    @classmethod
    def from_view(
        cls,
        study: StudyView,
        *,
        mlflow_tracking_uri: str | None,
        sequential: SequentialSummary | None = None,
        trial_plan: Mapping[str, Any] | None = None,
    ) -> StudyOut:
        # Every field but the links, the phase and the sequential summary (read from the study's looks,
        # beside the view) is the view's attribute of the same name (progress and attempts too).
        experiment = study.mlflow_experiment_id
        links = StudyLinks(
            self=f"/studies/{study.id}",
            trials=f"/studies/{study.id}/trials",
            results=f"/results/{study.dataset}?study={study.id}",
            mlflow=mlflow_ui_url(mlflow_tracking_uri, experiment_id=experiment)
            if mlflow_tracking_uri and experiment
            else None,
        )
        fields = {
            name: getattr(study, name)
            for name in cls.model_fields
            if name not in ("links", "phase", "sequential", "plugins", "trial_plan")
        }
        phase = study_phase(study, sequential)
        plugins = [PluginOut.of(entry) for entry in study.spec.get("plugins") or ()]
        return cls.model_validate(
            {
                **fields,
                "links": links,
                "phase": phase,
                "sequential": sequential,
                "plugins": plugins,
                "trial_plan": trial_plan,
            },
            from_attributes=True,
        )


class PluginOut(BaseModel):
    """One plugin of a study: where it came from, the hash of the source it runs, what it registered."""

    ref: str
    sha256: str | None
    package: str | None
    distribution: str | None = None
    provides: dict[str, list[str]]  # section -> the names it registered
    changed_on_disk: str | None = None  # the sentence saying its path holds other source now

    @classmethod
    def of(cls, entry: dict[str, Any]) -> PluginOut:
        return cls(
            ref=entry_ref(entry),
            sha256=entry.get("sha256"),
            package=entry.get("package"),
            distribution=entry.get("distribution"),
            provides=provided_names(entry),
            changed_on_disk=changed_on_disk(entry),
        )


def study_phase(study: StudyView, sequential: SequentialSummary | None = None) -> str | None:
    """What a running study does now, in the words its page prints beside the time left: "tuning" (phase
    1 of a compare study), "final seeds" (phase 2), "grid", or, with its sequential summary, the look its
    seeds train for: "look 2 of 5". None unless it runs (its status says the rest).

    Read from the counts at hand (the listing reads no trials): a compare study with fewer trials done than
    it tunes is still tuning, whatever else ran. Past that count it reads "final seeds", a little early
    where a method still tunes while another's final seeds ran (each method's start once its own tuning
    ended, workers.driver.method_search)."""
    if study.status != StudyStatus.RUNNING:
        return None
    try:
        planned = StudySpec.model_validate(study.spec).planned_trials_by_phase()
    except ValueError:  # a spec stored by an older release that no longer validates: its kind alone
        planned = {}
    if study.progress.done < planned.get("tune", 0):
        return "tuning"
    if sequential is not None and sequential["planned_looks"]:
        looks = len(sequential["planned_looks"])
        taken = len(sequential["looks"])
        # Once every comparison is decided no look follows: the last one taken is where it stands.
        current = taken if sequential["decided"] else min(taken + 1, looks)
        return f"look {max(current, 1)} of {looks}"
    return "grid" if study.kind == "grid" else "final seeds"


class StudyDeletedOut(BaseModel):
    """What DELETE /studies/{id} removed from the store. Its MLflow runs are kept: the parent run is tagged
    `normlab.deleted=true` once this answer has left, best-effort (an MLflow that does not answer leaves it
    untagged, and the server log says so)."""

    id: str
    name: str
    dataset: str
    status: str  # the ended status it had: succeeded | failed | cancelled
    deleted_rows: dict[str, int]  # table -> rows removed, the study's own row (`studies`) included
    mlflow_experiment_id: str | None
    mlflow_parent_run_id: (
        str | None
    )  # the run tagged deleted (null: none recorded; the experiment is searched)

    @classmethod
    def from_deleted(cls, deleted: DeletedStudy) -> StudyDeletedOut:
        return cls(
            id=deleted.id,
            name=deleted.name,
            dataset=deleted.dataset,
            status=deleted.status,
            deleted_rows=dict(deleted.rows),
            mlflow_experiment_id=deleted.mlflow_experiment_id,
            mlflow_parent_run_id=deleted.mlflow_parent_run_id,
        )


class TrialOut(BaseModel):
    id: int
    study_id: str
    trial_key: str
    phase: str  # tune | final | grid
    method: str
    group: str | None  # grid point label
    config: dict[str, Any]
    seed: int | None
    status: str  # running | succeeded | failed | cancelled
    metrics: dict[str, Any]
    metric_value: float | None  # the phase's primary metric
    mlflow_run_id: str | None
    error: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_view(cls, trial: TrialView) -> TrialOut:
        return cls.model_validate(trial, from_attributes=True)


class TrialEpochOut(BaseModel):
    epoch: int  # 0: before training (init_* ranks, untrained metric)
    metrics: dict[str, Any]  # every metric the trial reported that epoch; null where not finite


class TrialHistoryOut(BaseModel):
    study_id: str
    trial_key: str
    epochs: list[TrialEpochOut]  # in epoch order; empty until the trial reports its first epoch

    @classmethod
    def from_history(cls, study_id: str, trial_key: str, history: list[dict[str, Any]]) -> TrialHistoryOut:
        return cls(
            study_id=study_id,
            trial_key=trial_key,
            epochs=[
                TrialEpochOut(epoch=row["epoch"], metrics={k: v for k, v in row.items() if k != "epoch"})
                for row in history
            ],
        )
