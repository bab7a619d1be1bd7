"""A claim's verdict on a study, with everything it rests on: the preconditions checked first, the check
itself, the verdict across the free choices it depends on, and the seeds the paper's effect needs.

The order matters: a check runs only when the dataset can express the claim and every precondition
holds; otherwise the verdict is `not tested` with the reason, and no number is offered as evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from studies.catalog import Claim, convergence_for
from studies.catalog.lint import expressibility_problem
from studies.claims import CheckResult, StudyData
from studies.claims._pairs import PairSpec, resolved_margin
from studies.claims.preconditions import (
    PreconditionResult,
    arms_trained,
    first_unmet,
    freeze_fired,
    freezing_rows,
    reference_converged,
)
from studies.claims.sensitivity import trials_at
from studies.claims.trials import same_value
from studies.convergence import Convergence
from studies.evidence.mechanism import MechanismSummary
from studies.stats import seeds_for_equivalence, seeds_for_power, summarize

__all__ = [
    "Judgement",
    "PowerRow",
    "SensitivityRow",
    "check_preconditions",
    "freeze_preconditions",
    "judge_claim",
]


@dataclass(frozen=True)
class SensitivityRow:
    """The claim's verdict at one value of a free choice (a check parameter or a grid knob)."""

    parameter: str
    value: float
    verdict: str
    summary: str
    preregistered: bool  # the value the headline verdict uses


@dataclass(frozen=True)
class PowerRow:
    """For one compared pair: the paper's effect, the spread measured here, and the seeds it needs."""

    label: str  # "autonorm_s − frozen_ln (test_accuracy)"
    paper_effect: float | None
    sd_difference: float | None  # standard deviation of the per-seed paired differences, measured
    seeds_run: int
    # For 80 % power at the paper's effect and the check's alpha: to detect it (two-sided paired t-test),
    # or, for an equivalence claim, to find the interval within ±margin when the paper's effect is true.
    seeds_needed: int | None
    margin: float | None = None  # the equivalence margin in metric units; None: a directional claim
    # Equivalence claims only: the seeds for the interval to land within ±margin with 80 % power when the
    # true difference is 0 (two one-sided tests), the question an equivalence design must answer whether
    # or not the paper states an effect.
    seeds_needed_null: int | None = None
    # Why a seeds count above is missing where one is (no spread measured, no effect stated, an effect at
    # or past the margin); None when every count that applies is given.
    missing: str | None = None


@dataclass(frozen=True)
class Judgement:
    result: CheckResult
    preconditions: tuple[PreconditionResult, ...]
    sensitivity: tuple[SensitivityRow, ...] = ()
    power: tuple[PowerRow, ...] = ()
    # The convergence level the claim was held to: None for claims measured at initialisation.
    level: Convergence | None = None


def check_preconditions(
    data: StudyData, convergence: Convergence | None, *, needs_convergence: bool
) -> list[PreconditionResult]:
    """Every arm trained, then (for claims about trained models) the reference converged."""
    results = arms_trained(data)
    if needs_convergence:
        if convergence is None:
            results.append(
                PreconditionResult(
                    "reference converged",
                    f"a convergence level for {data.dataset}",
                    False,
                    "no level stated",
                    reason=f"no convergence level is stated for {data.dataset}: a verdict could rest on a "
                    "reference that never trained",
                )
            )
        else:
            results.append(reference_converged(data, convergence))
    return results


def freeze_preconditions(claim: Claim, data: StudyData) -> list[PreconditionResult]:
    """Per AutoNorm-S row the claim's check reads, whether its freeze fired, seed by seed: in enough seeds
    (studies.claims.preconditions.MIN_FREEZE_FRACTION), or in every trial where the claim is about what
    follows the freeze (`requires: {freeze_fired: true}`)."""
    every = claim.requires.freeze_fired
    return [freeze_fired(data, row, every=every) for row in freezing_rows(claim.check, data.reference)]


def _tests_its_own_reference(check: object) -> bool:
    """Whether the check names the configuration that must train (`reference_row`) and tests it itself.
    A grid's reference method runs every configuration, the collapsed ones and the learning rates that
    were not chosen included, so the mean over its trials says nothing about whether a plain
    configuration trains (a 32-block trainability grid pooled to 0.91 while its Pre-Norm reference
    reached 0.98): such a check's own reference row is the convergence precondition."""
    return getattr(check, "reference_row", None) is not None


