"""Per-epoch learning curves as inline SVG text: one metric against the epoch, one line per trial,
coloured by a group (the trial's method), like the other figures built from studies.tables.svg.

    epoch_curves_svg([EpochCurve("final · dyt · seed 0", "dyt", ((1, 0.81), (2, 0.86)), finished=True)],
                     metric="val_accuracy", title="final phase: val_accuracy per epoch")

A trial still training has a dotted line, so a curve that merely stopped early is not read as converged.
The study page draws one figure per phase and metric with it; the figure depends on these values alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from studies.numbers import is_finite_number
from studies.tables.svg import (
    MARGIN,
    MUTED,
    PALETTE,
    TOP,
    Axis,
    legend_rows,
    nice_axis,
    series_legend,
    svg_attr,
    svg_open,
    svg_text,
    vertical_label,
    x_ticks,
    y_grid,
)

__all__ = ["EpochCurve", "epoch_curves_svg"]

_PLOT_W, _PLOT_H = 460.0, 200.0


@dataclass(frozen=True)
class EpochCurve:
    label: str  # the trial, as the tooltip names it (e.g. "final · dyt · seed 0")
    group: str  # the colour and legend entry: the trial's method (or grid point)
    points: tuple[tuple[int, float | None], ...]  # (epoch, value) in epoch order; None: not reported
    finished: bool = True  # False: still training (a dotted line)


def epoch_curves_svg(curves: Sequence[EpochCurve], *, metric: str, title: str) -> str:
    """`metric` (y) per epoch (x), one polyline (class trial-curve) per curve with a dot per epoch; a
    curve without a finite value draws nothing but still counts in the subtitle."""
    groups = list(dict.fromkeys(curve.group for curve in curves))
    colours = {group: PALETTE[i % len(PALETTE)] for i, group in enumerate(groups)}
    left, top = MARGIN + 56.0, float(TOP)
    legend_y = top + _PLOT_H + 52
    width = left + _PLOT_W + MARGIN + 14
    height = legend_y + 20 * legend_rows(len(groups), MARGIN, width) + 8
    finite = [(curve, _finite(curve.points)) for curve in curves]
    x_axis = _epoch_axis([epoch for _, points in finite for epoch, _ in points], left)
    y_axis = nice_axis([value for _, points in finite for _, value in points], top + _PLOT_H, top)

    drawn = sum(1 for _, points in finite if points)
    training = sum(1 for curve in curves if not curve.finished)
    subtitle = f"{drawn} of {len(curves)} trial(s) reported {metric}"
    if training:
        subtitle += f"; dotted: still training ({training})"
    parts = [svg_open(width, height, "epoch-curves", title), svg_text(MARGIN, 18, title, weight="600")]
    parts.append(svg_text(MARGIN, 36, subtitle, fill=MUTED))
    parts += y_grid(y_axis, left, left + _PLOT_W)
    parts += x_ticks(x_axis, top + _PLOT_H, integer=True)
    for curve, points in finite:
        parts += _curve(curve, points, x_axis, y_axis, colours[curve.group], metric)
    parts.append(svg_text(left + _PLOT_W / 2, top + _PLOT_H + 34, "epoch", anchor="middle"))
    parts.append(vertical_label(MARGIN + 4, top + _PLOT_H / 2, metric))
    parts.append(series_legend(groups, MARGIN, legend_y, width))
    parts.append("</svg>")
    return "\n".join(parts)


def _finite(points: Sequence[tuple[int, float | None]]) -> list[tuple[int, float]]:
    return [(epoch, float(value)) for epoch, value in points if is_finite_number(value)]


def _epoch_axis(epochs: Sequence[int], left: float) -> Axis:
    """Whole epochs only: a one-epoch trial still gets an axis from its epoch to the next."""
    axis = nice_axis([float(e) for e in epochs] or [0.0, 1.0], left, left + _PLOT_W)
    if axis.step >= 1.0:
        return axis
    low = math.floor(axis.low)
    return Axis(low=low, high=max(math.ceil(axis.high), low + 1), step=1.0, left=left, right=left + _PLOT_W)


def _curve(
    curve: EpochCurve, points: list[tuple[int, float]], x_axis: Axis, y_axis: Axis, colour: str, metric: str
) -> list[str]:
    if not points:
        return []
    coordinates = " ".join(f"{x_axis.x(e):.1f},{y_axis.x(v):.1f}" for e, v in points)
    dotted = "" if curve.finished else ' stroke-dasharray="2 2"'
    parts = [
        f'<polyline class="trial-curve" data-trial="{svg_attr(curve.label)}" points="{coordinates}" '
        f'fill="none" stroke="{colour}" stroke-width="1.6" opacity="0.85"{dotted}>'
        f"<title>{escape(curve.label)}</title></polyline>"
    ]
    for epoch, value in points:
        tooltip = f"{curve.label}, epoch {epoch}: {metric} {value:.4g}"
        parts.append(
            f'<circle class="epoch-point" cx="{x_axis.x(epoch):.1f}" cy="{y_axis.x(value):.1f}" r="2.2" '
            f'fill="{colour}"><title>{escape(tooltip)}</title></circle>'
        )
    return parts
