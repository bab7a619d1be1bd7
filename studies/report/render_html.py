"""A study report as one self-contained HTML page: inline CSS and SVG, no scripts, no external assets."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

import yaml

from studies.catalog import PAPERS
from studies.report.render import (
    POWER_NOTE,
    finding_cells,
    finding_headers,
    mechanism_rows,
    paper_rows,
    power_rows,
    precondition_rows,
    preregistered_rows,
    provenance_items,
    report_title,
    scope_line,
    sensitivity_rows,
    verdict_line,
)
from studies.tables.columns import display_cells, display_headers, formatter_for, table_caption
from studies.tables.render_svg import forest_plot_svg
from studies.tables.render_tuning_text import tuning_html

if TYPE_CHECKING:
    from studies.report.model import StudyReportData
    from studies.tables.model import ResultsTableData

__all__ = ["to_html"]

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem; color: #1f2328;
  max-width: 80rem; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
blockquote { border-left: 4px solid #d0d7de; margin: 0.5rem 0; padding: 0.2rem 1rem; color: #3d444d; }
p.muted, figcaption { color: #57606a; }
.verdict { display: inline-block; padding: 0.3rem 0.8rem; border-radius: 0.3rem; font-weight: 700; }
.supported { background: #dafbe1; color: #116329; }
.contradicted { background: #ffebe9; color: #a40e26; }
.inconclusive { background: #fff8c5; color: #7d4e00; }
.not-tested { background: #eaeef2; color: #24292f; }
.none { background: #ddf4ff; color: #0a3069; }
.warning { background: #fff8c5; padding: 0.4rem 0.8rem; border-radius: 0.3rem; }
table { border-collapse: collapse; font-size: 0.88rem; margin: 0.5rem 0; }
th, td { border: 1px solid #d0d7de; padding: 0.3rem 0.55rem; text-align: right; white-space: nowrap; }
th { background: #f6f8fa; }
td:first-child, th:first-child { text-align: left; }
td.supported, td.contradicted, td.inconclusive, td.not-tested { font-weight: 600; text-align: center; }
figure { margin: 1rem 0 1.5rem 0; overflow-x: auto; }
figure svg { max-width: 100%; height: auto; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2rem 1rem; }
dt { font-weight: 600; } dd { margin: 0; }
pre { background: #f6f8fa; padding: 0.8rem; overflow-x: auto; font-size: 0.8rem; }
/* A wide table breaks its cells into lines, only where it has no room for them on one (a table that fits
   keeps its one-line cells); what still does not fit scrolls inside its own box, never the page. */
th, td { white-space: normal; }
div.scroll { overflow-x: auto; max-width: 100%; }
/* A phone (390 px): narrower margins and cells; long names and ids wrap. */
@media (max-width: 40rem) {
  body { margin: 0.75rem; }
  h1 { font-size: 1.2rem; }
  h1, h2, p, li, dd, blockquote, summary, figcaption { overflow-wrap: anywhere; }
  dl { grid-template-columns: minmax(0, max-content) minmax(0, 1fr); gap: 0.2rem 0.6rem; }
  table { font-size: 0.8rem; }
  th, td { padding: 0.25rem 0.35rem; }
  :not(.scroll) > table { display: block; overflow-x: auto; max-width: 100%; }  /* the tuning section's */
}
"""


