"""What must hold before a check may give a verdict: the reference trained, and every arm has data.

A study whose reference never trained says nothing about the methods set against it: FrozenLN at 35 %
on digits (where tiny models reach 97-99 %) "beats" or "loses to" AutoNorm-S only by chance of the
optimiser. So a claim's verdict is computed only after these hold, and is `not tested` (with the
measured level) when one does not:

- `Convergence`: the reference's mean over its completed seeds reaches a stated level (at least, for
  accuracies; at most, for RMSE and perplexity), with the source of that level;
- every arm (method row) of the study has at least two completed seeds with finite values: an arm
  whose trials all failed, or whose metric is NaN (diverged), cannot be compared.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from studies.claims.trials import PRIMARY, StudyData
from studies.convergence import Convergence

__all__ = [
    "MIN_SEEDS_PER_ARM",
    "Convergence",
    "PreconditionResult",
    "arms_trained",
    "first_unmet",
    "reference_converged",
]

# Two completed seeds are the fewest with a spread, hence with an interval.
MIN_SEEDS_PER_ARM = 2


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
