"""A sequential study's report: its comparisons are the design's, not a fixed-n test's.

`with_sequential(report, summary)` replaces the comparison table's intervals and p-values with each
comparison's repeated confidence interval and stage-wise p-value (studies.store.results_sequential, the
same code /results uses), adds the monitoring figure (each statistic at each look against its boundaries)
and a note that says what the looks saved against the fixed design with every arm on the maximum seeds.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from studies.claims.sequential import SequentialComparison
from studies.store.results_sequential import sequential_table
from studies.tables.render_sequential_svg import sequential_figure
from studies.tables.sequential import in_metric_units
from studies.tables.table import ResultsTable

if TYPE_CHECKING:
    from studies.report.build import StudyReport
    from studies.tables.sequential import SequentialSummary

__all__ = ["looks_outcomes", "savings_note", "with_sequential"]


def looks_outcomes(summary: SequentialSummary) -> dict[str, SequentialComparison]:
    """Each comparison's outcome as a claim's check reads it: method minus reference in metric units (the
    summary turns differences so that positive is better; a lower-is-better metric turns them back)."""
    alpha = float(summary["design"]["alpha"])
    symmetric = summary["design"]["test"] != "non_inferiority"
    outcomes = {}
    for outcome in summary["outcomes"]:
        estimate, low, high = in_metric_units(outcome, higher_is_better=summary["higher_is_better"])
        against = outcome["reference"] or summary["reference"] or ""
        outcomes[outcome["method"]] = SequentialComparison(
            arm=outcome["method"].removesuffix(f" vs {against}"),
            reference=against,
            symmetric=symmetric,
            method=outcome["method"],
            decision=outcome["decision"],
            decision_text=outcome["decision_text"],
            seeds=outcome["seeds"],
            look=outcome["look"],
            estimate=estimate,
            interval_low=low,
            interval_high=high,
            interval_level=outcome["interval_level"],
            p_value=outcome["p_value"],
            tested_at_level=outcome["tested_at_level"],
            alpha=alpha,
        )
    return outcomes


def savings_note(summary: SequentialSummary) -> str:
    """What the looks ran against the fixed design, in one sentence."""
    trials = summary["trials"]
    looks = len(summary["looks"])
    state = "every comparison decided" if summary["decided"] else f"open: {', '.join(summary['open_arms'])}"
    return (
        f"{summary['description']}: {looks} look(s) taken ({state}); the final phase ran "
        f"{trials['run']} seed-trials against the fixed design's {trials['fixed_design']} (every method on "
        f"{summary['design']['max_seeds']} seeds), {trials['saved']} fewer ({100 * trials['saved_fraction']:.0f} %). "
        "Intervals and p-values of the comparisons account for the looks (repeated confidence intervals, "
        "stage-wise p-values), at the level each comparison was tested at"
    )


def with_sequential(report: StudyReport, summary: SequentialSummary) -> StudyReport:
    table = report.table
    if table is not None:
        # build_report's table is a ResultsTable (the data class is what the renderers are typed against).
        assert isinstance(table, ResultsTable), "build_report builds its table with build_results_table"
        table = sequential_table(table, {report.study_id: summary}, primary_metric=True)
    figure = sequential_figure(
        summary["looks"], test=str(summary["design"]["test"]), max_seeds=int(summary["design"]["max_seeds"])
    )
    return replace(
        report,
        table=table,
        figures=(*report.figures, *([figure] if figure is not None else [])),
        notes=(*report.notes, savings_note(summary)),
    )
