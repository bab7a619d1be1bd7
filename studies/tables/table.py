"""ResultsTable: the table's data (studies.tables.model) with a method per rendering.

The renderers depend on the data alone, so this is the only module that knows them all, and no
renderer imports it back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from studies.tables.model import ResultsTableData
from studies.tables.render_html import to_html
from studies.tables.render_latex import to_latex
from studies.tables.render_text import to_csv, to_json, to_markdown

if TYPE_CHECKING:
    from rich.table import Table as RichTable

__all__ = ["ResultsTable"]


class ResultsTable(ResultsTableData):
    """A results table for one dataset and metric; render it with the to_* methods.

    Adds methods only (no fields), so it stays the same frozen dataclass as ResultsTableData.
    """

    def to_json(self) -> dict[str, Any]:
        return to_json(self)

    def to_csv(self) -> str:
        return to_csv(self)

    def to_markdown(self) -> str:
        return to_markdown(self)

    def to_html(self) -> str:
        return to_html(self)

    def to_latex(self) -> str:
        return to_latex(self)

    def to_rich(self) -> RichTable:
        from studies.tables.render_rich import to_rich  # rich is imported only when one is asked for

        return to_rich(self)
