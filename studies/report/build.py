"""Builds a study's report: the claim it tests, the paper's numbers next to the measured ones, the
check's verdict, the comparison table, figures and provenance (pure: the service gathers the inputs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from studies.catalog import Claim, DatasetComparability, dataset_comparability, unclaimed_comparability
from studies.catalog.sources import check_numbers, source_for
from studies.claims.preconditions import first_unmet
from studies.claims.trials import StudyData
from studies.convergence import Convergence
from studies.evidence.mechanism import mechanism_summary
from studies.records import TrialRecord
from studies.report.judge import check_preconditions, judge_claim
from studies.report.model import Figure, PaperComparison, PreregisteredValue, Provenance, StudyReportData
from studies.report.render import to_json, to_markdown
from studies.report.render_html import to_html
from studies.report.tuning_effort import tuning_effort
from studies.stats import summarize
from studies.tables.build import PlanKey, ResultsTable, build_results_table
from studies.tables.render_mechanism_svg import mechanism_figures
from studies.tables.render_tuning_svg import tuning_figures

if TYPE_CHECKING:
    from studies.tuning import StudyTuning

__all__ = [
    "Figure",
    "PaperComparison",
    "Provenance",
    "StudyReport",
    "build_report",
]


@dataclass(frozen=True)
class StudyReport(StudyReportData):
    """Everything a study's report shows; render it with to_markdown / to_html / to_json."""

    def to_json(self) -> dict[str, Any]:
        return to_json(self)

    def to_markdown(self) -> str:
        return to_markdown(self)

    def to_html(self) -> str:
        return to_html(self)


_ROW_COMPARISONS = ("difference", "ordering", "sweep")


def _check_metric(claim: Claim | None) -> str | None:
    """The metric a claim's numbers are in: the `metric` of a check that compares rows, else (None) the
    study's primary metric."""
    if claim is None or claim.check.type not in _ROW_COMPARISONS:
        return None
    return claim.check.metric  # type: ignore[union-attr]  # every row comparison has one


def _paper_rows(
    data: StudyData, values: Mapping[str, float], metric: str | None, comparable: bool, confidence: float
) -> tuple[PaperComparison, ...]:
    rows = []
    labels = {t.label for t in data.trials}
    for row, paper in values.items():
        if row not in labels:
            continue  # e.g. a width threshold per activation: the check's findings carry it
        summary = summarize([t.get(metric) for t in data.completed() if t.label == row], confidence)
        rows.append(
            PaperComparison(
                row=row,
                metric=data.metric_name(metric),
                paper=float(paper),
                measured=summary.mean,
                ci_low=summary.ci_low,
                ci_high=summary.ci_high,
                n=summary.n,
                comparable=comparable,
            )
        )
    return tuple(rows)


def _table(
    data: StudyData,
    metric: str | None,
    *,
    study_id: str,
    planned_seeds: Mapping[PlanKey, Sequence[int]] | None,
    paper_values: Mapping[str, float],
    confidence: float,
) -> ResultsTable | None:
    if not data.trials:
        return None
    records = [
        TrialRecord(
            study_id=study_id,
            method=t.method,
            seed=int(t.seed),
            value=t.get(metric),
            status=t.status,
            mlflow_run_id=t.mlflow_run_id,
            group=t.group,
        )
        for t in data.trials
    ]
    return build_results_table(
        records,
        dataset=data.dataset,
        metric=data.metric_name(metric),
        higher_is_better=data.direction(metric),
        reference=data.reference,
        confidence=confidence,
        planned_seeds=planned_seeds,
        paper_values=paper_values,
    )