def judge_claim(
    claim: Claim,
    data: StudyData,
    *,
    convergence: Convergence | None = None,
    mechanism: MechanismSummary | None = None,
) -> Judgement:
    """The claim's verdict on `data`. `convergence` (the spec's own level) overrides the catalog's level
    for the study's dataset. `mechanism` (the study's mechanism summary) is accepted for callers that have
    one; the freeze is read per compared row from the trials themselves."""
    paper = dict(claim.reported.values)
    check = claim.check
    trained = claim.measured_at == "trained"
    level = (convergence or convergence_for(data.dataset)) if trained else None
    problem = expressibility_problem(claim, data.dataset)
    if problem is not None:
        result = CheckResult.not_tested(check.type, problem, confidence=check.confidence)
        return Judgement(result, (), level=level)
    checked = check_preconditions(
        data, level, needs_convergence=trained and not _tests_its_own_reference(check)
    )
    checked += freeze_preconditions(claim, data)
    preconditions = tuple(checked)
    unmet = first_unmet(preconditions)
    if unmet is not None:
        reason = unmet.reason or unmet.name
        result = CheckResult.not_tested(check.type, reason, confidence=check.confidence)
        return Judgement(result, preconditions, level=level)
    result = check.evaluate(data, paper=paper)
    return Judgement(
        result,
        preconditions,
        sensitivity=tuple(_sensitivity(claim, data, paper)),
        power=tuple(_power(claim, data, result)),
        level=level,
    )


def _sensitivity(claim: Claim, data: StudyData, paper: Mapping[str, float]) -> list[SensitivityRow]:
    rows = []
    check = claim.check
    fields = type(check).model_fields
    for parameter, values in claim.sensitivity.items():
        for value in values:
            if parameter in fields:
                current = getattr(check, parameter)
                varied = check.model_copy(update={parameter: value})
                if parameter in ("margin", "relative_margin"):  # the two are exclusive on a pair
                    other = "relative_margin" if parameter == "margin" else "margin"
                    if other in fields:
                        varied = varied.model_copy(update={other: None})
                result = varied.evaluate(data, paper=paper)
                preregistered = current is not None and same_value(current, value)
            else:  # a knob the study's grid sweeps: the verdict on the trials at that value alone
                subset = trials_at(data, parameter, value)
                result = check.evaluate(subset, paper=paper)
                preregistered = False
            rows.append(
                SensitivityRow(parameter, float(value), result.verdict, result.summary, preregistered)
            )
    return rows


def _pairs(claim: Claim) -> list[PairSpec]:
    check = claim.check
    if check.type == "difference":
        return [check.pair()]
    if check.type == "ordering":
        return list(check.pairs)
    return []


def _power(claim: Claim, data: StudyData, result: CheckResult) -> list[PowerRow]:
    """Seeds needed at the paper's effect, and for an equivalence under a null effect, for checks that
    compare paired rows."""
    rows = []
    metric = getattr(claim.check, "metric", None)
    alpha = claim.check.alpha
    for pair, finding in zip(_pairs(claim), result.findings, strict=False):
        reference = pair.reference if pair.reference is not None else data.reference
        ours = data.by_seed(pair.method, metric)
        theirs = data.by_seed(reference, metric)
        diffs = [
            ours[s] - theirs[s]  # type: ignore[operator]
            for s in sorted(set(ours) & set(theirs))
            if ours[s] is not None and theirs[s] is not None
        ]
        sd = summarize(diffs).std
        effect = finding.paper
        equivalence = pair.expect == "no_difference"
        margin = resolved_margin(pair, data, metric) if equivalence else None
        needed = needed_null = None
        if sd is not None and sd > 0.0:
            if equivalence and margin is not None:
                needed_null = seeds_for_equivalence(0.0, sd, margin, alpha=alpha)
                if effect is not None:
                    needed = seeds_for_equivalence(effect, sd, margin, alpha=alpha)
            elif not equivalence and effect is not None:
                needed = seeds_for_power(effect, sd, alpha=alpha)
        missing = _why_seeds_missing(
            sd, effect, margin, equivalence=equivalence, counts=(needed, needed_null)
        )
        rows.append(PowerRow(finding.label, effect, sd, len(diffs), needed, margin, needed_null, missing))
    return rows


def _why_seeds_missing(
    sd: float | None,
    effect: float | None,
    margin: float | None,
    *,
    equivalence: bool,
    counts: tuple[int | None, int | None],
) -> str | None:
    """Why a power row gives no seeds count where it gives none; None when every count that applies is
    given. A spread of exactly 0 (the same difference on every seed) sizes nothing: the t interval has
    width 0 at any n, so it says nothing about the next run."""
    if sd is None:
        return "fewer than two paired seeds: no spread of the differences was measured"
    if sd == 0.0:
        return "the paired difference was the same on every seed: no spread to size from"
    if equivalence and margin is None:
        return "no reference values to scale the relative margin by"
    needed, needed_null = counts
    cap = "more than 10,000 seeds"  # where studies.stats.power stops searching
    if equivalence and needed_null is None:
        return cap
    if effect is None:
        if equivalence:
            return "the paper states no effect: sized for no true difference only"
        return "the paper states no effect to size for"
    if equivalence and abs(effect) >= margin:  # type: ignore[operator]
        return "the paper's effect is at or past the margin: no number of seeds shows equivalence"
    if needed is None:
        return cap
    return None
