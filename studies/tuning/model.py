"""A study's tuning views, as data: per method, the importance of each swept knob (with its spread), the
optimisation history of its tune trials and, for a sweep, the objective against each knob. The renderers
(studies.tables.render_tuning_svg, the results page, the report) read these and never the builder."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from studies.evidence import MeanInterval
from studies.evidence.build import jsonable

__all__ = [
    "EvaluatorImportance",
    "HistoryPoint",
    "KnobImportance",
    "KnobResponse",
    "MethodImportance",
    "MethodTuning",
    "OptimisationHistory",
    "ResponsePoint",
    "ResponseTrial",
    "StudyTuning",
]


@dataclass(frozen=True)
class KnobImportance:
    """One knob's share of the importance (a fit's shares sum to 1 over the assessed knobs): the mean over
    the fits the spread is over, their sample standard deviation (None with one fit) and their range."""

    knob: str
    importance: float
    sd: float | None
    low: float
    high: float


@dataclass(frozen=True)
class EvaluatorImportance:
    """One Optuna evaluator's importances of a method's knobs, most important first; `knobs` is empty and
    `reason` says why when it gives no numbers."""

    evaluator: str  # "fanova" | "ped_anova"
    settings: Mapping[str, Any]  # the arguments the evaluator ran with (fANOVA: its forest seeds too)
    spread_over: str | None  # what the fits behind the mean and spread differ in; None: one fit
    fits: int
    knobs: tuple[KnobImportance, ...] = ()
    reason: str | None = None


@dataclass(frozen=True)
class MethodImportance:
    """The importance of a method's swept knobs, from its completed trials. `reason` (no evaluator ran)
    and `omitted` (knobs left out) say why a number is missing; none is ever made up."""

    trials: int  # completed trials with a finite objective, in the space (what the evaluators read)
    knobs: tuple[str, ...]  # the knobs assessed
    omitted: Mapping[str, str] = field(default_factory=dict)  # knob -> why it is not assessed
    evaluators: tuple[EvaluatorImportance, ...] = ()
    reason: str | None = None
    skipped_trials: int = 0  # completed trials whose knobs lie outside the spec's space (not read)


@dataclass(frozen=True)
class HistoryPoint:
    """One tune trial, in the order the study started them."""

    number: int  # 0-based position among the method's tune trials
    trial_key: str
    status: str
    value: float | None  # its objective; None: failed, cancelled or still running
    best_so_far: float | None  # the best objective of trials 0..number (None until one has a value)
    params: Mapping[str, Any]  # the swept knobs it ran with
    epochs: int | None  # its last reported epoch (fewer than the budget: stopped early by ASHA)


@dataclass(frozen=True)
class OptimisationHistory:
    points: tuple[HistoryPoint, ...]
    best_number: int | None  # the trial the final phase took its knobs from (first on a tie); None: none


@dataclass(frozen=True)
class ResponseTrial:
    """One completed trial at a knob value: a faint dot behind the mean."""

    seed: int | None
    objective: float


@dataclass(frozen=True)
class ResponsePoint:
    """The objective at one value of a knob: per seed the mean over the trials at that value (the other
    knobs at every value they take), then the mean and t interval over seeds."""

    value: Any  # the knob's value (a grid value of the spec)
    objective: MeanInterval  # n: the seeds
    trials: tuple[ResponseTrial, ...] = ()  # every completed trial at this value


@dataclass(frozen=True)
class KnobResponse:
    knob: str
    points: tuple[ResponsePoint, ...]  # one per grid value, in the spec's order


@dataclass(frozen=True)
class MethodTuning:
    method: str
    importance: MethodImportance
    history: OptimisationHistory | None = None  # tune phase only (a grid has no order to optimise in)
    response: tuple[KnobResponse, ...] = ()  # sweeps only: one per knob the grid varies


@dataclass(frozen=True)
class StudyTuning:
    """The tuning views of one study: of its tune trials (kind compare) or of its grid trials (a sweep)."""

    study_id: str
    study_name: str
    phase: str  # "tune" | "grid": the trials read
    objective: str  # the metric the trials are scored on, e.g. val_accuracy (tune) or test_accuracy (grid)
    higher_is_better: bool
    confidence: float  # of the response figure's t intervals
    methods: tuple[MethodTuning, ...]

    @property
    def is_empty(self) -> bool:
        return not self.methods

    def to_json(self) -> dict[str, Any]:
        """Plain JSON types (lists, not tuples); None where a number is undefined."""
        return jsonable(dataclasses.asdict(self))
