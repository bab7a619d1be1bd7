"""The JSON shape of a sequential study's summary (studies.store.sequential_summary builds it): what GET
/studies/{id} shows as `sequential`, what /results carries per sequential study, and what the results
renderings read to say how each comparison stopped.

Plain TypedDicts, JSON-safe: every number that is not finite (a statistic of seeds that agree exactly, an
interval without a point) is null. Differences (`estimate`, `interval`) are method minus reference turned so
that a positive value is an improvement in the metric's direction, as the sequential monitor decides on them.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

__all__ = [
    "EQUIVALENCE_NOT_SHOWN",
    "EQUIVALENT",
    "NON_INFERIOR",
    "NON_INFERIORITY_NOT_SHOWN",
    "NOT_EQUIVALENT",
    "NOT_TESTED",
    "OPEN",
    "SEQUENTIAL_VERDICTS",
    "SequentialLook",
    "SequentialOutcome",
    "SequentialPoint",
    "SequentialSummary",
    "SequentialTrials",
    "in_metric_units",
]

# Verdicts of a results-table row beside studies.stats' own (better, worse, no significant difference,
# insufficient data): a sequential study's comparison says what its looks decided.
OPEN = "open"  # its looks go on
NON_INFERIOR = "non-inferior"
NON_INFERIORITY_NOT_SHOWN = "non-inferiority not shown"
EQUIVALENT = "equivalent"
NOT_EQUIVALENT = "not equivalent"
EQUIVALENCE_NOT_SHOWN = "equivalence not shown"
NOT_TESTED = "not tested (sequential seeds)"  # pools a sequential study's seeds: no fixed-n test may judge it
SEQUENTIAL_VERDICTS = (
    OPEN,
    NON_INFERIOR,
    NON_INFERIORITY_NOT_SHOWN,
    EQUIVALENT,
    NOT_EQUIVALENT,
    EQUIVALENCE_NOT_SHOWN,
    NOT_TESTED,
)


class SequentialPoint(TypedDict):
    """One comparison at one look (studies.sequential.LookPoint)."""

    look: int
    seeds: int  # paired seeds (both arms have a finite value)
    fraction: float  # seeds / max_seeds: the spending function's time
    estimate: float | None  # mean paired difference, positive = the method is better
    sd: float | None  # seed-to-seed standard deviation of the paired differences
    standard_error: float | None
    z: float | None  # the test's statistic on the z scale; null where the seeds agree exactly
    level: float  # the alpha this comparison was tested at (Holm's step-down)
    efficacy: float | None  # the look's efficacy boundary (z scale)
    futility: float | None  # the look's futility boundary (z scale); null where there is none
    decision: str  # a key of studies.sequential.DECISIONS


class SequentialLook(TypedDict):
    """What one look saw and decided (studies.sequential.LookRecord)."""

    look: int  # 1 = first
    seeds_per_arm: dict[str, int]  # seeds with a value per method, the reference included
    comparisons: dict[str, SequentialPoint]  # only the comparisons still open before this look
    decisions: dict[str, str]  # where every comparison stands after this look
    open_arms: list[str]  # the methods that train the next look's seeds
    final: bool  # the design's last look, or nothing left open


class SequentialOutcome(TypedDict):
    """A comparison with the reference, with the numbers that account for the looks."""

    method: str  # the comparison's name: the method (against the reference), or "a vs b" for a pair
    reference: str  # what it was compared with: the study's reference, or the pair's other method
    decision: str  # a key of studies.sequential.DECISIONS
    decision_text: str  # its human text, e.g. "stopped: differs from the reference"
    stopped_at_look: int | None  # the look that decided it; null while it is open
    look: int | None  # the look its numbers come from (its last point); null before it had one
    seeds: int  # paired seeds at that look
    # The alpha its last look tested it at: Holm's step-down raises it above alpha / m once other
    # comparisons are rejected; the interval and p below are at this level, so they agree with the decision.
    tested_at_level: float | None
    estimate: float | None
    # Repeated confidence interval at tested_at_level: valid over every look, so it holds wherever the study
    # stopped; [null, null] before the comparison had a point.
    interval: list[float | None]
    interval_level: float | None  # its coverage: 1 - level, or 1 - 2 level for a one-sided design
    # Stage-wise ordering p-value at the stop look; null while the comparison is open (it is defined where
    # a comparison stops) and where the seeds agree exactly.
    p_value: float | None


class SequentialTrials(TypedDict):
    """Final-phase trials the looks asked for, against a fixed design that runs every seed of every arm."""

    run: int  # seeds given to every arm so far (the look in progress included)
    fixed_design: int  # methods x max_seeds
    saved: int  # fixed_design - run
    saved_fraction: float  # saved / fixed_design


class SequentialSummary(TypedDict):
    """A sequential study's design, every look, each comparison's outcome, and the seeds and trials the
    looks gave its arms."""

    design: dict[str, Any]  # the spec's `sequential` section (StudySpec.sequential), defaults filled in
    # "sequential: superiority, O'Brien-Fleming, looks at 3/5/7/9/10 seeds, alpha 0.05 family-wise"
    description: str
    planned_looks: list[int]  # cumulative seeds per arm at each look, e.g. [3, 5, 7, 9, 10]
    reference: str | None  # None in a grid, whose comparisons are the design's pairs
    methods: list[str]  # the arms: the methods, or a grid's points as results rows name them
    higher_is_better: bool  # the direction of the dataset's primary metric, which the looks test
    looks: list[SequentialLook]  # in look order
    outcomes: list[SequentialOutcome]  # one per comparison with the reference, in the study's order
    seeds_per_arm: dict[str, int]  # seeds each arm was given: 0 to n - 1
    trials: SequentialTrials
    open_arms: list[str]  # the arms that train the next look ([] once every comparison is decided)
    decided: bool  # no comparison is open
    notes: list[str]  # what the summary could not use (a look not stored yet)


def in_metric_units(
    outcome: SequentialOutcome, *, higher_is_better: bool
) -> tuple[float | None, float | None, float | None]:
    """(estimate, interval low, interval high) of an outcome as method minus reference in the metric's
    units: the looks decide on an improvement (positive = better), which a lower-is-better metric turns
    round. The interval is (None, None) unless both its ends are known."""
    sign = 1.0 if higher_is_better else -1.0
    estimate = outcome["estimate"]
    low, high = outcome["interval"]
    turned = None if estimate is None else sign * estimate
    if low is None or high is None:
        return turned, None, None
    return turned, min(sign * low, sign * high), max(sign * low, sign * high)
