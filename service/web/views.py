"""What the pages show, built from the store's value objects: frozen dataclasses the templates read.

No FastAPI and no database here: the page routes read the store in one unit of work at the database gate
and hand the views to these functions, which run in a worker thread (the figures are CPU work). Every link
a page shows is built here, the MLflow ones by service.api.mlflow_links (the one builder, training view).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import yaml
from markupsafe import Markup

from normlab.loading import changed_on_disk, entry_ref, provided_names
from service.api.mlflow_links import mlflow_ui_url
from service.api.routes.schemas import study_phase
from service.web.plan_view import PlanBeside
from studies.spec import DATASET_METRICS
from studies.store import TERMINAL_STATUSES, AttemptView, StudyStatus, StudyView, SubmitFailureView, TrialView
from studies.store.completeness import study_completeness
from studies.store.results_evidence import RESULT_PHASES
from studies.tables.render_curves_svg import EpochCurve, epoch_curves_svg
from studies.tables.render_sequential_svg import sequential_figure
from studies.tables.sequential import SequentialSummary

if TYPE_CHECKING:
    from studies.sequential import LookRecord

__all__ = [
    "AttemptRow",
    "CompletenessView",
    "CurveFigure",
    "SequentialComparison",
    "SequentialSection",
    "StudyCard",
    "StudyPage",
    "SubmitFailureRow",
    "TrialRow",
    "curve_figures",
    "ray_job_url",
    "study_card",
    "study_page",
]

_PHASE_ORDER = ("tune", "final", "grid")
_LOSS = "train_loss"


@dataclass(frozen=True)
class StudyCard:
    """A study as a row of the home page and the head of its own page."""

    id: str
    name: str
    status: str
    active: bool  # queued or running: the page keeps polling it
    dataset: str
    kind: str
    methods: tuple[str, ...]
    error: str | None
    created_at: str | None  # ISO 8601, UTC (the JSON API's form; the template formats it)
    started_at: str | None
    finished_at: str | None
    done: int
    planned: int
    running: int
    percent: int  # done / planned, 0..100
    seconds_left: float | None  # at the pace so far (studies.store StudyView.seconds_left)
    # What it does now, printed beside the time left: "tuning", "final seeds", "grid", "look 2 of 5"; None
    # unless it runs (the JSON API's `phase`, which the page's script prints as it polls).
    phase: str | None
    page_url: str
    report_url: str
    results_url: str | None  # None until the study has final-phase or grid trials (the table 404s before)
    mlflow_url: str | None  # the experiment in MLflow's training view; None before the driver made it
    ray_job_id: str | None
    ray_job_url: str | None
    # Why the study waits, when Ray did not take its driver's latest submission: how many times it failed,
    # Ray's words the last time, and when it is tried again (None: not again, the study failed with it).
    submit_failures: int = 0
    submit_error: str | None = None
    submit_retry_at: str | None = None
    tags: tuple[str, ...] = ()  # alphabetical; each a link to the home page narrowed to it


@dataclass(frozen=True)
class SubmitFailureRow:
    number: int
    attempt: int  # the driver attempt it was to start
    failed_at: str
    error: str  # Ray's words
    retry_at: str | None  # None: not tried again


@dataclass(frozen=True)
class AttemptRow:
    number: int
    ray_job_id: str
    ray_job_url: str
    submitted_at: str
    ended_at: str | None
    death_reason: str | None
    interrupted: bool


@dataclass(frozen=True)
class TrialRow:
    key: str  # the store's trial key (the JSON API's `trial_key`)
    label: str  # the key without the study id in front: `final/dyt/seed0`
    phase: str
    method: str
    group: str | None
    seed: int | None
    status: str
    metric_value: float | None  # the phase's primary metric, once the trial finished
    error: str | None
    history_url: str
    hyperparameters: str  # its knob values, the optimiser's first: "lr 0.00545, weight_decay 0.03, tau 0.5"
    mlflow_url: str | None

    @property
    def error_headline(self) -> str:
        """The error's first line (`<Type>: <message>`, workers.driver.trial_errors), what the cell shows."""
        return (self.error or "").strip().split("\n", 1)[0]

    @property
    def error_detail(self) -> str:
        """The rest of it (the trace's last lines), which the cell folds away."""
        parts = (self.error or "").strip().split("\n", 1)
        return parts[1].strip("\n") if len(parts) == 2 else ""


