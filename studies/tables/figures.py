"""The figures of a results page by name, each the SVG the page inlines, to save as a file of its own.

A figure's name is its id on the page, so a figure seen there is exported by the name it already has:

- `forest_plot`: the table's forest plot (studies.tables.render_svg), always there;
- the mechanism evidence's figures under their own names (studies.tables.render_evidence_svg), where the
  trials reported gates or ranks;
- each study's tuning figures as `<study id>_<name>` (studies.tables.render_tuning_svg), the study id
  keeping two pooled studies' figures of one method apart.

`results_figures` lists them in page order; `find_figure` picks one, and names the others when it is not
there. The SVG of an EvidenceFigure here carries the SVG namespace, as a file needs (`standalone_svg`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from studies.tables.render_evidence_svg import EvidenceFigure, standalone_svg
from studies.tables.render_svg import forest_plot_svg

if TYPE_CHECKING:
    from studies.evidence import Evidence
    from studies.tables.model import ResultsTableData
    from studies.tuning import StudyTuning

__all__ = ["FOREST_PLOT", "UnknownFigureError", "find_figure", "results_figures"]

FOREST_PLOT = "forest_plot"


class UnknownFigureError(LookupError):
    """A figure name the results page does not show; the message lists the names it does."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name = name
        self.known = tuple(known)
        super().__init__(f"unknown figure '{name}'; this results page has: {', '.join(self.known)}")


def results_figures(
    table: ResultsTableData, evidence: Evidence | None = None, tuning: Sequence[StudyTuning] = ()
) -> list[EvidenceFigure]:
    """Every figure the results page of `table` shows with this `evidence` and `tuning`, in page order."""
    direction = "higher is better" if table.higher_is_better else "lower is better"
    figures = [
        EvidenceFigure(
            FOREST_PLOT,
            f"{table.dataset}: {table.metric} ({direction}) per row, and its difference from "
            f"{table.reference}, with {table.confidence * 100:g} % intervals",
            forest_plot_svg(table),
        )
    ]
    if evidence is not None and not evidence.is_empty:
        # Imported here, as the page does: the evidence figures load with the first page that has any.
        from studies.tables.render_evidence_svg import evidence_figures

        figures += evidence_figures(evidence)
    if tuning:
        from studies.tables.render_tuning_svg import tuning_figures

        figures += [
            replace(figure, name=f"{study.study_id}_{figure.name}")
            for study in tuning
            if not study.is_empty
            for figure in tuning_figures(study)
        ]
    return [replace(figure, svg=standalone_svg(figure.svg)) for figure in figures]


def find_figure(figures: Sequence[EvidenceFigure], name: str) -> EvidenceFigure:
    """The figure called `name`; UnknownFigureError naming every figure there is otherwise."""
    for figure in figures:
        if figure.name == name:
            return figure
    raise UnknownFigureError(name, [figure.name for figure in figures])
