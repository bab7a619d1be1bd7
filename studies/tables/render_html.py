"""A self-contained HTML page for a results table: inline CSS, no scripts, no external assets.

Where the table says whether its studies are complete (studies.store.completeness), that comes right under
the caption: an incomplete study's missing trials, and the newer incomplete studies passed over.
With `evidence` (studies.evidence), the page also shows the mechanism figures (gate heatmaps and
per-layer gates, init rank against depth, final metric against init rank) below the table; with `tuning`
(studies.tuning), each study's knob importance, optimisation history and, for a sweep, its response figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import TYPE_CHECKING

from studies.tables.columns import (
    SECONDARY_COLUMNS,
    decisive_columns,
    display_cells,
    display_headers,
    formatter_for,
    table_caption,
)
from studies.tables.formatting import Formatter
from studies.tables.render_sequential import sequential_blocks
from studies.tables.render_svg import forest_plot_svg
from studies.tables.sequential import (
    EQUIVALENCE_NOT_SHOWN,
    EQUIVALENT,
    NON_INFERIOR,
    NON_INFERIORITY_NOT_SHOWN,
    NOT_EQUIVALENT,
    NOT_TESTED,
    OPEN,
)

if TYPE_CHECKING:
    from studies.evidence import Evidence
    from studies.tables.model import ResultsTableData
    from studies.tuning import StudyTuning

__all__ = ["to_html"]

_VERDICT_CLASS = {
    "better": "better",
    "worse": "worse",
    "no significant difference": "nsd",
    "reference": "reference",
    "insufficient data": "insufficient",
}
# The verdicts only a sequential study's comparisons take (studies.store.results_sequential); kept out of
# the legend, which a fixed-seed table shows as it always did.
_SEQUENTIAL_VERDICT_CLASS = {
    OPEN: "insufficient",
    NON_INFERIOR: "better",
    EQUIVALENT: "better",
    NOT_EQUIVALENT: "nsd",
    NON_INFERIORITY_NOT_SHOWN: "nsd",
    EQUIVALENCE_NOT_SHOWN: "nsd",
    NOT_TESTED: "insufficient",
}


def _head_cell(index: int, header: str) -> str:
    if index == 0:
        return f'<th class="label">{escape(header)}</th>'
    more = ' class="more"' if index in SECONDARY_COLUMNS else ""
    return f"<th{more}>{escape(header)}</th>"


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem; color: #1f2328; }
h1 { font-size: 1.35rem; margin-bottom: 0.25rem; }
p.caption { color: #57606a; max-width: 70rem; }
table { border-collapse: collapse; font-size: 0.9rem; }
th, td { border: 1px solid #d0d7de; padding: 0.35rem 0.6rem; text-align: right; white-space: nowrap; }
th { background: #f6f8fa; position: sticky; top: 0; }
td.label, th.label { text-align: left; font-weight: 600; }
tr:nth-child(even) td { background: #fafbfc; }
td.verdict { font-weight: 600; text-align: center; }
td.better { background: #dafbe1 !important; color: #116329; }
td.worse { background: #ffebe9 !important; color: #a40e26; }
td.nsd { background: #f6f8fa !important; color: #57606a; }
td.reference { background: #ddf4ff !important; color: #0a3069; }
td.insufficient { background: #fff8c5 !important; color: #7d4e00; }
details { margin: 0.4rem 0; }
summary { cursor: pointer; font-weight: 600; }
ul { margin: 0.3rem 0 0.6rem 1.2rem; padding: 0; }
code { font-size: 0.85rem; }
figure.forest { margin: 1rem 0 1.5rem 0; overflow-x: auto; }
figure.forest svg { max-width: 100%; height: auto; }
section.evidence { margin-top: 1.5rem; }
figure.evidence { margin: 1rem 0 1.5rem 0; overflow-x: auto; }
figure.evidence figcaption { color: #57606a; font-size: 0.9rem; margin-bottom: 0.3rem; }
figure.evidence svg { max-width: 100%; height: auto; }
.legend span { display: inline-block; padding: 0.1rem 0.5rem; margin-right: 0.4rem; border-radius: 0.25rem; }
section.completeness li.incomplete { background: #fff8c5; color: #7d4e00; padding: 0.1rem 0.4rem; }
#every-column:not(:checked) ~ table .more { display: none; }
#every-column:not(:checked) ~ .scroll .more { display: none; }
label.columns { color: #57606a; font-size: 0.9rem; }
/* Headers, method names and verdicts break into lines only where the table has no room for them on one:
   a table that fits keeps its one-line cells. */
th, td.label, td.verdict { white-space: normal; }
/* Narrower than a desk's window the table scrolls inside its own box, never the page (at 1280 px and more
   the box clips nothing, so the header row stays sticky). */
@media (max-width: 1279px) {
  div.scroll { overflow-x: auto; max-width: 100%; }
}
/* A phone (390 px): narrower margins and cells; long names and ids wrap. */
@media (max-width: 40rem) {
  body { margin: 0.75rem; }
  h1 { font-size: 1.15rem; }
  h1, h2, p, li, summary, figcaption { overflow-wrap: anywhere; }
  table { font-size: 0.8rem; }
  th, td { padding: 0.25rem 0.35rem; }
  td.label { min-width: 5rem; overflow-wrap: anywhere; }
  :not(.scroll) > table { display: block; overflow-x: auto; max-width: 100%; }  /* the tuning section's */
}
"""


