"""`rank_trainability`: the init Jacobian rank predicts whether a configuration trains (Transforming
Rank: configurations whose rank collapses near zero fail, those that plateau train), judged so that
neither the optimiser nor the norm placement can stand in for the rank.

Three things keep the verdict about rank:

- Each configuration (a grid point less the tuned knob, usually the learning rate) is read at its own
  best learning rate: the one with the best mean over seeds of a validation metric (the validation twin
  of the primary metric unless `select_on` says otherwise; ties go to the smaller value). The test split
  is never used to choose, so the choice cannot favour either outcome. A study that sweeps the knob but
  reports no validation metric is not tested rather than tuned on its test split.
- The association is measured within each stratum of the confounder (`stratify_by`, the norm placement:
  Post-Norm both collapses rank and is harder to optimise, so a pooled correlation mostly contrasts the
  placements). The statistic is the size-weighted mean of the within-stratum Spearman correlations; its
  two-sided p-value is a stratified permutation test (accuracies permuted within their stratum only),
  exact when the strata allow at most 100,000 arrangements, else 20,000 seeded random ones
  (studies.claims.stratified_correlation).
- The claim's own levels: a configuration has collapsed when its rank's interval over seeds lies below
  `collapse_level`, has plateaued when it lies above `plateau_level`; it fails when its accuracy's
  interval lies below `fails_below`, and trains when its mean accuracy reaches the reference level
  (`reference_row.at_least`, the level the plain configuration must reach before anything is judged).

Supported: rank predicts accuracy within strata (significantly, positive), every collapsed configuration
fails, and every plateaued one trains. Contradicted: the within-stratum association is significantly
negative, a collapsed configuration trains, or a plateaued one fails. Not tested: the reference
configuration did not train, no configuration collapses by the claim's level, or none plateaus.
Inconclusive otherwise, with the smallest within-stratum correlation the design detects. The pooled
correlation across strata is reported beside them as a diagnostic that takes no part in the verdict.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator
from scipy import stats

from studies.claims._base import CheckBase, power_note
from studies.claims.sensitivity import Sensitivity, with_sensitivity
from studies.claims.stratified_correlation import RANDOM_ARRANGEMENTS, stratified_spearman
from studies.claims.trend import ReferenceRow, detectable_correlation, spearman
from studies.claims.trials import (
    PRIMARY,
    StudyData,
    TrialData,
    describe_selector,
    parse_group_label,
    same_value,
)
from studies.claims.verdicts import (
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_TESTED,
    SUPPORTED,
    CheckResult,
    Finding,
    combine_verdicts,
)

__all__ = [
    "DIAGNOSTIC",
    "Configuration",
    "RankTrainabilityCheck",
    "select_learning_rates",
]

DIAGNOSTIC = "diagnostic"  # a finding shown beside the verdict and not part of it


@dataclasses.dataclass(frozen=True)
class Configuration:
    """One configuration at the tuned value it was chosen at, with its per-seed values there."""

    label: str  # the grid point less the tuned knob, e.g. "frozen_ln [norm_placement=post,skip_scale=3.0]"
    method: str
    knobs: Mapping[str, str]  # its grid knobs (less the tuned one), as the grid label spells them
    chosen: Any  # the tuned knob's chosen value (None when the study does not sweep it)
    scores: Mapping[Any, float]  # tuned value -> mean validation metric over its seeds
    trials: tuple[TrialData, ...]  # the completed trials at the chosen value

    def matches(self, selector: Mapping[str, Any]) -> bool:
        return all(
            same_value(self.method if key == "method" else self.knobs.get(key), wanted)
            for key, wanted in selector.items()
        )


def _sort_key(value: Any) -> tuple[int, float, str]:
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


def _grid_knobs(trial: TrialData) -> dict[str, str]:
    """The knobs that identify a trial's grid point, as strings (the label's, else the trial's own)."""
    knobs = parse_group_label(trial.group)
    return knobs or {key: str(value) for key, value in trial.knobs.items()}


