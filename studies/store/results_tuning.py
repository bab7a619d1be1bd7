"""A study's tuning views (studies.tuning) from the store: its tune trials (kind compare) or grid trials (a
sweep), read in a session, the views built after it (Optuna's evaluators are CPU work that holds no
connection). GET /results, the study report and the study driver's MLflow artifacts all build here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from studies.numbers import is_finite_number
from studies.spec import StudySpec
from studies.store import StudyView, TrialView, list_trials
from studies.tuning import TUNING_PHASES, StudyTuning, TuningTrial, study_tuning

__all__ = ["stored_tuning_trials", "tuning_of", "tuning_trial"]


def stored_tuning_trials(session: Session, study: StudyView) -> list[TuningTrial]:
    """The trials a study is tuned on (its tune phase, or a sweep's grid), in start order."""
    phase = TUNING_PHASES.get(study.kind)
    if phase is None:
        return []
    return [tuning_trial(t) for t in list_trials(session, study_id=study.id, phase=phase)]


def tuning_of(study: StudyView, trials: list[TuningTrial], *, confidence: float = 0.95) -> StudyTuning | None:
    """The tuning views of `study` from its stored tuning trials; None when it neither tunes nor sweeps,
    or when its stored spec no longer validates (no space to read the trials in)."""
    try:
        spec = StudySpec.model_validate(study.spec)
    except ValidationError:
        return None
    return study_tuning(spec, trials, study_id=study.id, confidence=confidence)


def tuning_trial(trial: TrialView) -> TuningTrial:
    """A stored trial as studies.tuning reads it: its knobs from its config, its last reported epoch."""
    knobs = trial.config.get("knobs")
    epoch = trial.metrics.get("epoch")
    return TuningTrial(
        trial_key=trial.trial_key,
        method=trial.method,
        seed=trial.seed,
        status=trial.status,
        value=trial.metric_value,
        knobs=dict(knobs) if isinstance(knobs, Mapping) else {},
        epochs=_whole(epoch),
    )


def _whole(value: Any) -> int | None:
    return int(value) if is_finite_number(value) and float(value).is_integer() else None
