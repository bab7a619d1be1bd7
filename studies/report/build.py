"""Builds a study's report: the claim it tests, the paper's numbers next to the measured ones, the
check's verdict, the comparison table, figures and provenance (pure: the service gathers the inputs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from studies.catalog import Claim, dataset_comparability, unclaimed_comparability
from studies.claims.trials import StudyData
from studies.report.model import Figure, PaperComparison, Provenance, StudyReportData
from studies.report.render import to_json, to_markdown
from studies.report.render_html import to_html
from studies.stats import summarize
from studies.tables.build import PlanKey, ResultsTable, build_results_table
from studies.tables.records import TrialRecord

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
) -> StudyReport:
    """The report of one study. With a `claim`, its check runs on `data` and the paper's numbers
    (claim.reported.values) are set against the measured ones; without one, the report is the study's
    comparison with its reference (and `spec_paper_numbers`, if the spec gave any)."""
    extra_notes = list(notes)
    if claim is not None:
        comparability = dataset_comparability(data.dataset, claim.dataset)
        paper_values = dict(claim.reported.values)
        result = claim.check.evaluate(data, paper=paper_values)
        confidence = result.confidence
    else:
        comparability = unclaimed_comparability(data.dataset)
        paper_values = dict(spec_paper_numbers or {})
        result = None
        confidence = 0.95
    metric = _check_metric(claim)
    if not data.completed():
        extra_notes.append("no trial of this study has completed yet: every verdict is inconclusive")
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
        figures=tuple(figures),
        provenance=provenance,
        notes=tuple(extra_notes),
    )
