"""A study's report, assembled from the store: the study, its final-phase (or grid) trials with their
per-epoch histories, the catalog claim its spec names, the mechanism figures, its knob importance and
optimisation history (studies.store.results_tuning) and provenance, handed to the pure report builder
(studies.report). No FastAPI here: the route only picks the rendering."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError
from sqlalchemy.orm import Session

from normlab.loading import changed_on_disk, entry_ref
from service.api.errors import ClaimNotServedError
from service.api.mlflow_links import mlflow_ui_url
from studies.catalog import SIZES, Claim, UnknownClaimError, claim_ids, claims_reading, get_claim, spec_path
from studies.claims import StudyData, TrialData
from studies.evidence import build_evidence
from studies.provenance import PROVENANCE_PACKAGES, git_revision, package_versions
from studies.report import Figure, Provenance, StudyReport, build_report
from studies.report.sequential import looks_outcomes, with_sequential
from studies.spec import DATASET_METRICS, StudySpec, higher_is_better
from studies.store import (
    TERMINAL_STATUSES,
    StudyStatus,
    StudyView,
    TrialView,
    get_study,
    list_trials,
    study_histories,
    study_sequential,
)
from studies.store.results import planned_seeds
from studies.store.results_evidence import RESULT_PHASES, evidence_trial
from studies.tables.dataset_notes import dataset_note
from studies.tables.render_evidence_svg import evidence_figures

if TYPE_CHECKING:
    from studies.tuning import StudyTuning

__all__ = ["served_claims", "study_report"]


def study_report(
    session: Session, *, study_id: str, claim_id: str | None = None, mlflow_tracking_uri: str | None = None
) -> StudyReport:
    """The report of one study; StudyNotFoundError (404) for an unknown id. A study that has not finished
    gets a report of the trials finished so far (the notes say so). `claim_id` judges the study against
    another claim it serves (ClaimNotServedError, 422, for one it does not). With `mlflow_tracking_uri`
    the provenance links the study's experiment in the MLflow UI."""
    study = get_study(session, study_id=study_id)
    spec_claim = study.spec.get("claim")
    if claim_id is not None:
        served = served_claims(spec_claim, study.spec.get("name"))
        if claim_id not in served:
            raise ClaimNotServedError(claim_id, served)
    trials = list_trials(session, study_id=study_id, phase=list(RESULT_PHASES))
    histories = study_histories(session, study_id=study_id, phase=list(RESULT_PHASES)) if trials else {}
    spec, notes = _spec(study)
    claim, claim_note = _claim(claim_id or spec_claim)
    notes += claim_note
    if StudyStatus(study.status) not in TERMINAL_STATUSES:
        notes.append(f"the study is {study.status}: this report covers the trials finished so far")
    elif study.status != StudyStatus.SUCCEEDED:
        notes.append(f"the study {study.status}" + (f": {study.error}" if study.error else ""))

    metric = f"test_{DATASET_METRICS[study.dataset][0]}"  # the claims' checks read the test-split metric
    higher = higher_is_better(study.dataset, metric)
    # A sequential study: its arms were planned only the seeds its looks gave them, and its comparisons
    # are the design's (studies.report.sequential), which a claim is judged on too.
    sequential = study_sequential(session, study=study) if spec is not None and spec.sequential else None
    data = StudyData(
        dataset=study.dataset,
        metric=metric,
        higher_is_better=higher,
        reference=spec.reference if spec is not None else str(study.spec.get("reference_method") or ""),
        trials=tuple(_trial_data(t, histories.get(t.trial_key, ())) for t in trials if t.seed is not None),
        sequential=looks_outcomes(sequential) if sequential is not None else None,
    )
    arms = [sequential["seeds_per_arm"]] if sequential is not None else []
    report = build_report(
        data,
        provenance=_provenance(study, spec, mlflow_tracking_uri),
        kind=study.kind,
        claim=claim,
        spec_paper_numbers=dict(spec.paper_numbers) if spec is not None else {},
        planned_seeds=planned_seeds([spec], seeds_per_arm=arms) if spec is not None else None,
        figures=_figures(trials, histories, dataset=study.dataset, metric=data.metric, higher=higher),
        dataset_note=dataset_note(study.dataset),
        notes=notes,
        convergence=spec.convergence if spec is not None else None,
        tuning=_tuning(session, study),
    )
    return report if sequential is None else with_sequential(report, sequential)


