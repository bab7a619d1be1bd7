"""A sequential study's report: its comparisons are the design's, not a fixed-n test's.

`with_sequential(report, summary)` replaces the comparison table's intervals and p-values with each
comparison's repeated confidence interval and stage-wise p-value (studies.store.results_sequential, the
same code /results uses), adds the monitoring figure (each statistic at each look against its boundaries)
and a note that says what the looks saved against the fixed design with every arm on the maximum seeds.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from studies.store.results_sequential import sequential_table
from studies.tables.render_sequential_svg import sequential_figure
from studies.tables.table import ResultsTable

if TYPE_CHECKING:
    from studies.report.build import StudyReport
    from studies.tables.sequential import SequentialSummary

__all__ = ["savings_note", "with_sequential"]


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
