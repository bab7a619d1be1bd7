"""What must hold before a check may give a verdict: the reference trained, and every arm has data.

A study whose reference never trained says nothing about the methods set against it: FrozenLN at 35 %
on digits (where tiny models reach 97-99 %) "beats" or "loses to" AutoNorm-S only by chance of the
optimiser. So a claim's verdict is computed only after these hold, and is `not tested` (with the
measured level) when one does not:

- `Convergence`: the reference's mean over its completed seeds reaches a stated level (at least, for
  accuracies; at most, for RMSE and perplexity), with the source of that level;
- every arm (method row) of the study has at least two completed seeds with finite values: an arm
  whose trials all failed, or whose metric is NaN (diverged), cannot be compared;
- every AutoNorm-S row a check reads froze its selectors in enough seeds (`freeze_fired`): AutoNorm-S is
  AutoNorm plus the freeze (science.md section 1), so in a seed where the freeze never fired it ran as
  unfrozen AutoNorm, value for value, and a verdict resting on such seeds is not about AutoNorm-S.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from studies.claims._pairs import RowSelector
from studies.claims.trials import PRIMARY, StudyData, TrialData, describe_selector, select
from studies.convergence import Convergence
from studies.evidence.mechanism import seed_mechanism
from studies.methods import FREEZING_METHODS

__all__ = [
    "FREEZE_NOT_FIRED",
    "MIN_FREEZE_FRACTION",
    "MIN_SEEDS_PER_ARM",
    "Convergence",
    "FreezeCount",
    "PreconditionResult",
    "arms_trained",
    "first_unmet",
    "freeze_count",
    "freeze_fired",
    "freezing_rows",
    "reference_converged",
]

# Two completed seeds are the fewest with a spread, hence with an interval.
MIN_SEEDS_PER_ARM = 2

_NUMERATORS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_PARTS = ("half", "third", "quarter", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def _share_in_words(share: float) -> str:
    """A share as a reader says it ("four fifths"), or as a percentage where no fraction with a
    denominator up to ten is exact: the freeze source is then right whatever the threshold is set to."""
    fraction = Fraction(share).limit_denominator(10)
    if float(fraction) != share or fraction.denominator == 1:
        return f"{100 * share:g} %"
    part = _PARTS[fraction.denominator - 2]
    if fraction.numerator > 1:
        part = "halves" if part == "half" else f"{part}s"
    return f"{_NUMERATORS[fraction.numerator - 1]} {part}"


# The share of an AutoNorm-S row's seeds that must have frozen for a verdict to be about AutoNorm-S. A
# seed that never froze ran as AutoNorm, so a mean over the row's seeds mixes the two methods; at 80 % at
# least four fifths of every estimate's weight comes from seeds in which the freeze acted (and at least
# MIN_SEEDS_PER_ARM such seeds, the fewest with an interval of their own).
MIN_FREEZE_FRACTION = 0.8
FREEZE_SOURCE = (
    "NormLab: a seed that never froze ran as unfrozen AutoNorm; at least "
    f"{100 * MIN_FREEZE_FRACTION:g} % of the seeds (and at least {MIN_SEEDS_PER_ARM}) must have frozen for "
    f"{_share_in_words(MIN_FREEZE_FRACTION)} of the estimate to come from AutoNorm-S"
)
FREEZE_NOT_FIRED = "freeze did not fire"


@dataclass(frozen=True)
class PreconditionResult:
    """One precondition, checked: what it asks, whether it holds, and what was measured."""

    name: str  # "reference converged", "arm autonorm_s trained"
    requirement: str  # "frozen_ln test_accuracy >= 0.95 (mean over completed seeds)"
    met: bool
    measured: str  # "0.3488 over 5 seeds", "0 of 5 seeds completed"
    source: str = ""
    reason: str | None = None  # the not-tested reason when unmet

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "requirement": self.requirement,
            "met": self.met,
            "measured": self.measured,
            "source": self.source,
            "reason": self.reason,
        }


def _finite(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def reference_converged(data: StudyData, convergence: Convergence) -> PreconditionResult:
    method = convergence.method or data.reference
    metric = data.metric_name(convergence.metric or PRIMARY)
    values = _finite(data.by_seed(method, convergence.metric).values())
    requirement = f"{method} {metric} {convergence.level_text} (mean over completed seeds)"
    if not values:
        return PreconditionResult(
            "reference converged",
            requirement,
            False,
            "no completed seed",
            convergence.source,
            reason=f"reference did not converge: {method} has no completed seed with a finite {metric}",
        )
    mean = sum(values) / len(values)
    measured = f"{mean:.4g} over {len(values)} seed(s)"
    met = convergence.met_by(mean)
    reason = (
        None
        if met
        else f"reference did not converge: {method} {metric} {mean:.4g}, needs {convergence.level_text}"
    )
    return PreconditionResult("reference converged", requirement, met, measured, convergence.source, reason)


def arms_trained(data: StudyData, methods: Sequence[str] | None = None) -> list[PreconditionResult]:
    """Each arm (every method the study ran, or `methods`) has MIN_SEEDS_PER_ARM completed seeds with a
    finite primary metric. Grid points of one method count together: a grid's rows are points of one arm."""
    arms = list(dict.fromkeys(methods if methods is not None else (t.method for t in data.trials)))
    results = []
    for method in arms:
        trials = [t for t in data.trials if t.method == method]
        completed = [t for t in trials if t.completed]
        finite = _finite(t.get(PRIMARY) for t in completed)
        met = len(finite) >= MIN_SEEDS_PER_ARM
        measured = f"{len(finite)} of {len(trials)} trial(s) completed with a finite {data.metric}"
        reason = None
        if not met:
            if not trials:
                why = "has no trial"
            elif len(completed) < len(trials) and len(finite) < MIN_SEEDS_PER_ARM:
                why = f"failed ({len(trials) - len(completed)} of {len(trials)} trial(s) did not complete)"
            else:
                why = f"diverged ({len(completed) - len(finite)} completed trial(s) with a non-finite {data.metric})"
            reason = f"arm {method} {why}"
        results.append(
            PreconditionResult(
                f"arm {method} trained",
                f">= {MIN_SEEDS_PER_ARM} completed seeds with a finite {data.metric}",
                met,
                measured,
                "NormLab: an interval needs at least two replicates",
                reason,
            )
        )
    return results


