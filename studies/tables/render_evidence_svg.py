"""Figures of the mechanism evidence (studies.evidence) as inline SVG text, like the forest plot.

- `gate_heatmap_svg`: layers x epochs of one method's DyT weight or gate entropy, with a colour legend;
- `layer_gates_svg`: final DyT weight or entropy per layer, one series per method, t-interval whiskers;
- `rank_depth_svg`: init effective rank against depth, one bold curve per norm placement over faint
  curves of its grid points;
- `rank_scatter_svg`: final metric against init rank, one point per trial (crosses: no final metric).

`evidence_figures(evidence)` lists every figure the data allow. The SVG carries no xmlns (it is inlined
in the HTML page); `standalone_svg` adds it for a figure saved as a file. The gate figures are drawn in
render_gates_svg, the rank figures in render_ranks_svg, from the shared parts in studies.tables.svg.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from studies.evidence import GATE_QUANTITIES
from studies.tables.render_gates_svg import QUANTITY, gate_heatmap_svg, layer_gates_svg
from studies.tables.render_ranks_svg import rank_depth_svg, rank_scatter_svg
from studies.tables.svg import level

if TYPE_CHECKING:
    from studies.evidence import Evidence

__all__ = [
    "EvidenceFigure",
    "evidence_figures",
    "gate_heatmap_svg",
    "layer_gates_svg",
    "rank_depth_svg",
    "rank_scatter_svg",
    "standalone_svg",
]


@dataclass(frozen=True)
class EvidenceFigure:
    name: str  # file-name stem, e.g. gate_dyt_weight_heatmap_autonorm_s
    caption: str
    svg: str


def evidence_figures(evidence: Evidence) -> list[EvidenceFigure]:
    """Every figure the evidence has data for, in page order."""
    figures: list[EvidenceFigure] = []
    gates = evidence.gates
    if gates is not None:
        for quantity in GATE_QUANTITIES:
            title = QUANTITY[quantity]["title"]
            figures.append(
                EvidenceFigure(
                    f"gate_{quantity}_by_layer",
                    f"Final {title} per layer (mean over seeds, {level(gates.confidence)} t interval)",
                    layer_gates_svg(gates, quantity),
                )
            )
        for method in gates.methods:
            if not method.epochs:
                continue
            for quantity in GATE_QUANTITIES:
                figures.append(
                    EvidenceFigure(
                        f"gate_{quantity}_heatmap_{_slug(method.label)}",
                        f"{method.label}: {QUANTITY[quantity]['title']} per layer and epoch (mean over seeds)",
                        gate_heatmap_svg(method, quantity),
                    )
                )
    ranks = evidence.ranks
    if ranks is not None:
        if ranks.placements:
            figures.append(
                EvidenceFigure(
                    "init_rank_by_depth",
                    "Effective rank of the residual representation at initialisation, by depth and norm placement",
                    rank_depth_svg(ranks),
                )
            )
        if ranks.points:
            figures.append(
                EvidenceFigure(
                    "final_metric_vs_init_rank",
                    f"Final {ranks.metric} against {ranks.rank_key} (one point per trial)",
                    rank_scatter_svg(ranks),
                )
            )
    return figures


def standalone_svg(svg: str) -> str:
    """The figure as a file of its own: the SVG namespace, which inline HTML does without."""
    if "xmlns=" in svg.split(">", 1)[0]:
        return svg
    return svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", label).strip("_") or "method"