@dataclass(frozen=True)
class CompletenessView:
    """Whether an ended study holds every trial it planned (studies.store.completeness), in words."""

    complete: bool
    planned: int
    recorded: int
    missing: tuple[str, ...]  # the planned final or grid trials without an outcome, by label
    tune_missing: tuple[tuple[str, int], ...]  # (method, tuning trials without an outcome)
    reason: str


@dataclass(frozen=True)
class CurveFigure:
    caption: str
    svg: Markup  # built by studies.tables.render_curves_svg, which escapes every text it draws


@dataclass(frozen=True)
class SequentialComparison:
    method: str
    decision: str  # a key of studies.sequential.DECISIONS
    decision_text: str
    look: int | None  # the look its numbers come from
    seeds: int
    estimate: float | None  # positive: the method is better in the metric's direction
    interval: tuple[float | None, float | None]
    interval_level: float | None
    p_value: float | None


@dataclass(frozen=True)
class SequentialSection:
    """A sequential study's design, where each comparison stands, and what the looks ran so far."""

    description: str
    reference: str | None  # None in a grid, whose comparisons are the design's pairs
    looks_taken: int
    planned_looks: tuple[int, ...]
    seeds_per_arm: tuple[tuple[str, int], ...]
    open_arms: tuple[str, ...]
    comparisons: tuple[SequentialComparison, ...]
    trials_run: int
    trials_fixed: int
    trials_saved: int
    figure: Markup | None  # studies.tables.render_sequential_svg, which escapes every text it draws


@dataclass(frozen=True)
class StudyPage:
    study: StudyCard
    spec_yaml: str
    attempts: tuple[AttemptRow, ...]
    submit_failures: tuple[SubmitFailureRow, ...]
    trials: tuple[TrialRow, ...]
    figures: tuple[CurveFigure, ...]
    sequential: SequentialSection | None = None
    # Once the study ended: whether every trial it planned is stored (None while it runs: its progress says).
    completeness: CompletenessView | None = None
    mlflow_user: str | None = None  # whom MLflow's UI asks to sign in as (None: it asks nothing)
    plan: PlanBeside | None = None  # its plan before launch beside what it spent (service.web.plan_view)
    plugins: tuple[PluginRow, ...] = ()  # the user code it runs (studies.spec.plugins)


@dataclass(frozen=True)
class PluginRow:
    ref: str
    sha256: str
    provides: str  # "methods rmsnorm; knobs rms_eps"
    changed: str | None  # the sentence saying its path holds other source now


def plugin_rows(spec: Mapping[str, Any]) -> tuple[PluginRow, ...]:
    return tuple(
        PluginRow(
            ref=entry_ref(entry),
            sha256=str(entry.get("sha256") or ""),
            provides="; ".join(
                f"{section} {', '.join(names)}" for section, names in provided_names(entry).items()
            ),
            changed=changed_on_disk(entry),
        )
        for entry in spec.get("plugins") or ()
    )


def ray_job_url(dashboard_url: str, job_id: str) -> str:
    """A Ray job's page in the Ray dashboard, which routes in the URL's fragment (a hash router)."""
    return f"{dashboard_url.rstrip('/')}/#/jobs/{quote(job_id, safe='')}"


def results_url(dataset: str, study_id: str) -> str:
    return f"/results/{quote(dataset, safe='')}?{urlencode({'study': study_id, 'format': 'html'})}"