def _table(headers: list[str], rows: list[list[str]], verdict_column: int | None = None) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for i, text in enumerate(row):
            css = f' class="{escape(text.replace(" ", "-"))}"' if i == verdict_column else ""
            cells.append(f"<td{css}>{escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<div class="scroll">{table}</div>'  # a wide table scrolls inside this box, not the page


def _linked(text: str, url: str | None) -> str:
    return f'<a href="{escape(url)}">{escape(text)}</a>' if url else escape(text)


def _results_table(table: ResultsTableData) -> str:
    fmt = formatter_for(table)
    rows = [display_cells(table, fmt, row) for row in table.rows]
    return (
        f'<p class="muted">{escape(table_caption(table))}</p>'
        f"<figure>{forest_plot_svg(table)}</figure>" + _table(display_headers(table), rows)
    )


def to_html(report: StudyReportData) -> str:
    claim = report.claim
    parts = [f"<h1>{escape(report_title(report))}</h1>"]
    if claim is not None:
        significance = f" ({escape(claim.reported.significance)})" if claim.reported.significance else ""
        parts += [
            f"<p>Claim <code>{escape(claim.id)}</code> from <em>{escape(PAPERS[claim.paper])}</em>:</p>",
            f"<blockquote>{escape(claim.statement)}</blockquote>",
            f"<p><strong>The paper reports:</strong> {escape(claim.reported.text)}{significance}</p>",
        ]
    if report.preregistered:
        parts += [
            "<h2>Pre-registered values (fixed before the result)</h2>",
            _table(*preregistered_rows(report)),
        ]
    if report.preconditions:
        parts += ["<h2>Preconditions (checked before any verdict)</h2>", _table(*precondition_rows(report))]
    css = (report.verdict or "none").replace(" ", "-")
    parts.append(f'<p><span class="verdict {escape(css)}">{escape(verdict_line(report))}</span></p>')
    scope = scope_line(report)
    if scope:
        parts.append(f'<p class="warning">{escape(scope)}</p>')
    if report.result is not None and not report.result.reason:
        parts.append(f"<p>{escape(report.result.summary)}</p>")
    data_css = "" if report.dataset.comparable else ' class="warning"'
    data_text = escape(report.dataset.note)
    if not report.dataset.comparable:
        data_text += ". The paper's numbers are shown for orientation only"
    parts.append(f"<p{data_css}><strong>Data:</strong> {data_text}.</p>")
    if report.dataset_note:
        parts.append(f'<p class="muted">{escape(report.dataset_note)}</p>')
    parts += [f'<p class="warning">{escape(note)}</p>' for note in report.notes]

    if report.paper_vs_measured:
        headers, rows = paper_rows(report)
        parts += ["<h2>Paper vs measured</h2>", _table(headers, rows)]

    if report.result is not None and not report.result.reason:
        parts.append(f"<h2>Findings (check <code>{escape(report.result.check)}</code>)</h2>")
        if report.result.findings:
            rows = [finding_cells(f) for f in report.result.findings]
            parts.append(_table(finding_headers(report), rows, verdict_column=len(rows[0]) - 1))
            notes = [
                f"<li>{escape(f.label)}: {escape(f.note)}</li>" for f in report.result.findings if f.note
            ]
            notes += [f"<li>{escape(n)}</li>" for n in report.result.notes]
            parts.append(f"<ul>{''.join(notes)}</ul>")
        else:
            parts.append("<p>No findings: the study has no data this check can read.</p>")
        if claim is not None and claim.notes:
            parts.append(f'<p class="muted"><em>How the claim is read:</em> {escape(claim.notes)}</p>')

    if report.sensitivity:
        headers, rows = sensitivity_rows(report)
        parts += [
            "<h2>Sensitivity: the verdict across the free choices it rests on</h2>",
            _table(headers, rows, verdict_column=2),
        ]
    if report.power:
        parts += [
            "<h2>Power: seeds needed to decide</h2>",
            _table(*power_rows(report)),
            f'<p class="muted">{escape(POWER_NOTE)}</p>',
        ]

    if report.mechanism is not None:
        parts += ["<h2>Mechanism: AutoNorm's gates, seed by seed</h2>", _table(*mechanism_rows(report))]

    if report.table is not None:
        parts += ["<h2>Comparison with the reference</h2>", _results_table(report.table)]

    if report.tuning is not None:
        parts += ["<h2>Knob importance and optimisation history</h2>", tuning_html(report.tuning)]

    if report.figures:
        parts.append("<h2>Figures</h2>")
        parts += [
            f"<figure><figcaption>{escape(f.caption)}</figcaption>{f.svg}</figure>" for f in report.figures
        ]

    items = "".join(
        f"<dt>{escape(k)}</dt><dd>{_linked(v, url)}</dd>" for k, v, url in provenance_items(report)
    )
    spec = yaml.safe_dump(dict(report.provenance.spec), sort_keys=False)
    parts += [
        "<h2>Provenance</h2>",
        f"<dl>{items}</dl>",
        f"<details><summary>spec</summary><pre>{escape(spec)}</pre></details>",
    ]
    body = "\n".join(parts)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{escape(report_title(report))}</title>
<style>{_CSS}</style>
</head>
<body>
{body}
</body>
</html>
"""