def select_learning_rates(
    trials: Sequence[TrialData], tuned_knob: str, select_on: str, higher_is_better: bool
) -> tuple[list[Configuration], str | None]:
    """Per configuration, the tuned knob's value with the best mean of `select_on` over its seeds (ties:
    the smaller value), and the completed trials there; and why no choice could be made, if so."""
    # Keyed by the knobs in the grid label's order, so labels read as the grid's do.
    grouped: dict[tuple[str, tuple[tuple[str, str], ...]], list[TrialData]] = defaultdict(list)
    for trial in trials:
        if trial.completed:
            knobs = {k: v for k, v in _grid_knobs(trial).items() if k != tuned_knob}
            grouped[(trial.method, tuple(knobs.items()))].append(trial)
    configurations = []
    for (method, knob_items), members in grouped.items():
        by_value: dict[Any, list[TrialData]] = defaultdict(list)
        for trial in members:
            value = trial.knob(tuned_knob)
            match = next((seen for seen in by_value if same_value(value, seen)), value)
            by_value[match].append(trial)
        values = sorted(by_value, key=_sort_key)
        scores = {
            value: float(np.mean(found))
            for value in values
            if (found := [v for t in by_value[value] if (v := t.get(select_on)) is not None])
        }
        knobs = dict(knob_items)
        label = describe_selector({"method": method, **knobs})
        if len(values) > 1 and not scores:
            return [], (
                f"{label} sweeps {tuned_knob} but its trials report no {select_on} to choose it on "
                "(choosing on the test metric would bias the verdict)"
            )
        if scores:
            sign = 1.0 if higher_is_better else -1.0
            # max() keeps the first of equal scores, and `values` runs from the smallest value up.
            chosen = max((v for v in values if v in scores), key=lambda v: sign * scores[v])
        else:
            chosen = values[0]
        configurations.append(Configuration(label, method, knobs, chosen, scores, tuple(by_value[chosen])))
    return configurations, None


def _mean_interval(values: Sequence[float], confidence: float) -> tuple[float, float | None, float | None]:
    """Mean and t interval over seeds (no interval from one seed)."""
    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, None, None
    sem = float(np.std(values, ddof=1)) / math.sqrt(len(values))
    half = float(stats.t.ppf(0.5 + confidence / 2.0, len(values) - 1)) * sem
    return mean, mean - half, mean + half


@dataclasses.dataclass(frozen=True)
class _Point:
    """A configuration's per-seed rank and accuracy summarised at the check's confidence."""

    configuration: Configuration
    stratum: str
    rank: tuple[float, float | None, float | None]  # mean, interval
    accuracy: tuple[float, float | None, float | None]
    seeds: int

    @property
    def label(self) -> str:
        return self.configuration.label


def _fmt_interval(summary: tuple[float, float | None, float | None]) -> str:
    mean, low, high = summary
    return f"{mean:.3g}" if low is None or high is None else f"{mean:.3g} [{low:.3g}, {high:.3g}]"