def study_card(
    study: StudyView,
    *,
    mlflow_tracking_uri: str | None,
    ray_dashboard_url: str,
    has_results: bool,
    sequential: SequentialSummary | None = None,
) -> StudyCard:
    """`has_results`: whether /results has a table for the study (it has final-phase or grid trials);
    `sequential`: its sequential summary, where read, for the look its phase names (as GET /studies/{id})."""
    progress = study.progress
    experiment = study.mlflow_experiment_id
    page_url = f"/studies/{quote(study.id, safe='')}"
    methods = study.spec.get("methods")
    waiting = study.unsubmitted_failures
    return StudyCard(
        id=study.id,
        name=study.name,
        status=study.status,
        active=StudyStatus(study.status) not in TERMINAL_STATUSES,
        dataset=study.dataset,
        kind=study.kind,
        methods=tuple(str(m) for m in methods) if isinstance(methods, list) else (),
        error=study.error,
        created_at=_iso(study.created_at),
        started_at=_iso(study.started_at),
        finished_at=_iso(study.finished_at),
        done=progress.done,
        planned=progress.planned,
        running=progress.running,
        percent=round(100 * progress.fraction),
        seconds_left=study.seconds_left,
        phase=study_phase(study, sequential),
        page_url=page_url,
        report_url=f"{page_url}/report?format=html",
        results_url=results_url(study.dataset, study.id) if has_results else None,
        mlflow_url=mlflow_ui_url(mlflow_tracking_uri, experiment_id=experiment)
        if mlflow_tracking_uri and experiment
        else None,
        ray_job_id=study.ray_job_id,
        ray_job_url=ray_job_url(ray_dashboard_url, study.ray_job_id) if study.ray_job_id else None,
        submit_failures=len(waiting),
        submit_error=waiting[-1].error if waiting else None,
        submit_retry_at=_iso(waiting[-1].retry_at) if waiting else None,
        tags=study.tags,
    )


def study_page(
    study: StudyView,
    trials: Sequence[TrialView],
    histories: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    mlflow_tracking_uri: str | None,
    ray_dashboard_url: str,
    sequential: SequentialSummary | None = None,
    looks: Sequence[LookRecord] = (),
    mlflow_user: str | None = None,
) -> StudyPage:
    """`looks`: a sequential study's stored looks (which trials its design planned); `mlflow_user`: whom
    MLflow's UI asks to sign in as."""
    has_results = any(trial.phase in RESULT_PHASES for trial in trials)
    return StudyPage(
        study=study_card(
            study,
            mlflow_tracking_uri=mlflow_tracking_uri,
            ray_dashboard_url=ray_dashboard_url,
            has_results=has_results,
            sequential=sequential,
        ),
        spec_yaml=yaml.safe_dump(dict(study.spec), sort_keys=False),
        plugins=plugin_rows(study.spec),
        attempts=tuple(_attempt_row(a, ray_dashboard_url) for a in study.attempts),
        submit_failures=tuple(_submit_failure_row(f) for f in study.submit_failures),
        trials=tuple(_trial_row(study, t, mlflow_tracking_uri) for t in trials),
        figures=tuple(curve_figures(study, trials, histories)),
        sequential=sequential_section(sequential) if sequential is not None else None,
        completeness=completeness_view(study, trials, looks),
        mlflow_user=mlflow_user,
    )


def completeness_view(
    study: StudyView, trials: Sequence[TrialView], looks: Sequence[LookRecord] = ()
) -> CompletenessView | None:
    """An ended study's completeness, as GET /results states it; None while it is queued or running."""
    if StudyStatus(study.status) not in TERMINAL_STATUSES:
        return None
    found = study_completeness(study, trials, looks)
    return CompletenessView(
        complete=found.complete,
        planned=found.planned,
        recorded=found.recorded,
        missing=tuple(trial.label for trial in found.missing),
        tune_missing=tuple(found.tune_missing.items()),
        reason=found.reason,
    )


def sequential_section(summary: SequentialSummary) -> SequentialSection:
    design = summary["design"]
    figure = sequential_figure(summary["looks"], test=str(design["test"]), max_seeds=int(design["max_seeds"]))
    return SequentialSection(
        description=summary["description"],
        reference=summary["reference"],
        looks_taken=len(summary["looks"]),
        planned_looks=tuple(summary["planned_looks"]),
        seeds_per_arm=tuple(summary["seeds_per_arm"].items()),
        open_arms=tuple(summary["open_arms"]),
        comparisons=tuple(
            SequentialComparison(
                method=o["method"],
                decision=o["decision"],
                decision_text=o["decision_text"],
                look=o["look"],
                seeds=o["seeds"],
                estimate=o["estimate"],
                interval=(o["interval"][0], o["interval"][1]),
                interval_level=o["interval_level"],
                p_value=o["p_value"],
            )
            for o in summary["outcomes"]
        ),
        trials_run=summary["trials"]["run"],
        trials_fixed=summary["trials"]["fixed_design"],
        trials_saved=summary["trials"]["saved"],
        figure=Markup(figure.svg) if figure is not None else None,
    )


