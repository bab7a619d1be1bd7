"""Whether a study is complete: every trial its spec plans is in the store with an outcome.

The trials a study plans: each tuned method's tuning samples (kind: compare), and every final trial (each
method on each seed) or grid trial (each method, grid point and seed). A sequential design plans the
seeds its looks gave each arm (a method, or a grid point): the first look's for every arm, then each later
look's for the arms still open after the look before it (`looks`: the stored records, or the driver's replay).

A trial counts once it has an outcome, succeeded or failed; a running trial, a trial cancelled with a
dead driver (its work runs again) and a trial the store never heard of do not. The study driver checks
this before it marks a study succeeded (workers.driver.completeness, which first recovers what Tune and
MLflow hold); GET /results states it for every study it shows, so an incomplete study cannot pass for a
complete one, nor hide one (service.api.results).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from studies.spec import StudySpec
from studies.store._looks import study_looks
from studies.store._trials import list_trials
from studies.store.status import Phase, StudyStatus, TrialStatus
from studies.store.views import StudyView, TrialView

if TYPE_CHECKING:
    from studies.sequential import LookRecord

__all__ = [
    "OUTCOMES",
    "PlannedTrial",
    "StudyCompleteness",
    "describe_missing",
    "planned_result_trials",
    "planned_tune_trials",
    "read_completeness",
    "study_completeness",
]

# The statuses that are a trial's outcome.
OUTCOMES = frozenset({TrialStatus.SUCCEEDED.value, TrialStatus.FAILED.value})
_SHOWN_MISSING = 20  # missing trials named in a reason; the rest are counted


@dataclass(frozen=True)
class PlannedTrial:
    """One final or grid trial a study plans: what its trial key names (workers.trials.keys)."""

    phase: str  # final | grid
    method: str
    group: str | None  # the grid point's label (kind: grid), else None
    seed: int

    @property
    def label(self) -> str:
        """How a person names it: "autonorm_s seed 3", "frozen_ln [width_expansion=2.0] seed 0"."""
        group = f" [{self.group}]" if self.group else ""
        return f"{self.method}{group} seed {self.seed}"


def planned_result_trials(spec: StudySpec, looks: Sequence[LookRecord] = ()) -> list[PlannedTrial]:
    """Every final or grid trial of the study, in the spec's order (see the module docstring)."""
    arms: list[tuple[str, str | None]] = (
        [(method, point.label) for method in spec.methods for point in spec.grid_points(method)]
        if spec.kind == "grid"
        else [(method, None) for method in spec.methods]
    )
    phase = Phase.GRID.value if spec.kind == "grid" else Phase.FINAL.value
    seeds = {arm: list(spec.seeds) for arm in arms}
    design = spec.sequential
    if design is not None:
        # What the looks gave each arm: the first look's seeds, then each look's to the arms it left open.
        seeds = {arm: design.seeds_added_at(0) for arm in arms}
        name_of = {spec.arm_of(method, group): (method, group) for method, group in arms}
        for index, record in enumerate(looks):
            if index + 1 >= len(design.looks()):
                break
            for arm in record.open_arms:
                seeds[name_of[arm]].extend(design.seeds_added_at(index + 1))
    return [
        PlannedTrial(phase, method, group, seed) for method, group in arms for seed in seeds[(method, group)]
    ]


def planned_tune_trials(spec: StudySpec) -> dict[str, int]:
    """Tuning trials of each tuned method (kind: compare; a method without searchable knobs has none)."""
    if spec.kind != "compare":
        return {}
    return {method: spec.num_samples_for(method) for method in spec.methods if spec.tunes(method)}


@dataclass(frozen=True)
class StudyCompleteness:
    """How much of what a study plans the store holds, and whether that is all of it."""

    study_id: str
    name: str
    status: str
    complete: bool  # succeeded with every planned trial's outcome stored
    planned: int  # final or grid trials planned (a sequential design: what its looks gave each method)
    recorded: int  # of them, stored with an outcome
    succeeded: int  # of them, succeeded
    missing: tuple[PlannedTrial, ...]  # planned final or grid trials without a stored outcome
    tune_planned: dict[str, int]  # tuning trials per tuned method
    tune_recorded: dict[str, int]  # of them, stored with an outcome
    reason: str  # in words: why it is complete or not

    @property
    def tune_missing(self) -> dict[str, int]:
        return {
            method: planned - self.tune_recorded.get(method, 0)
            for method, planned in self.tune_planned.items()
            if self.tune_recorded.get(method, 0) < planned
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "study_id": self.study_id,
            "name": self.name,
            "status": self.status,
            "complete": self.complete,
            "planned": self.planned,
            "recorded": self.recorded,
            "succeeded": self.succeeded,
            "missing": [trial.label for trial in self.missing],
            "tune_planned": dict(self.tune_planned),
            "tune_recorded": dict(self.tune_recorded),
            "reason": self.reason,
        }


