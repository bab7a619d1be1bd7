"""A study's trials with their per-epoch histories and knobs, read in one unit of work: what the study
page's interactive charts draw (any metric per epoch, one line per trial; the tuning trials' knobs against
their objective).

Only trials with a stored row are read: the charts name each line by its trial's method and seed, which an
epoch recorded before its trial row (record_trial_epoch allows it) does not know yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from studies.datasets import DATASET_METRICS
from studies.numbers import is_finite_number
from studies.store._epochs import EPOCH_KEY, study_histories
from studies.store._trials import list_trials
from studies.store.errors import StudyNotFoundError
from studies.store.status import Phase
from studies.store.tables import Study

__all__ = ["StudyCurves", "TrialCurve", "study_curves"]

# Where each kind of study searches its knobs, as studies.tuning.TUNING_PHASES says (not imported here:
# studies.tuning loads Optuna, and the store is imported by the study driver and the API alike).
_TUNING_PHASES = {"compare": Phase.TUNE.value, "grid": Phase.GRID.value}


@dataclass(frozen=True)
class TrialCurve:
    """One trial: who it is, the knobs it ran with, its objective and every metric of every epoch."""

    trial_key: str
    label: str  # the key without the study id in front: `tune/autonorm_s/3`
    phase: str
    method: str
    group: str | None  # its grid point, in a grid study
    seed: int | None
    status: str
    knobs: Mapping[str, Any]  # its config's knobs, fixed ones included ({} where the config has none)
    objective: float | None  # the phase's primary metric once it finished (the store's metric_value)
    epochs: tuple[Mapping[str, Any], ...]  # `{"epoch": e, **metrics}` in epoch order


@dataclass(frozen=True)
class StudyCurves:
    study_id: str
    dataset: str
    kind: str
    methods: tuple[str, ...]  # the spec's order: what the charts colour by
    trials: tuple[TrialCurve, ...]  # in start order

    @property
    def metrics(self) -> tuple[str, ...]:
        """Every metric some trial reported a finite number for at some epoch, alphabetical."""
        names = {
            name
            for trial in self.trials
            for row in trial.epochs
            for name, value in row.items()
            if name != EPOCH_KEY and is_finite_number(value)
        }
        return tuple(sorted(names))

    @property
    def default_metric(self) -> str | None:
        """The metric to show first: the validation metric the study is tuned and judged on, where some
        trial reported it, else the first reported (None: no epoch reported yet)."""
        primary = DATASET_METRICS.get(self.dataset, ("", True))[0]
        metrics = self.metrics
        return f"val_{primary}" if f"val_{primary}" in metrics else next(iter(metrics), None)

    @property
    def tuning_phase(self) -> str | None:
        """The phase the study searched its knobs in (None: a kind that searches none)."""
        return _TUNING_PHASES.get(self.kind)

    @property
    def tuning_trials(self) -> tuple[TrialCurve, ...]:
        return tuple(trial for trial in self.trials if trial.phase == self.tuning_phase)

    @property
    def searched_knobs(self) -> tuple[str, ...]:
        """The knobs that take more than one value over the tuning trials, alphabetical: a knob the spec
        fixes is in every trial's config with one value, and an axis of it would say nothing."""
        values: dict[str, set[str]] = {}
        for trial in self.tuning_trials:
            for knob, value in trial.knobs.items():
                values.setdefault(knob, set()).add(repr(value))
        return tuple(sorted(knob for knob, seen in values.items() if len(seen) > 1))

    @property
    def objective(self) -> str:
        """What a tuning trial's objective is: the validation metric of a tune phase, the test metric of a
        sweep's grid (the dataset's primary metric either way)."""
        primary = DATASET_METRICS.get(self.dataset, ("objective", True))[0]
        return f"test_{primary}" if self.tuning_phase == Phase.GRID.value else f"val_{primary}"

    @property
    def higher_is_better(self) -> bool:
        return DATASET_METRICS.get(self.dataset, ("objective", True))[1]


def study_curves(session: Session, *, study_id: str) -> StudyCurves:
    """The study's trials with their histories and knobs; StudyNotFoundError for an unknown study."""
    study = session.get(Study, study_id)
    if study is None:
        raise StudyNotFoundError(study_id)
    trials = list_trials(session, study_id=study_id)
    histories = study_histories(session, study_id=study_id) if trials else {}
    methods = study.spec.get("methods")
    return StudyCurves(
        study_id=study.id,
        dataset=study.dataset,
        kind=study.kind,
        methods=tuple(str(m) for m in methods) if isinstance(methods, list) else (),
        trials=tuple(
            TrialCurve(
                trial_key=trial.trial_key,
                label=trial.trial_key.removeprefix(f"{study_id}/"),
                phase=trial.phase,
                method=trial.method,
                group=trial.group,
                seed=trial.seed,
                status=trial.status,
                knobs=_knobs(trial.config),
                objective=trial.metric_value,
                epochs=tuple(histories.get(trial.trial_key, ())),
            )
            for trial in trials
        ),
    )


def _knobs(config: Mapping[str, Any]) -> dict[str, Any]:
    knobs = config.get("knobs")
    return dict(knobs) if isinstance(knobs, Mapping) else {}
