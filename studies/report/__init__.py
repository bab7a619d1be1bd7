"""Study reports: claim by claim, what was measured against what the paper says (pure numpy/scipy).

`build_report(StudyData, provenance=..., claim=...)` runs the claim's check (studies.claims) on the
study's trials and returns a `StudyReport`: the claim statement, the paper's numbers next to the
measured ones, the verdict with its findings, the comparison table, figures and provenance, rendered by
`to_markdown()`, `to_html()` (inline SVG figures) and `to_json()`.
"""

from studies.report.build import Figure, PaperComparison, Provenance, StudyReport, build_report

__all__ = ["Figure", "PaperComparison", "Provenance", "StudyReport", "build_report"]