def first_unmet(results: Iterable[PreconditionResult]) -> PreconditionResult | None:
    return next((r for r in results if not r.met), None)


# ----- the AutoNorm-S freeze ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FreezeCount:
    """Per seed of one AutoNorm-S row (completed trials): whether its freeze fired."""

    label: str  # "autonorm_s", "autonorm_s [t_freeze=5,eps_h=0.1]"
    fired: tuple[int, ...]  # seeds whose selectors froze
    not_fired: tuple[int, ...]  # seeds that reached T_freeze with no freeze: they ran as AutoNorm
    not_recorded: tuple[int, ...]  # seeds whose history does not say (a run from before the freeze metric)

    @property
    def n(self) -> int:
        return len(self.fired) + len(self.not_fired) + len(self.not_recorded)

    def needed(self, *, every: bool = False) -> int:
        """Seeds that must have frozen: all of them (`every`), else MIN_FREEZE_FRACTION of them and at
        least MIN_SEEDS_PER_ARM."""
        if every:
            return max(self.n, 1)
        return max(MIN_SEEDS_PER_ARM, math.ceil(MIN_FREEZE_FRACTION * self.n - 1e-9))

    def enough(self, *, every: bool = False) -> bool:
        return len(self.fired) >= self.needed(every=every)

    @property
    def measured(self) -> str:
        """ "froze in seeds 0, 2, 5 (3 of 8)", with the seeds whose history does not record it."""
        seeds = ", ".join(str(s) for s in self.fired)
        text = (
            f"froze in seeds {seeds} ({len(self.fired)} of {self.n})"
            if self.fired
            else f"froze in 0 of {self.n} seeds"
        )
        if self.not_recorded:
            text += "; not recorded in seeds " + ", ".join(str(s) for s in self.not_recorded)
        return text


def freeze_count(label: str, trials: Iterable[TrialData]) -> FreezeCount:
    """Whether each completed trial's freeze fired, read from its per-epoch history (the training loop's
    `gates_frozen` / `freeze_epoch`); a trial whose history never reports them is `not_recorded`."""
    fired, not_fired, not_recorded = [], [], []
    for trial in sorted((t for t in trials if t.completed), key=lambda t: int(t.seed)):
        seed = int(trial.seed)
        mechanism = seed_mechanism(trial)
        if mechanism.froze:
            fired.append(seed)
        elif _records_freeze(trial):
            not_fired.append(seed)
        else:
            not_recorded.append(seed)
    return FreezeCount(label, tuple(fired), tuple(not_fired), tuple(not_recorded))


def _records_freeze(trial: TrialData) -> bool:
    rows = [*trial.history, trial.metrics] if trial.history else [trial.metrics]
    return any(row.get("gates_frozen") is not None for row in rows)


def freeze_fired(data: StudyData, row: RowSelector, *, every: bool = False) -> PreconditionResult:
    """The freeze fired in enough of `row`'s seeds: MIN_FREEZE_FRACTION of them, or all (`every`, for a
    claim about what follows the freeze)."""
    count = freeze_count(describe_selector(row), select(data.trials, row))
    needed = count.needed(every=every)
    met = count.n > 0 and count.enough(every=every)
    if every:
        requirement = f"every {count.label} seed froze its selectors"
        source = "the claim is about what follows the freeze: every trial must have frozen"
    else:
        requirement = (
            f"{count.label} froze its selectors in >= {MIN_FREEZE_FRACTION:.0%} of its seeds "
            f"(>= {MIN_SEEDS_PER_ARM})"
        )
        source = FREEZE_SOURCE
    reason = None
    if not met:
        reason = (
            f"{FREEZE_NOT_FIRED}: {count.label} {count.measured}, needs {needed}; in a seed without the "
            "freeze AutoNorm-S ran as unfrozen AutoNorm"
        )
    return PreconditionResult(
        f"freeze fired ({count.label})", requirement, met, count.measured, source, reason
    )


def freezing_rows(check: Any, reference: RowSelector | None = None) -> list[RowSelector]:
    """The rows of a method with the freeze schedule (AutoNorm-S) that a check reads, read off its
    parameters: both sides of each compared pair (a pair's missing reference is `reference`, the study's)
    and the method a gate pattern or a trend reads. The sweep is left out: it judges the freeze per grid
    point itself (studies.claims.sweep)."""
    rows: list[RowSelector | None] = []
    if check.type == "difference":
        rows = [check.method, check.reference if check.reference is not None else reference]
    elif check.type == "ordering":
        for pair in check.pairs:
            rows += [pair.method, pair.reference if pair.reference is not None else reference]
    elif check.type in ("gate_pattern", "trend"):
        rows = [check.method]
    chosen: list[RowSelector] = []
    for row in rows:
        if row is not None and _method(row) in FREEZING_METHODS and row not in chosen:
            chosen.append(row)
    return chosen


def _method(row: RowSelector) -> Any:
    return row if isinstance(row, str) else row.get("method")
