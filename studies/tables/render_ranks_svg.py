"""The rank figures of the mechanism evidence (studies.evidence) as inline SVG text.

- `rank_depth_svg`: init effective rank against depth, one bold curve per norm placement over faint
  curves of its grid points;
- `rank_scatter_svg`: final metric against init rank, one point per trial (crosses: no final metric).
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from studies.numbers import is_finite_number
from studies.tables.svg import (
    MARGIN,
    MUTED,
    PALETTE,
    TOP,
    Axis,
    clamped,
    legend_rows,
    level,
    nice_axis,
    point_with_whisker,
    series_legend,
    svg_attr,
    svg_open,
    svg_text,
    vertical_label,
    x_ticks,
    y_grid,
)

if TYPE_CHECKING:
    from studies.evidence import RankEvidence

__all__ = ["rank_depth_svg", "rank_scatter_svg"]


def rank_depth_svg(ranks: RankEvidence) -> str:
    """Normalised effective rank of Z_l against depth l: a bold curve per placement (mean and t interval
    over its trials) over one faint curve per grid point (mean over seeds)."""
    left = MARGIN + 48.0
    top = float(TOP)
    plot_w, plot_h = 460.0, 220.0
    placements = [curve.placement for curve in ranks.placements]
    colours = {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(placements)}
    legend_y = top + plot_h + 52
    width = left + plot_w + MARGIN + 14
    height = legend_y + 20 * legend_rows(len(placements), MARGIN, width) + 8
    depths = [point.depth for curve in ranks.placements for point in curve.points]
    x_axis = nice_axis([float(d) for d in depths] or [0.0, 1.0], left, left + plot_w)
    if x_axis.step < 1.0:
        x_axis = Axis(low=x_axis.low, high=x_axis.high, step=1.0, left=left, right=left + plot_w)
    y_axis = Axis(low=0.0, high=1.0, step=0.2, left=top + plot_h, right=top)

    subtitle = (
        f"bold: mean over a placement's trials ({level(ranks.confidence)} t interval); faint: one grid point"
        if ranks.per_depth
        else "first and last depth only (per-depth ranks not reported); bold: placement mean, faint: grid point"
    )
    title = "Effective rank at initialisation against depth"
    parts = [
        svg_open(width, height, "rank-depth", title),
        svg_text(MARGIN, 18, title, weight="600"),
        svg_text(MARGIN, 36, subtitle, fill=MUTED),
    ]
    parts += y_grid(y_axis, left, left + plot_w)
    parts += x_ticks(x_axis, top + plot_h, integer=True)
    for curve in ranks.groups:
        points = [(p.depth, p.value.mean) for p in curve.points if is_finite_number(p.value.mean)]
        parts.append(
            _polyline(
                points,
                x_axis,
                y_axis,
                colours.get(curve.placement, MUTED),
                "group-line",
                1.0,
                0.35,
                curve.label,
            )
        )
    for curve in ranks.placements:
        colour = colours[curve.placement]
        points = [(p.depth, p.value.mean) for p in curve.points if is_finite_number(p.value.mean)]
        parts.append(_polyline(points, x_axis, y_axis, colour, "placement-line", 2.5, 1.0, curve.label))
        for point in curve.points:
            parts += point_with_whisker(
                point.value,
                x_axis.x(point.depth),
                y_axis,
                colour,
                f"{curve.label}, depth {point.depth}: {ranks.depth_measure}",
            )
    parts.append(
        svg_text(left + plot_w / 2, top + plot_h + 34, "depth l (0 = embedded tokens)", anchor="middle")
    )
    parts.append(vertical_label(MARGIN + 4, top + plot_h / 2, "erank(Z_l) / width"))
    parts.append(series_legend([f"{p} norm" for p in placements], MARGIN, legend_y, width))
    parts.append("</svg>")
    return "\n".join(parts)


def _polyline(
    points, x_axis: Axis, y_axis: Axis, colour: str, css: str, width: float, opacity: float, label: str
) -> str:
    coordinates = " ".join(f"{x_axis.x(d):.1f},{clamped(y_axis, v):.1f}" for d, v in points)
    return (
        f'<polyline class="{css}" data-label="{svg_attr(label)}" points="{coordinates}" fill="none" '
        f'stroke="{colour}" stroke-width="{width:g}" opacity="{opacity:g}"><title>{escape(label)}</title></polyline>'
    )


def rank_scatter_svg(ranks: RankEvidence) -> str:
    """Final metric (y) against init rank (x), one dot per trial coloured by placement; a trial without a
    final metric is a cross on the bottom edge at its init rank."""
    left = MARGIN + 56.0
    top = float(TOP)
    plot_w, plot_h = 460.0, 240.0
    placements = list(dict.fromkeys(p.placement for p in ranks.points))
    colours = {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(placements)}
    legend_y = top + plot_h + 52
    width = left + plot_w + MARGIN + 14
    height = legend_y + 20 * legend_rows(len(placements), MARGIN, width) + 8
    x_axis = nice_axis([p.init_rank for p in ranks.points], left, left + plot_w)
    values = [p.value for p in ranks.points if p.value is not None]
    y_axis = nice_axis(values or [0.0, 1.0], top + plot_h - 14, top)  # room for crosses at the bottom edge

    with_value = len(values)
    correlation = (
        f"Spearman ρ = {ranks.spearman:+.2f} over {with_value} trials"
        if ranks.spearman is not None
        else f"{with_value} trial(s) with a final {ranks.metric}: no rank correlation"
    )
    direction = "higher is better" if ranks.higher_is_better else "lower is better"
    title = f"Final {ranks.metric} against {ranks.rank_key}"
    parts = [
        svg_open(width, height, "rank-scatter", title),
        svg_text(MARGIN, 18, title, weight="600"),
        svg_text(
            MARGIN, 36, f"{correlation}; × = no final {ranks.metric} (failed or unfinished)", fill=MUTED
        ),
    ]
    parts += y_grid(y_axis, left, left + plot_w)
    parts.append(
        f'<line class="axis" x1="{left:.1f}" y1="{top + plot_h:.1f}" x2="{left + plot_w:.1f}" '
        f'y2="{top + plot_h:.1f}" stroke="{MUTED}" stroke-width="1"/>'
    )
    parts += x_ticks(x_axis, top + plot_h, integer=False)
    for point in ranks.points:
        colour = colours[point.placement]
        x = x_axis.x(point.init_rank)
        name = f"{point.label}, seed {point.seed}: {ranks.rank_key} {point.init_rank:.3f}"
        if point.value is None:
            y = top + plot_h - 6
            parts.append(
                f'<path class="no-value" d="M{x - 4:.1f},{y - 4:.1f} L{x + 4:.1f},{y + 4:.1f} '
                f'M{x - 4:.1f},{y + 4:.1f} L{x + 4:.1f},{y - 4:.1f}" stroke="{colour}" stroke-width="1.8">'
                f"<title>{escape(f'{name}, no final {ranks.metric} ({point.status})')}</title></path>"
            )
            continue
        parts.append(
            f'<circle class="point" data-label="{svg_attr(point.label)}" cx="{x:.1f}" cy="{y_axis.x(point.value):.1f}" '
            f'r="4" fill="{colour}" fill-opacity="0.8" stroke="#ffffff" stroke-width="1">'
            f"<title>{escape(f'{name}, {ranks.metric} {point.value:.4g}')}</title></circle>"
        )
    parts.append(
        svg_text(left + plot_w / 2, top + plot_h + 34, f"{ranks.rank_key} at initialisation", anchor="middle")
    )
    parts.append(vertical_label(MARGIN + 4, top + plot_h / 2, f"{ranks.metric} ({direction})"))
    parts.append(series_legend([f"{p} norm" for p in placements], MARGIN, legend_y, width))
    parts.append("</svg>")
    return "\n".join(parts)