def to_html(
    table: ResultsTableData,
    evidence: Evidence | None = None,
    run_links: Mapping[str, str] | None = None,
    tuning: Sequence[StudyTuning] = (),
) -> str:
    """A complete HTML document; verdict cells are coloured (better green, worse red). `evidence` adds
    its figures below the table (nothing when it holds no gate or rank data). `run_links`: the URL of each
    MLflow run id the page names, where it has one. `tuning`: the tuning views of the page's studies."""
    run_links = run_links or {}
    fmt = formatter_for(table)
    headers = display_headers(table)
    order = decisive_columns(headers) + sorted(SECONDARY_COLUMNS)
    head_cells = "".join(_head_cell(i, headers[i]) for i in order)
    verdict_column = headers.index("verdict")
    body_rows = []
    for row in table.rows:
        texts = display_cells(table, fmt, row)
        cells = []
        for i in order:
            text = texts[i]
            more = " more" if i in SECONDARY_COLUMNS else ""
            if i == 0:
                cells.append(f'<td class="label">{escape(text)}</td>')
            elif i == verdict_column:
                css = _VERDICT_CLASS.get(row.verdict) or _SEQUENTIAL_VERDICT_CLASS.get(row.verdict, "nsd")
                cells.append(f'<td class="verdict {css}">{escape(text)}</td>')
            else:
                cells.append(
                    f'<td class="{more.strip()}">{escape(text)}</td>' if more else f"<td>{escape(text)}</td>"
                )
        body_rows.append("<tr>" + "".join(cells) + "</tr>")

    details = []
    for row in table.rows:
        seeds = ", ".join(f"{seed}: {fmt.value(value)}" for seed, value in row.per_seed) or "none"
        items = [f"<li>per-seed values: {escape(seeds)}</li>"]
        if row.failed_seeds:
            items.append(f"<li>failed seeds: {escape(', '.join(map(str, row.failed_seeds)))}</li>")
        items += [f"<li>warning: {escape(w)}</li>" for w in row.warnings]
        items.append(f"<li>studies: <code>{escape(', '.join(row.study_ids) or 'none')}</code></li>")
        runs = ", ".join(_linked(run, run_links.get(run)) for run in row.mlflow_run_ids) or "none"
        items.append(f"<li>MLflow runs: <code>{runs}</code></li>")
        flag = f" ({len(row.warnings)} warning(s))" if row.warnings else ""
        details.append(
            f"<details><summary>{escape(row.label)}{escape(flag)}</summary><ul>{''.join(items)}</ul></details>"
        )

    legend = "".join(
        f'<span class="{css}" style="display:inline-block">{escape(name)}</span>'
        for name, css in _VERDICT_CLASS.items()
    )
    title = f"{table.dataset}: {table.metric}"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{escape(title)} results</title>
