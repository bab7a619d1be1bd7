"""The results page's export block: its table as Markdown and LaTeX, and each of its figures as SVG and PDF
(service.api.routes.figures), each link asking with the page's own query (the same studies, metric,
reference, interval, adjustment), so a file shows what the page shows.

Added where the service serves the page, as the back link is (service.api.back_link): the page itself
(studies.tables.render_html) is a standalone document, also saved as a file, where these links would lead
nowhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from urllib.parse import quote, urlencode

__all__ = ["with_export_links"]

# Inline, as the back link's: the page's own CSS is the standalone document's. Long figure ids wrap on a phone.
_STYLE = "font: 14px system-ui, sans-serif; margin: 0 0 12px; line-height: 1.6; overflow-wrap: anywhere"


def with_export_links(
    document: str, *, dataset: str, query: Sequence[tuple[str, str]], figures: Sequence[str]
) -> str:
    """`document` with the export block after its <body>: the table's links and the first figure's (the
    forest plot) on one line, the page's other figures folded below it. `query`: the page's query without
    `format`; `figures`: the names of the page's figures (studies.tables.figures), in page order."""
    table = " · ".join(
        _link(_table_url(dataset, query, fmt), label, f"the table as {label}")
        for fmt, label in (("md", "Markdown"), ("latex", "LaTeX"))
    )
    first, *others = figures or [""]
    line = f"Export: table {table}" + (f"; figure {_figure_links(dataset, first, query)}" if first else "")
    folded = ""
    if others:
        items = "".join(f"<li>{_figure_links(dataset, name, query)}</li>" for name in others)
        folded = (
            f"<details><summary>the page's other {len(others)} figure(s) as SVG or PDF</summary>"
            f'<ul style="margin: 0.2rem 0 0 1.2rem; padding: 0">{items}</ul></details>'
        )
    block = f'<div class="export" id="export" style="{_STYLE}">{line}{folded}</div>\n'
    head, separator, tail = document.partition("<body>")
    if not separator:
        return block + document
    return f"{head}<body>\n{block}{tail}"


def _figure_url(dataset: str, name: str, fmt: str, query: Sequence[tuple[str, str]] = ()) -> str:
    """GET /results/{dataset}/figures/{name}.{fmt} with `query`."""
    path = f"/results/{quote(dataset, safe='')}/figures/{quote(name, safe='')}.{fmt}"
    return path + (f"?{urlencode(list(query))}" if query else "")


def _table_url(dataset: str, query: Sequence[tuple[str, str]], fmt: str) -> str:
    return f"/results/{quote(dataset, safe='')}?{urlencode([*query, ('format', fmt)])}"


def _figure_links(dataset: str, name: str, query: Sequence[tuple[str, str]]) -> str:
    return f"{escape(name)} " + " · ".join(
        _link(_figure_url(dataset, name, fmt, query), fmt.upper(), f"{name} as {fmt.upper()}")
        for fmt in ("svg", "pdf")
    )


def _link(url: str, label: str, title: str) -> str:
    return f'<a href="{escape(url)}" title="{escape(title)}">{escape(label)}</a>'
