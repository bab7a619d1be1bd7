"""A results table as LaTeX for a paper: the decisive columns in a booktabs table, its caption the
statistics behind them (seeds, interval level and method, the test and the multiplicity adjustment).

Needs `\\usepackage{booktabs}` in the preamble; text is escaped and the few symbols the table uses (Δ, ±,
≤, ≥, −) become math. The columns are those the HTML page shows before "every column" is ticked
(studies.tables.columns.SECONDARY_COLUMNS are left out).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from studies.tables.columns import (
    decisive_columns,
    display_cells,
    display_headers,
    formatter_for,
    table_caption,
)

if TYPE_CHECKING:
    from studies.tables.model import ResultsTableData

__all__ = ["to_latex"]

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "Δ": r"$\Delta$",
    "±": r"$\pm$",
    "≤": r"$\le$",
    "≥": r"$\ge$",
    "−": r"$-$",
}
_SPECIAL_PATTERN = re.compile("|".join(re.escape(c) for c in _SPECIAL))


def latex_escape(text: str) -> str:
    return _SPECIAL_PATTERN.sub(lambda match: _SPECIAL[match.group(0)], text)


def to_latex(table: ResultsTableData) -> str:
    """A `table` float with the decisive columns, a caption and a label to cite it by."""
    fmt = formatter_for(table)
    headers = display_headers(table)
    shown = decisive_columns(headers)
    verdict = headers.index("verdict")
    spec = "".join("l" if i in (0, verdict) else "r" for i in shown)
    lines = [
        f"% NormLab results: {table.dataset}, {table.metric}. Needs \\usepackage{{booktabs}}.",
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(latex_escape(headers[i]) for i in shown) + r" \\",
        r"\midrule",
    ]
    for row in table.rows:
        cells = display_cells(table, fmt, row)
        lines.append(" & ".join(latex_escape(cells[i]) for i in shown) + r" \\")
    label = re.sub(r"[^a-z0-9]+", "-", f"{table.dataset}-{table.metric}".lower()).strip("-")
    lines += [
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{latex_escape(table_caption(table))}}}",
        rf"\label{{tab:normlab-{label}}}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"