def served_claims(spec_claim: Any, spec_name: Any = None) -> list[str]:
    """The claims a study whose spec names `spec_claim` serves: that claim and those sharing its study. A
    claim that shares it at one size only (`shares_study_at`) is served when the study is that size's
    catalog spec (`spec_name`, e.g. catalog-cifar10-cpu), since at other sizes it has data of its own."""
    if not isinstance(spec_claim, str) or spec_claim not in claim_ids():
        return []
    for size in SIZES:
        path = spec_path(spec_claim, size)
        if isinstance(spec_name, str) and path.exists() and _spec_name(path) == spec_name:
            return claims_reading(spec_claim, size)
    return claims_reading(spec_claim)


def _spec_name(path: Path) -> object:
    # Every report and results page asks, for each size: the YAML is parsed again only when it changed.
    return _spec_name_of(str(path), path.stat().st_mtime_ns)


@lru_cache(maxsize=256)
def _spec_name_of(path: str, modified_ns: int) -> object:
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    return data.get("name") if isinstance(data, dict) else None


def _spec(study: StudyView) -> tuple[StudySpec | None, list[str]]:
    """The stored spec, validated; a spec an older version accepted but this one refuses still reports."""
    try:
        return StudySpec.model_validate(study.spec), []
    except ValidationError as exc:
        return None, [
            f"the stored spec no longer validates ({exc.error_count()} problem(s)); seeds and "
            "planned rows come from the trials alone"
        ]


def _claim(claim_id: Any) -> tuple[Claim | None, list[str]]:
    if not isinstance(claim_id, str) or not claim_id:
        return None, []
    try:
        return get_claim(claim_id), []
    except UnknownClaimError as exc:
        return None, [
            f"the spec names claim '{claim_id}', which the catalog does not hold ({exc}): "
            "the report compares rows only"
        ]


def _trial_data(trial: TrialView, history: Sequence[Mapping[str, Any]]) -> TrialData:
    knobs = trial.config.get("knobs")
    return TrialData(
        method=trial.method,
        seed=int(trial.seed),  # type: ignore[arg-type]  # callers keep seeded trials only
        status=trial.status,
        value=trial.metric_value,
        metrics=dict(trial.metrics),
        group=trial.group,
        knobs=dict(knobs) if isinstance(knobs, Mapping) else {},
        history=tuple(history),
        trial_key=trial.trial_key,
        mlflow_run_id=trial.mlflow_run_id,
    )


def _figures(
    trials: Sequence[TrialView],
    histories: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    dataset: str,
    metric: str,
    higher: bool,
) -> list[Figure]:
    """The mechanism figures (gates per layer and epoch, init rank by depth, metric vs init rank)."""
    if not trials:
        return []
    evidence = build_evidence(
        (evidence_trial(t, histories.get(t.trial_key, ())) for t in trials),
        dataset=dataset,
        metric=metric,
        higher_is_better=higher,
    )
    return list(evidence_figures(evidence))


def _tuning(session: Session, study: StudyView) -> StudyTuning | None:
    """Knob importance and optimisation history of the study's tune (or sweep's grid) trials."""
    # Imported here: Optuna loads with the first report that shows tuning, not with the API.
    from studies.store.results_tuning import stored_tuning_trials, tuning_of

    return tuning_of(study, stored_tuning_trials(session, study))


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _provenance(study: StudyView, spec: StudySpec | None, mlflow_tracking_uri: str | None) -> Provenance:
    raw = study.spec
    experiment = study.mlflow_experiment_id
    seeds = tuple(spec.seeds) if spec is not None else tuple(raw.get("seeds") or ())
    tune_seeds = tuple(spec.tune_seeds or ()) if spec is not None else tuple(raw.get("tune_seeds") or ())
    return Provenance(
        study_id=study.id,
        study_name=study.name,
        status=study.status,
        spec=dict(raw),
        seeds=seeds,
        tune_seeds=tune_seeds,
        split_seed=int(spec.split_seed if spec is not None else raw.get("split_seed") or 0),
        normlab_version=package_versions(("normlab",))["normlab"],
        git_revision=git_revision(),
        packages=package_versions(PROVENANCE_PACKAGES[1:]),
        generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        created_at=_iso(study.created_at),
        started_at=_iso(study.started_at),
        finished_at=_iso(study.finished_at),
        mlflow_experiment_id=experiment,
        mlflow_experiment_url=mlflow_ui_url(mlflow_tracking_uri, experiment_id=experiment)
        if mlflow_tracking_uri and experiment
        else None,
        ray_job_id=study.ray_job_id,
        plugins=tuple(_plugin_line(entry) for entry in raw.get("plugins") or ()),
    )


def _plugin_line(entry: dict) -> str:
    line = f"{entry_ref(entry)} sha256 {entry.get('sha256')} (package {entry.get('package')})"
    if entry.get("distribution"):
        line += f", installed as {entry['distribution']}"
    changed = changed_on_disk(entry)
    return line + (f"; {changed}" if changed else "")
