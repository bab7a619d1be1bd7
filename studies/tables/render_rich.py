"""A rich.table.Table of a results table, for the `normlab results` command."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from studies.tables.columns import display_cells, display_headers, formatter_for, table_caption

if TYPE_CHECKING:
    from studies.tables.model import ResultsTableData

__all__ = ["to_rich"]

_VERDICT_STYLE = {
    "better": "bold green",
    "worse": "bold red",
    "no significant difference": "dim",
    "reference": "bold blue",
    "insufficient data": "yellow",
}


def to_rich(table: ResultsTableData) -> Table:
    """Same columns as the markdown and HTML tables; verdict coloured; warnings counted per row and
    spelled out in the caption."""
    fmt = formatter_for(table)
    headers = display_headers(table)
    notes = [f"{row.label}: {'; '.join(row.warnings)}" for row in table.rows if row.warnings]
    caption = table_caption(table) + ("\nwarnings:\n" + "\n".join(notes) if notes else "")
    rich_table = Table(title=f"{table.dataset}: {table.metric}", caption=caption, caption_justify="left")
    for i, header in enumerate(headers):
        rich_table.add_column(header, justify="left" if i == 0 else "right", no_wrap=i == 0)
    # The warnings themselves go in the caption: as a column they would wrap every row into a tower.
    rich_table.add_column("warnings", justify="right")
    verdict_column = headers.index("verdict")
    for row in table.rows:
        cells: list[str | Text] = list(display_cells(table, fmt, row))
        cells[verdict_column] = Text(row.verdict, style=_VERDICT_STYLE.get(row.verdict, ""))
        cells.append(Text(str(len(row.warnings)), style="yellow") if row.warnings else "")
        rich_table.add_row(*cells)
    return rich_table