def curve_figures(
    study: StudyView, trials: Sequence[TrialView], histories: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[CurveFigure]:
    """Per phase, the validation metric and the training loss per epoch, one line per trial; a figure
    only where some trial reported that metric."""
    figures = []
    primary = DATASET_METRICS.get(study.dataset, ("", True))[0]
    metrics = [f"val_{primary}", _LOSS] if primary else [_LOSS]
    for phase in _PHASE_ORDER:
        in_phase = [t for t in trials if t.phase == phase and histories.get(t.trial_key)]
        for metric in metrics:
            curves = [
                EpochCurve(
                    label=_label(study, trial),
                    group=trial.method,
                    points=tuple((int(row["epoch"]), row.get(metric)) for row in histories[trial.trial_key]),
                    finished=trial.status != "running",
                )
                for trial in in_phase
            ]
            if any(value is not None for curve in curves for _, value in curve.points):
                title = f"{phase} phase: {metric} per epoch"
                figures.append(
                    CurveFigure(
                        caption=f"{title}, one line per trial, coloured by method",
                        svg=Markup(epoch_curves_svg(curves, metric=metric, title=title)),
                    )
                )
    return figures


def _attempt_row(attempt: AttemptView, ray_dashboard_url: str) -> AttemptRow:
    return AttemptRow(
        number=attempt.number,
        ray_job_id=attempt.ray_job_id,
        ray_job_url=ray_job_url(ray_dashboard_url, attempt.ray_job_id),
        submitted_at=_iso(attempt.submitted_at) or "",
        ended_at=_iso(attempt.ended_at),
        death_reason=attempt.death_reason,
        interrupted=attempt.interrupted,
    )


def _submit_failure_row(failure: SubmitFailureView) -> SubmitFailureRow:
    return SubmitFailureRow(
        number=failure.number,
        attempt=failure.attempt,
        failed_at=_iso(failure.failed_at) or "",
        error=failure.error,
        retry_at=_iso(failure.retry_at),
    )


def _trial_row(study: StudyView, trial: TrialView, mlflow_tracking_uri: str | None) -> TrialRow:
    experiment = study.mlflow_experiment_id
    run = trial.mlflow_run_id
    return TrialRow(
        key=trial.trial_key,
        label=_label(study, trial),
        phase=trial.phase,
        method=trial.method,
        group=trial.group,
        seed=trial.seed,
        status=trial.status,
        metric_value=trial.metric_value,
        error=trial.error,
        hyperparameters=knob_text(trial.config.get("knobs")),
        # The key holds slashes, which the history route takes as part of the path.
        history_url=f"/studies/{quote(study.id, safe='')}/trials/{quote(trial.trial_key, safe='/')}/history",
        mlflow_url=mlflow_ui_url(mlflow_tracking_uri, experiment_id=experiment, run_id=run)
        if mlflow_tracking_uri and experiment and run
        else None,
    )


_OPTIMISER_FIRST = ("lr", "weight_decay")


def knob_text(knobs: Any) -> str:
    """A trial's knob values in one cell, the optimiser's first, numbers to 3 significant digits."""
    if not isinstance(knobs, dict):
        return ""
    names = [n for n in _OPTIMISER_FIRST if n in knobs] + sorted(
        n for n in knobs if n not in _OPTIMISER_FIRST
    )
    return ", ".join(f"{name} {_knob_value(knobs[name])}" for name in names)


def _knob_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _label(study: StudyView, trial: TrialView) -> str:
    return trial.trial_key.removeprefix(f"{study.id}/")


def _iso(moment: Any) -> str | None:
    return None if moment is None else moment.isoformat()
