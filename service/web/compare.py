"""Two studies side by side (`/compare?a=ID&b=ID`): what their specs set differently, and each one's own
results table, never pooled.

Passing two ids to /results pools their trials into one table, where a seed both studies ran counts once
(the later run's value); comparing two runs of an experiment (another learning rate, more epochs) needs
them apart. Each table is the study's own /results table (its reference, its tests), shown with the
decisive columns (studies.tables.columns).
"""

from __future__ import annotations

from dataclasses import dataclass

from studies.spec.diff import SpecDifference, spec_differences
from studies.tables.columns import decisive_columns, display_cells, display_headers, formatter_for
from studies.tables.table import ResultsTable

__all__ = ["CompareSide", "ComparedTable", "SpecDifference", "compared_table", "spec_differences"]


@dataclass(frozen=True)
class ComparedTable:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    verdict_column: int


@dataclass(frozen=True)
class CompareSide:
    id: str
    name: str
    status: str
    dataset: str
    page_url: str
    table: ComparedTable | None
    why_no_table: str | None  # why there is no table yet (no final trials), else None


def compared_table(table: ResultsTable) -> ComparedTable:
    """The study's table with the decisive columns the HTML results page shows first."""
    fmt = formatter_for(table)
    headers = display_headers(table)
    shown = decisive_columns(headers)
    rows = tuple(
        tuple(cells[i] for i in shown) for cells in (display_cells(table, fmt, row) for row in table.rows)
    )
    return ComparedTable(
        headers=tuple(headers[i] for i in shown),
        rows=rows,
        verdict_column=shown.index(headers.index("verdict")),
    )
