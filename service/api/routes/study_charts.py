"""/studies/{id}/epochs and /studies/{id}/tuning: what the study page's interactive charts draw.

- `epochs`: every trial with every metric it reported per epoch (any metric, for the page's picker), and
  the tuning trials' searched knobs against their objective (its parallel coordinates). One read-only unit
  of work (studies.store.study_curves); cheap enough to poll while the study runs.
- `tuning`: the study's knob importance and optimisation history (studies.tuning), the same numbers the
  results page and the report print. Optuna's evaluators are CPU work, so they run after the read, in a
  worker thread that holds no connection, and Optuna loads with the first request, not with the API.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel
from sqlalchemy.orm import Session

from service.api.deps import DatabaseDep
from service.api.errors import error_responses
from service.api.routes.text import StorableText
from studies.store import StudyCurves, StudyView, TrialCurve, get_study, study_curves

if TYPE_CHECKING:
    from studies.tuning import TuningTrial

__all__ = ["router"]

router = APIRouter(prefix="/studies", tags=["studies"])


class EpochOut(BaseModel):
    epoch: int  # 0: before training
    metrics: dict[str, Any]  # every metric the trial reported that epoch; null where not finite


class TrialCurveOut(BaseModel):
    trial_key: str
    label: str  # the key without the study id: what the charts name the trial by
    phase: str
    method: str
    group: str | None
    seed: int | None
    status: str
    knobs: dict[str, Any]  # its config's knobs, fixed ones included
    objective: float | None  # the phase's primary metric, once it finished
    epochs: list[EpochOut]  # in epoch order; empty until it reports one

    @classmethod
    def from_curve(cls, trial: TrialCurve) -> TrialCurveOut:
        return cls(
            trial_key=trial.trial_key,
            label=trial.label,
            phase=trial.phase,
            method=trial.method,
            group=trial.group,
            seed=trial.seed,
            status=trial.status,
            knobs=dict(trial.knobs),
            objective=trial.objective,
            epochs=[
                EpochOut(epoch=row["epoch"], metrics={k: v for k, v in row.items() if k != "epoch"})
                for row in trial.epochs
            ],
        )


class TuningTrialOut(BaseModel):
    trial_key: str
    label: str
    method: str
    seed: int | None
    status: str
    knobs: dict[str, Any]  # the searched knobs it ran with (those it has)
    objective: float | None  # None: failed, cancelled or still running


class TuningCoordinatesOut(BaseModel):
    """The tuning trials as parallel coordinates: one axis per searched knob, then the objective."""

    phase: str  # tune (a compare study) or grid (a sweep)
    objective: str  # e.g. val_accuracy (tune) or test_accuracy (grid)
    higher_is_better: bool
    knobs: list[str]  # the knobs that take more than one value over the trials, alphabetical
    trials: list[TuningTrialOut]  # in start order


class StudyEpochsOut(BaseModel):
    study_id: str
    methods: list[str]  # the spec's order: what the charts colour by
    metrics: list[str]  # every metric some trial reported a finite number for, alphabetical
    default_metric: str | None  # the validation metric where reported, else the first; None: no epoch yet
    trials: list[TrialCurveOut]  # in start order
    tuning: TuningCoordinatesOut | None  # None: the study searches no knobs, or no tuning trial started

    @classmethod
    def from_curves(cls, curves: StudyCurves) -> StudyEpochsOut:
        return cls(
            study_id=curves.study_id,
            methods=list(curves.methods),
            metrics=list(curves.metrics),
            default_metric=curves.default_metric,
            trials=[TrialCurveOut.from_curve(t) for t in curves.trials],
            tuning=_coordinates(curves),
        )


def _coordinates(curves: StudyCurves) -> TuningCoordinatesOut | None:
    tuning = curves.tuning_trials
    if curves.tuning_phase is None or not tuning:
        return None
    knobs = curves.searched_knobs
    return TuningCoordinatesOut(
        phase=curves.tuning_phase,
        objective=curves.objective,
        higher_is_better=curves.higher_is_better,
        knobs=list(knobs),
        trials=[
            TuningTrialOut(
                trial_key=t.trial_key,
                label=t.label,
                method=t.method,
                seed=t.seed,
                status=t.status,
                knobs={k: t.knobs[k] for k in knobs if k in t.knobs},
                objective=t.objective,
            )
            for t in tuning
        ],
    )


class StudyTuningOut(BaseModel):
    study_id: str
    # studies.tuning.StudyTuning.to_json(): per method, the importance of each swept knob by evaluator
    # (with its spread, or the reason it has none) and the optimisation history; None where the study
    # neither tunes nor sweeps, or its stored spec no longer validates.
    tuning: dict[str, Any] | None


@router.get(
    "/{study_id}/epochs",
    response_model=StudyEpochsOut,
    responses=error_responses(404, 503),
    summary="Every trial's metrics per epoch, with the tuning trials' searched knobs and objective",
)
async def read_study_epochs(study_id: StorableText, database: DatabaseDep) -> StudyEpochsOut:
    curves = await database.read(partial(study_curves, study_id=study_id))
    return StudyEpochsOut.from_curves(curves)


@router.get(
    "/{study_id}/tuning",
    response_model=StudyTuningOut,
    responses=error_responses(404, 503),
    summary="A study's knob importance (fANOVA, PED-ANOVA) and optimisation history, per tuned method",
)
async def read_study_tuning(study_id: StorableText, database: DatabaseDep) -> StudyTuningOut:
    study, trials = await database.read(partial(_tuning_trials, study_id=study_id))
    # Imported here, as the results route does: Optuna loads with the first request that needs it.
    from studies.store.results_tuning import tuning_of

    views = await run_in_threadpool(tuning_of, study, trials)
    return StudyTuningOut(study_id=study.id, tuning=None if views is None else views.to_json())


def _tuning_trials(session: Session, *, study_id: str) -> tuple[StudyView, list[TuningTrial]]:
    from studies.store.results_tuning import stored_tuning_trials

    study = get_study(session, study_id=study_id)
    return study, stored_tuning_trials(session, study)