class RankTrainabilityCheck(CheckBase):
    type: Literal["rank_trainability"] = "rank_trainability"
    rank: str = Field("init_erank_jacobian", min_length=1)  # the init rank metric (normalised by width)
    accuracy: str = PRIMARY  # what training reached
    stratify_by: str = Field("norm_placement", min_length=1)  # the confounder the association is held within
    tuned_knob: str = Field("lr", min_length=1)  # chosen per configuration on `select_on`
    select_on: str | None = None  # validation metric to choose on; None: the primary metric's val_ twin
    collapse_level: float = Field(gt=0.0, lt=1.0)  # rank interval wholly below: collapsed
    plateau_level: float = Field(gt=0.0, lt=1.0)  # rank interval wholly above: plateaued
    # Accuracy interval wholly below this: the configuration failed to train (one level, or one per dataset).
    fails_below: float | dict[str, float]
    reference_row: ReferenceRow  # must train first; its level is also what "trains" means
    sensitivity: Sensitivity | None = None

    @model_validator(mode="after")
    def _levels_in_order(self) -> RankTrainabilityCheck:
        if self.plateau_level <= self.collapse_level:
            raise ValueError(
                f"plateau_level ({self.plateau_level}) must lie above collapse_level ({self.collapse_level})"
            )
        return self

    def evaluate(self, data: StudyData, *, paper: Mapping[str, float] | None = None) -> CheckResult:
        return with_sensitivity(self.sensitivity, data, self._evaluate)

    def selection_metric(self, data: StudyData) -> str:
        if self.select_on is not None:
            return self.select_on
        primary = data.metric_name(self.accuracy)
        return "val_" + primary.removeprefix("test_")

    def _fails_level(self, dataset: str) -> float | None:
        return self.fails_below.get(dataset) if isinstance(self.fails_below, dict) else self.fails_below

    def points(self, data: StudyData) -> tuple[list[_Point], str | None]:
        """Each configuration at its chosen tuned value, with its rank and accuracy over seeds; or why
        the configurations cannot be read."""
        select_on = self.selection_metric(data)
        configurations, problem = select_learning_rates(
            data.completed(), self.tuned_knob, select_on, data.direction(select_on)
        )
        if problem is not None:
            return [], problem
        points = []
        for configuration in configurations:
            pairs = [
                (r, a)
                for t in configuration.trials
                if (r := t.get(self.rank)) is not None and (a := t.get(self.accuracy)) is not None
            ]
            stratum = configuration.knobs.get(self.stratify_by)
            if not pairs or stratum is None:
                continue
            points.append(
                _Point(
                    configuration=configuration,
                    stratum=stratum,
                    rank=_mean_interval([r for r, _ in pairs], self.confidence),
                    accuracy=_mean_interval([a for _, a in pairs], self.confidence),
                    seeds=len(pairs),
                )
            )
        return points, None

    def _reference(self, points: Sequence[_Point], data: StudyData) -> tuple[str | None, str]:
        """(why nothing can be judged, or None; what the reference configuration reached)."""
        reference = self.reference_row
        name = describe_selector(reference.row)
        level = reference.level(data.dataset)
        if level is None:
            return f"the check states no level for the reference configuration {name} on {data.dataset}", ""
        matching = [p for p in points if p.configuration.matches(reference.row)]
        if not matching:
            return (
                f"the reference configuration {name} has no completed trial with {self.rank} and its metric",
                "",
            )
        point = matching[0]
        mean = point.accuracy[0]
        chosen = point.configuration.chosen
        at = "" if chosen is None else f" at {self.tuned_knob} = {chosen}"
        reached = (
            f"{name} reached {data.metric_name(self.accuracy)} {mean:.4g} over {point.seeds} seed(s){at} "
            f"(needs >= {level:g})"
        )
        if mean < level:
            return f"the reference configuration did not train: {reached}", reached
        return None, reached

    def _evaluate(self, data: StudyData) -> CheckResult:
        points, problem = self.points(data)
        if problem is not None:
            return CheckResult.not_tested(self.type, problem, confidence=self.confidence)
        problem, reached = self._reference(points, data)
        if problem is not None:
            return CheckResult.not_tested(self.type, problem, confidence=self.confidence)
        trains_at = self.reference_row.level(data.dataset)
        fails_at = self._fails_level(data.dataset)
        if fails_at is None:
            reason = f"the check states no failure level for {data.dataset}"
            return CheckResult.not_tested(self.type, reason, confidence=self.confidence)
        assert trains_at is not None  # _reference returned a problem otherwise
        collapsed = [p for p in points if p.rank[2] is not None and p.rank[2] < self.collapse_level]
        if not collapsed:
            lowest = min(points, key=lambda p: p.rank[0])
            reason = (
                f"no configuration's {self.rank} interval lies below the claim's collapse level "
                f"{self.collapse_level:g} (lowest: {lowest.label} at {_fmt_interval(lowest.rank)}): "
                "there is no collapsed configuration whose training could be judged"
            )
            return CheckResult.not_tested(self.type, reason, confidence=self.confidence)
        plateaued = [p for p in points if p.rank[1] is not None and p.rank[1] > self.plateau_level]
        findings = (
            self._within_strata(points, data),
            self._collapsed_fail(collapsed, data, fails_at, trains_at),
            self._plateaued_train(plateaued, data, fails_at, trains_at),
        )
        verdict = combine_verdicts(f.verdict for f in findings)
        notes = (self._selection_note(points, data), reached)
        summary = (
            f"{data.metric_name(self.accuracy)} should follow {self.rank} within each {self.stratify_by}, "
            f"collapsed configurations (< {self.collapse_level:g}) failing and plateaued ones "
            f"(> {self.plateau_level:g}) training: {verdict} ("
            + "; ".join(f"{f.label.split(':')[0]}: {f.verdict}" for f in findings)
            + ")."
        )
        return CheckResult(
            check=self.type,
            verdict=verdict,
            summary=summary,
            findings=(*findings, self._pooled(points, data)),
            notes=notes,
            confidence=self.confidence,
        )

    def _within_strata(self, points: Sequence[_Point], data: StudyData) -> Finding:
        label = (
            f"within-{self.stratify_by} Spearman rho of {data.metric_name(self.accuracy)} on {self.rank}: "
            "size-weighted mean over strata, stratified permutation test"
        )
        result = stratified_spearman(
            [p.rank[0] for p in points], [p.accuracy[0] for p in points], [p.stratum for p in points]
        )
        if result is None:
            note = (
                f"no {self.stratify_by} has 3 configurations with spread in both values: nothing to correlate"
            )
            return Finding(label=label, expected="> 0", verdict=INCONCLUSIVE, n=len(points), note=note)
        # A partial correlation given k strata has n - k - 1 degrees of freedom: the t approximation of the
        # smallest within-stratum rho the design detects.
        mde = detectable_correlation(result.n - (len(result.by_stratum) - 1), self.alpha)
        per_stratum = ", ".join(
            f"{name} {rho:+.3f} ({n} configurations)" for name, (rho, n) in result.by_stratum.items()
        )
        method = "exact" if result.exact else f"{RANDOM_ARRANGEMENTS:,} seeded random arrangements"
        if result.p_value < self.alpha and result.statistic != 0.0:
            verdict = SUPPORTED if result.statistic > 0 else CONTRADICTED
            note = f"rho = {result.statistic:+.3f}, p = {result.p_value:.3g} ({method})"
        else:
            verdict = INCONCLUSIVE
            note = (
                f"rho = {result.statistic:+.3f}, p = {result.p_value:.3g} ({method}): not significant; "
                + power_note(mde, result.n, "within-stratum rho")
            )
        return Finding(
            label=label,
            expected="> 0",
            verdict=verdict,
            measured=result.statistic,
            n=result.n,
            p_value=result.p_value,
            mde=mde,
            note=f"{note}; per {self.stratify_by}: {per_stratum}",
        )

    def _collapsed_fail(
        self, collapsed: Sequence[_Point], data: StudyData, fails_at: float, trains_at: float
    ) -> Finding:
        metric = data.metric_name(self.accuracy)
        worst = max(collapsed, key=lambda p: p.accuracy[0])
        trained = [p for p in collapsed if p.accuracy[0] >= trains_at]
        failed = [p for p in collapsed if p.accuracy[2] is not None and p.accuracy[2] < fails_at]
        if trained:
            verdict = CONTRADICTED
            why = f"{len(trained)} collapsed configuration(s) reach the trained level {trains_at:g}"
        elif len(failed) == len(collapsed):
            verdict = SUPPORTED
            why = f"every collapsed configuration's interval lies below {fails_at:g}"
        else:
            verdict = INCONCLUSIVE
            why = f"{len(collapsed) - len(failed)} collapsed configuration(s) neither fail nor train"
        return Finding(
            label=f"collapsed configurations ({self.rank} below {self.collapse_level:g}): highest mean {metric}",
            expected=f"< {fails_at:g}",
            verdict=verdict,
            measured=worst.accuracy[0],
            ci_low=worst.accuracy[1],
            ci_high=worst.accuracy[2],
            n=len(collapsed),
            note=f"{why}; " + self._listing(collapsed),
        )

    def _plateaued_train(
        self, plateaued: Sequence[_Point], data: StudyData, fails_at: float, trains_at: float
    ) -> Finding:
        metric = data.metric_name(self.accuracy)
        label = f"plateaued configurations ({self.rank} above {self.plateau_level:g}): lowest mean {metric}"
        if not plateaued:
            note = f"no configuration's {self.rank} interval lies above {self.plateau_level:g}: not tested"
            return Finding(label=label, expected=f">= {trains_at:g}", verdict=NOT_TESTED, note=note)
        worst = min(plateaued, key=lambda p: p.accuracy[0])
        failed = [p for p in plateaued if p.accuracy[2] is not None and p.accuracy[2] < fails_at]
        trained = [p for p in plateaued if p.accuracy[0] >= trains_at]
        if failed:
            verdict = CONTRADICTED
            why = f"{len(failed)} plateaued configuration(s) fail (interval below {fails_at:g})"
        elif len(trained) == len(plateaued):
            verdict = SUPPORTED
            why = f"every plateaued configuration reaches {trains_at:g}"
        else:
            verdict = INCONCLUSIVE
            why = f"{len(plateaued) - len(trained)} plateaued configuration(s) stay below {trains_at:g} without failing"
        return Finding(
            label=label,
            expected=f">= {trains_at:g}",
            verdict=verdict,
            measured=worst.accuracy[0],
            ci_low=worst.accuracy[1],
            ci_high=worst.accuracy[2],
            n=len(plateaued),
            note=f"{why}; " + self._listing(plateaued),
        )

    def _pooled(self, points: Sequence[_Point], data: StudyData) -> Finding:
        """Spearman across every configuration, strata pooled: what a plain trend would report."""
        x = np.asarray([p.rank[0] for p in points])
        y = np.asarray([p.accuracy[0] for p in points])
        rho, p_value = spearman(x, y)
        shown = "undefined" if rho is None else f"rho = {rho:+.3f}, p = {p_value:.3g}"
        return Finding(
            label=f"pooled Spearman rho of {data.metric_name(self.accuracy)} on {self.rank} across {len(points)} configurations",
            expected="diagnostic",
            verdict=DIAGNOSTIC,
            measured=rho,
            n=len(points),
            p_value=p_value,
            note=f"{shown}; pooled across {self.stratify_by}, so it mixes the confounder in: not part of the verdict",
        )

    def _listing(self, points: Sequence[_Point]) -> str:
        return "; ".join(
            f"{p.label} at {self.tuned_knob} = {p.configuration.chosen}: rank {_fmt_interval(p.rank)}, "
            f"accuracy {_fmt_interval(p.accuracy)}"
            for p in sorted(points, key=lambda p: p.rank[0])
        )

    def _selection_note(self, points: Sequence[_Point], data: StudyData) -> str:
        select_on = self.selection_metric(data)
        swept = [p for p in points if len(p.configuration.scores) > 1]
        if not swept:
            return f"one {self.tuned_knob} per configuration: nothing was chosen"
        chosen = ", ".join(f"{p.label}: {p.configuration.chosen}" for p in points)
        return (
            f"{self.tuned_knob} chosen per configuration by the best mean {select_on} over seeds (ties: the "
            f"smaller value); the test metric played no part in it. Chosen: {chosen}"
        )
