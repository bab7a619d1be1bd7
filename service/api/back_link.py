"""The way back from a rendered results table or report to the study list, for pages the service serves.

The renderings themselves (studies.tables, studies.report) are standalone documents, also written to files
and MLflow artifacts where a link to "/" would lead nowhere; the service adds the link where it serves them.
"""

from __future__ import annotations

__all__ = ["with_back_link"]

_NAV = (
    '<nav class="back" style="font: 14px system-ui, sans-serif; margin: 0 0 12px">'
    '<a href="/">All studies</a> · <a href="/catalog">Catalog</a>{extra}</nav>'
)


def with_back_link(document: str, *, study_page: str | None = None) -> str:
    """`document` with a link bar to the study list (and to `study_page` when given) after its <body>."""
    extra = f' · <a href="{study_page}">This study</a>' if study_page else ""
    nav = _NAV.format(extra=extra)
    head, separator, tail = document.partition("<body>")
    if not separator:
        return nav + document
    return f"{head}<body>\n{nav}{tail}"