def build_report(
    data: StudyData,
    *,
    provenance: Provenance,
    kind: str = "compare",
    claim: Claim | None = None,
    spec_paper_numbers: Mapping[str, float] | None = None,
    planned_seeds: Mapping[PlanKey, Sequence[int]] | None = None,
    figures: Sequence[Figure] = (),
    dataset_note: str | None = None,
    notes: Sequence[str] = (),
    convergence: Convergence | None = None,
    tuning: StudyTuning | None = None,
) -> StudyReport:
    """The report of one study. With a `claim`, its preconditions are checked and then its check runs on
    `data`, and the paper's numbers (claim.reported.values) are set against the measured ones; without
    one, the report is the study's comparison with its reference (and `spec_paper_numbers`, if the spec
    gave any), with the reference's convergence checked when the spec states a level. `convergence` is
    the spec's own level (None: the catalog's level for the dataset, for a claim). `tuning`: the study's
    knob importance and optimisation history (studies.tuning), shown with their figures."""
    extra_notes = list(notes)
    mechanism = mechanism_summary(data)
    sensitivity: tuple = ()
    power: tuple = ()
    if claim is not None:
        comparability = dataset_comparability(data.dataset, claim.dataset)
        paper_values = dict(claim.reported.values)
        judgement = judge_claim(claim, data, convergence=convergence, mechanism=mechanism)
        result, preconditions = judgement.result, judgement.preconditions
        sensitivity, power = judgement.sensitivity, judgement.power
        confidence = result.confidence
        level = judgement.level
    else:
        comparability = unclaimed_comparability(data.dataset)
        paper_values = dict(spec_paper_numbers or {})
        result = None
        confidence = 0.95
        level = convergence
        preconditions = tuple(
            check_preconditions(data, convergence, needs_convergence=convergence is not None)
        )
        unmet = first_unmet(preconditions)
        if convergence is None:
            extra_notes.append(
                "the spec states no convergence level: nothing here checks that the reference trained"
            )
        elif unmet is not None:
            extra_notes.append(f"{unmet.reason}: the comparisons below are not evidence about the methods")
    metric = _check_metric(claim)
    effort = tuning_effort(provenance.spec)
    if effort is not None:
        extra_notes.append(effort.sentence())
    if not data.completed():
        extra_notes.append("no trial of this study has completed yet: nothing is tested")
    return StudyReport(
        study_id=provenance.study_id,
        study_name=provenance.study_name,
        kind=kind,
        metric=data.metric_name(metric),
        dataset=comparability,
        dataset_note=dataset_note,
        claim=claim,
        result=result,
        paper_vs_measured=_paper_rows(data, paper_values, metric, comparability.comparable, confidence),
        table=_table(
            data,
            metric,
            study_id=provenance.study_id,
            planned_seeds=planned_seeds,
            paper_values=paper_values if comparability.comparable else {},
            confidence=confidence,
        ),
        figures=(*figures, *mechanism_figures(mechanism), *(tuning_figures(tuning) if tuning else ())),
        provenance=provenance,
        notes=tuple(extra_notes),
        scope=_scope(claim, comparability),
        preconditions=tuple(preconditions),
        preregistered=_preregistered(claim, provenance.spec, level, data.dataset),
        sensitivity=tuple(sensitivity),
        power=tuple(power),
        mechanism=mechanism if mechanism.methods else None,
        tuning=tuning,
    )


def _scope(claim: Claim | None, comparability: DatasetComparability) -> str:
    """What the verdict is about: the paper's data, a stand-in, or initialisation."""
    if claim is not None and claim.measured_at == "init":
        return "init"
    return "paper data" if comparability.comparable else "stand-in"


# Spec knobs whose fixed values the report lists with their sources, in this order.
_LISTED_KNOBS = (
    "t_freeze",
    "eps_h",
    "tau",
    "post_freeze_gate",
    "init_scale",
    "skip_scale",
    "lr",
    "weight_decay",
)


def _fixed_knobs(spec: Mapping[str, Any]) -> dict[str, str]:
    """knob -> its fixed value(s) across the spec's `search` and `method_search` (grids and ranges too)."""
    found: dict[str, list[str]] = {}
    spaces = [spec.get("search") or {}, *((spec.get("method_search") or {}).values())]
    for space in spaces:
        if not isinstance(space, Mapping):
            continue
        for knob, value in space.items():
            if isinstance(value, Mapping):
                value = value.get(
                    "values", value.get("value", {k: v for k, v in value.items() if k != "type"})
                )
            text = str(value)
            if text not in found.setdefault(knob, []):
                found[knob].append(text)
    return {knob: ", ".join(found[knob]) for knob in _LISTED_KNOBS if knob in found}


def _preregistered(
    claim: Claim | None, spec: Mapping[str, Any], level: Convergence | None, dataset: str
) -> tuple[PreregisteredValue, ...]:
    """The check's numbers, the convergence level and the spec's knob values, each with its source."""
    values = []
    if claim is not None:
        for name, value in check_numbers(claim).items():
            source = source_for(claim, name)
            values.append(PreregisteredValue(name, str(value), str(source) if source else "no source stated"))
    if level is not None:
        values.append(PreregisteredValue(f"convergence level ({dataset})", level.level_text, level.source))
    budget = spec.get("budget") or {}
    if "epochs" in budget:
        values.append(
            PreregisteredValue("epochs", str(budget["epochs"]), "NormLab's choice: the study's size")
        )
    for knob, value in _fixed_knobs(spec).items():
        source = source_for(claim, knob)
        values.append(PreregisteredValue(knob, value, str(source) if source else "no source stated"))
    return tuple(values)