<style>{_CSS}
.legend span.better {{ background: #dafbe1; color: #116329; }}
.legend span.worse {{ background: #ffebe9; color: #a40e26; }}
.legend span.nsd {{ background: #f6f8fa; color: #57606a; }}
.legend span.reference {{ background: #ddf4ff; color: #0a3069; }}
.legend span.insufficient {{ background: #fff8c5; color: #7d4e00; }}
</style>
</head>
<body>
<h1>{escape(title)}</h1>
<p class="caption">{escape(table_caption(table))}</p>
{_completeness_section(table)}<p class="legend">verdict: {legend}</p>
<figure class="forest">
{forest_plot_svg(table)}
</figure>
<input type="checkbox" id="every-column"> <label class="columns" for="every-column">every column (BCa interval,
test, raw p, effect size, P(improve), MDE)</label>
<div class="scroll">
<table>
<thead><tr>{head_cells}</tr></thead>
<tbody>
{chr(10).join(body_rows)}
</tbody>
</table>
</div>
{_sequential_section(table, fmt)}{_evidence_section(evidence)}
{_tuning_section(tuning)}
<h2>Per-seed values, warnings and provenance</h2>
{chr(10).join(details)}
</body>
</html>
"""


def _completeness_section(table: ResultsTableData) -> str:
    """Whether each study shown (and each newer one passed over) holds every trial it planned."""
    if not table.completeness:
        return ""
    items = []
    for note in table.completeness:
        css = "complete" if note.complete else "incomplete"
        study = f"study <code>{escape(note.study_id)}</code> ({escape(note.name)})"
        if not note.shown:
            study = f"passed over, newer but not complete: {study}"
        items.append(
            f'<li class="{css}" data-study-id="{escape(note.study_id)}">{study}: {escape(note.reason)}</li>'
        )
    return f'<section class="completeness">\n<h2>Completeness</h2>\n<ul>{"".join(items)}</ul>\n</section>\n'


def _linked(text: str, url: str | None) -> str:
    return f'<a href="{escape(url)}">{escape(text)}</a>' if url else escape(text)


def _sequential_section(table: ResultsTableData, fmt: Formatter) -> str:
    blocks = sequential_blocks(table, fmt)
    if not blocks:
        return ""
    parts = ['<section class="sequential">', "<h2>Sequential design</h2>"]
    for block in blocks:
        items = "".join(f"<li>{escape(item)}</li>" for item in block.items)
        parts.append(
            f"<p><strong>study <code>{escape(block.study_id)}</code></strong>: {escape(block.design)}</p>"
            f"<ul>{items}</ul>"
        )
    parts.append("</section>\n")  # its own line: a fixed table's page keeps its lines as they were
    return "\n".join(parts)


def _tuning_section(tuning: Sequence[StudyTuning]) -> str:
    if not tuning:
        return ""
    from studies.tables.render_tuning_text import tuning_html_section

    return tuning_html_section(tuning)


def _evidence_section(evidence: Evidence | None) -> str:
    if evidence is None or evidence.is_empty:
        return ""
    from studies.tables.render_evidence_svg import evidence_figures

    notes = evidence.ranks.notes if evidence.ranks is not None else ()
    items = "".join(f"<li>{escape(note)}</li>" for note in notes)
    figures = "\n".join(
        f'<figure class="evidence" id="{escape(figure.name, quote=True)}">'
        f"<figcaption>{escape(figure.caption)}</figcaption>\n{figure.svg}\n</figure>"
        for figure in evidence_figures(evidence)
    )
    return (
        '<section class="evidence">\n<h2>Mechanism evidence</h2>\n'
        '<p class="caption">Per-layer gates of the gated methods (DyT weight: 0 = LayerNorm, 1 = DyT; '
        "entropy: 0 = decided, ln 2 = undecided) and effective ranks at initialisation, from every "
        f"epoch the trials reported.</p>\n{f'<ul>{items}</ul>' if items else ''}\n{figures}\n</section>"
    )
