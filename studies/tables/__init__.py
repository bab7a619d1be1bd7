"""Results tables: one row per method (or grid point) with intervals, paired tests against a
reference method, multiple-comparison adjustment and a verdict; rendered as JSON, CSV, markdown,
self-contained HTML or a rich table.

    table = build_results_table(records, dataset="cifar10", metric="accuracy", higher_is_better=True)
    table.to_json(); table.to_csv(); table.to_markdown(); table.to_html(); table.to_rich()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from studies.records import COMPLETED_STATUSES, FAILED_STATUSES, TrialRecord
from studies.tables.build import DEFAULT_REFERENCE, build_results_table
from studies.tables.model import ResultsRow
from studies.tables.render_html import to_html
from studies.tables.render_svg import forest_plot_svg
from studies.tables.render_text import CSV_COLUMNS, to_csv, to_json, to_markdown
from studies.tables.table import ResultsTable

if TYPE_CHECKING:
    from rich.table import Table as RichTable


def to_rich(table: ResultsTable) -> RichTable:
    """A rich.table.Table (rich is imported only when one is asked for)."""
    from studies.tables.render_rich import to_rich as render

    return render(table)


__all__ = [
    "COMPLETED_STATUSES",
    "CSV_COLUMNS",
    "DEFAULT_REFERENCE",
    "FAILED_STATUSES",
    "ResultsRow",
    "ResultsTable",
    "TrialRecord",
    "build_results_table",
    "forest_plot_svg",
    "to_csv",
    "to_html",
    "to_json",
    "to_markdown",
    "to_rich",
]