def study_completeness(
    study: StudyView, trials: Iterable[TrialView], looks: Sequence[LookRecord] = ()
) -> StudyCompleteness:
    """The completeness of `study` from its stored `trials` (every phase) and, for a sequential design, its
    stored `looks`."""
    spec = StudySpec.model_validate(study.spec)
    trials = list(trials)
    planned = planned_result_trials(spec, looks)
    ended = {
        (t.phase, t.method, t.group, t.seed): t.status
        for t in trials
        if t.phase != Phase.TUNE.value and t.status in OUTCOMES and t.seed is not None
    }
    statuses = [ended.get((p.phase, p.method, p.group, p.seed)) for p in planned]
    missing = tuple(p for p, status in zip(planned, statuses, strict=True) if status is None)
    tune_planned = planned_tune_trials(spec)
    tune_counts = Counter(t.method for t in trials if t.phase == Phase.TUNE.value and t.status in OUTCOMES)
    tune_recorded = {method: min(tune_counts.get(method, 0), n) for method, n in tune_planned.items()}
    succeeded = study.status == StudyStatus.SUCCEEDED.value
    tune_short = {m: n - tune_recorded[m] for m, n in tune_planned.items() if tune_recorded[m] < n}
    complete = succeeded and not missing and not tune_short
    return StudyCompleteness(
        study_id=study.id,
        name=study.name,
        status=study.status,
        complete=complete,
        planned=len(planned),
        recorded=len(planned) - len(missing),
        succeeded=sum(status == TrialStatus.SUCCEEDED.value for status in statuses),
        missing=missing,
        tune_planned=tune_planned,
        tune_recorded=tune_recorded,
        reason=_reason(study, planned, missing, tune_short, sequential=spec.sequential is not None),
    )


def read_completeness(session: Session, studies: Sequence[StudyView]) -> list[StudyCompleteness]:
    """The completeness of each of `studies`, from the store (its trials of every phase and its looks)."""
    return [
        study_completeness(
            study,
            list_trials(session, study_id=study.id),
            study_looks(session, study.id) if study.spec.get("sequential") else (),
        )
        for study in studies
    ]


def describe_missing(missing: Sequence[PlannedTrial], tune_short: dict[str, int]) -> str:
    """ "3 final trials (autonorm_s seed 1, ...) and 2 tuning trials of dyt": what is missing, in words."""
    parts = []
    if missing:
        phase = "grid" if missing[0].phase == Phase.GRID.value else "final"
        names = ", ".join(trial.label for trial in missing[:_SHOWN_MISSING])
        more = f" and {len(missing) - _SHOWN_MISSING} more" if len(missing) > _SHOWN_MISSING else ""
        parts.append(f"{len(missing)} {phase} trial{'s' if len(missing) != 1 else ''} ({names}{more})")
    for method, n in tune_short.items():
        parts.append(f"{n} tuning trial{'s' if n != 1 else ''} of {method}")
    return " and ".join(parts)


def _reason(
    study: StudyView,
    planned: Sequence[PlannedTrial],
    missing: Sequence[PlannedTrial],
    tune_short: dict[str, int],
    *,
    sequential: bool,
) -> str:
    so_far = " so far" if sequential and study.status != StudyStatus.SUCCEEDED.value else ""
    held = f"{len(planned) - len(missing)} of {len(planned)} planned final or grid trials{so_far} have an outcome"
    if missing or tune_short:
        held += f"; missing: {describe_missing(missing, tune_short)}"
    if study.status == StudyStatus.SUCCEEDED.value:
        if missing or tune_short:
            return f"incomplete: the study is marked succeeded but {held}"
        return f"complete: {held}"
    return f"incomplete: the study is {study.status}; {held}"
