"""Figures of the mechanism evidence (studies.evidence) as inline SVG text, like the forest plot.

- `gate_heatmap_svg`: layers x epochs of one method's DyT weight or gate entropy, with a colour legend;
- `layer_gates_svg`: final DyT weight or entropy per layer, one series per method, t-interval whiskers;
- `rank_depth_svg`: init effective rank against depth, one bold curve per norm placement over faint
  curves of its grid points;
- `rank_scatter_svg`: final metric against init rank, one point per trial (crosses: no final metric).

`evidence_figures(evidence)` lists every figure the data allow. The SVG carries no xmlns (it is inlined
in the HTML page); `standalone_svg` adds it for a figure saved as a file.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING

from studies.evidence import GATE_QUANTITIES
from studies.numbers import is_finite_number
from studies.tables.render_svg import _attr, _Axis, _axis, _rect, _text, _tick_label

if TYPE_CHECKING:
    from studies.evidence import (
        Evidence,
        GateEvidence,
        GateQuantity,
        MeanInterval,
        MethodGates,
        RankEvidence,
    )

__all__ = [
    "EvidenceFigure",
    "evidence_figures",
    "gate_heatmap_svg",
    "layer_gates_svg",
    "rank_depth_svg",
    "rank_scatter_svg",
    "standalone_svg",
]

_TEXT = "#1f2328"
_MUTED = "#57606a"
_GRID = "#d0d7de"
_MISSING = "#eaeef2"
# Colour-blind-safe categorical colours (Okabe-Ito), one per series.
_PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000")
_FONT = 'font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif" font-size="12"'
_LN2 = math.log(2.0)

# Diverging for the DyT weight: LayerNorm (0) blue, mixed (0.5) near white, DyT (1) red.
_WEIGHT_STOPS = ((0.0, "#2166ac"), (0.5, "#f7f7f7"), (1.0, "#b2182b"))
# Sequential for the entropy: decided (0) near white, undecided (ln 2) purple.
_ENTROPY_STOPS = ((0.0, "#fcfbfd"), (_LN2, "#54278f"))

_QUANTITY = {
    "dyt_weight": {
        "title": "DyT weight",
        "stops": _WEIGHT_STOPS,
        "range": (0.0, 1.0),
        "axis": (0.0, 1.0, 0.2),
        "ends": ("0 = LN", "0.5 = mixed", "1 = DyT"),
        "reference": (0.5, "mixed"),
    },
    "entropy": {
        "title": "gate entropy",
        "stops": _ENTROPY_STOPS,
        "range": (0.0, _LN2),
        "axis": (0.0, 0.7, 0.1),
        "ends": ("0 = decided", "", "ln 2 = undecided"),
        "reference": (_LN2, "ln 2"),
    },
}

_MARGIN = 12
_TOP = 52  # title and subtitle
_LEGEND_SWATCHES = 11


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
            title = _QUANTITY[quantity]["title"]
            figures.append(
                EvidenceFigure(
                    f"gate_{quantity}_by_layer",
                    f"Final {title} per layer (mean over seeds, {_level(gates.confidence)} t interval)",
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
                        f"{method.label}: {_QUANTITY[quantity]['title']} per layer and epoch (mean over seeds)",
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


# ------------------------------------------------------------------------------------------- heatmap


def gate_heatmap_svg(method: MethodGates, quantity: GateQuantity) -> str:
    """Layers (rows, layer 0 = first block on top) x epochs (columns); cell colour = mean over seeds."""
    spec = _QUANTITY[quantity]
    matrix = method.by_epoch(quantity)
    epochs = method.epochs
    layers = [layer.layer for layer in method.layers]
    cell_w = max(4.0, min(28.0, 560.0 / max(1, len(epochs))))
    cell_h = 18.0
    left = _MARGIN + 62.0
    top = float(_TOP)
    grid_w = cell_w * len(epochs)
    grid_h = cell_h * len(layers)
    legend_top = top + grid_h + 50
    width = max(left + grid_w + _MARGIN, _MARGIN + len(spec["title"]) * 7.0 + 18 + _LEGEND_SWATCHES * 24 + 50)
    height = legend_top + 44

    title = f"{method.label}: {spec['title']} per layer and epoch"
    parts = [
        _svg_open(width, height, "gate-heatmap", title),
        _text(_MARGIN, 18, title, weight="600"),
        _text(
            _MARGIN, 36, f"mean over {method.n_trials} seed(s); rows: layers, columns: epochs", fill=_MUTED
        ),
    ]
    for row, layer in enumerate(layers):
        y = top + row * cell_h
        parts.append(_text(left - 8, y + cell_h / 2 + 4, f"layer {layer}", anchor="end", fill=_MUTED))
        for column, epoch in enumerate(epochs):
            value = matrix[row][column] if row < len(matrix) else None
            fill = _colour(spec["stops"], value) if value is not None else _MISSING
            shown = "no value" if value is None else f"{value:.3f}"
            tooltip = f"layer {layer}, epoch {epoch}: {spec['title']} {shown}"
            parts.append(
                f'<rect class="cell{" missing" if value is None else ""}" x="{left + column * cell_w:.1f}" '
                f'y="{y:.1f}" width="{cell_w:.1f}" height="{cell_h:.1f}" fill="{fill}" '
                f'data-layer="{layer}" data-epoch="{epoch}">'
                f"<title>{escape(tooltip)}</title></rect>"
            )
    parts.append(
        f'<rect class="frame" x="{left:.1f}" y="{top:.1f}" width="{grid_w:.1f}" height="{grid_h:.1f}" '
        f'fill="none" stroke="{_GRID}" stroke-width="1"/>'
    )
    step = max(1, math.ceil(len(epochs) / 10))
    for column in range(0, len(epochs), step):
        x = left + (column + 0.5) * cell_w
        parts.append(
            _text(
                x, top + grid_h + 16, str(epochs[column]), anchor="middle", fill=_MUTED, css="tick", size=11
            )
        )
    parts.append(_text(left + grid_w / 2, top + grid_h + 32, "epoch", anchor="middle"))
    parts.append(_legend_scale(spec, _MARGIN, legend_top))
    parts.append("</svg>")
    return "\n".join(parts)


def _legend_scale(spec: dict, x: float, y: float) -> str:
    """Discrete swatches from the low to the high end of the scale (no gradient ids to clash in a page)."""
    low, high = spec["range"]
    parts = ['<g class="legend colour-scale">', _text(x, y + 10, f"{spec['title']}:", fill=_MUTED)]
    start = x + len(spec["title"]) * 7.0 + 18  # after the label, at ~7 px a character
    for i in range(_LEGEND_SWATCHES):
        value = low + (high - low) * i / (_LEGEND_SWATCHES - 1)
        parts.append(_rect(start + i * 24, y, 24, 12, _colour(spec["stops"], value), css="swatch"))
    end = start + _LEGEND_SWATCHES * 24
    left_label, middle_label, right_label = spec["ends"]
    parts.append(_text(start, y + 28, left_label, fill=_MUTED, size=11))
    if middle_label:
        parts.append(_text((start + end) / 2, y + 28, middle_label, anchor="middle", fill=_MUTED, size=11))
    parts.append(_text(end, y + 28, right_label, anchor="end", fill=_MUTED, size=11))
    parts.append("</g>")
    return "\n".join(parts)


def _colour(stops, value: float) -> str:
    value = min(max(value, stops[0][0]), stops[-1][0])
    for (low, low_colour), (high, high_colour) in itertools.pairwise(stops):
        if value <= high:
            t = 0.0 if high == low else (value - low) / (high - low)
            return _mix(low_colour, high_colour, t)
    return stops[-1][1]


def _mix(a: str, b: str, t: float) -> str:
    ca = [int(a[i : i + 2], 16) for i in (1, 3, 5)]
    cb = [int(b[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(ca, cb, strict=True))


# ------------------------------------------------------------------------------- per-layer point chart


def layer_gates_svg(gates: GateEvidence, quantity: GateQuantity) -> str:
    """Final gate value per layer: one coloured series per method, dots at the mean, whiskers = t interval."""
    spec = _QUANTITY[quantity]
    methods = gates.methods
    layer_ids = sorted({layer.layer for m in methods for layer in m.layers})
    slot = max(44.0, min(90.0, 560.0 / max(1, len(layer_ids))))
    left = _MARGIN + 48.0
    top = float(_TOP)
    plot_h = 220.0
    plot_w = slot * max(1, len(layer_ids))
    legend_y = top + plot_h + 52
    width = left + plot_w + _MARGIN + 10
    height = legend_y + 20 * _legend_rows(len(methods), _MARGIN, width) + 8
    low, high, step = spec["axis"]
    y_axis = _Axis(low=low, high=high, step=step, left=top + plot_h, right=top)

    title = f"Final {spec['title']} per layer"
    parts = [
        _svg_open(width, height, "layer-gates", title),
        _text(_MARGIN, 18, title, weight="600"),
        _text(
            _MARGIN,
            36,
            f"dot = mean over seeds, whisker = {_level(gates.confidence)} t interval; "
            + ("0 = LayerNorm, 1 = DyT" if quantity == "dyt_weight" else "0 = decided, ln 2 = undecided"),
            fill=_MUTED,
        ),
    ]
    parts += _y_grid(y_axis, left, left + plot_w)
    reference, reference_label = spec["reference"]
    y_ref = y_axis.x(reference)
    parts.append(
        f'<line class="reference-line" x1="{left:.1f}" y1="{y_ref:.1f}" x2="{left + plot_w:.1f}" '
        f'y2="{y_ref:.1f}" stroke="{_MUTED}" stroke-width="1" stroke-dasharray="4 3"/>'
    )
    parts.append(_text(left + plot_w - 4, y_ref - 4, reference_label, anchor="end", fill=_MUTED, size=11))
    spread = min(12.0, slot / (len(methods) + 1))
    for column, layer in enumerate(layer_ids):
        centre = left + (column + 0.5) * slot
        parts.append(
            _text(centre, top + plot_h + 16, str(layer), anchor="middle", fill=_MUTED, css="tick", size=11)
        )
        for j, method in enumerate(methods):
            found = [entry for entry in method.layers if entry.layer == layer]
            if not found:
                continue
            x = centre + (j - (len(methods) - 1) / 2) * spread
            parts += _point_with_whisker(
                getattr(found[0], quantity),
                x,
                y_axis,
                _PALETTE[j % len(_PALETTE)],
                f"{method.label}, layer {layer}: {spec['title']}",
            )
    parts.append(_text(left + plot_w / 2, top + plot_h + 34, "layer (0 = first block)", anchor="middle"))
    parts.append(_series_legend([m.label for m in methods], _MARGIN, legend_y, width))
    parts.append("</svg>")
    return "\n".join(parts)


def _point_with_whisker(value: MeanInterval, x: float, y_axis: _Axis, colour: str, what: str) -> list[str]:
    if not is_finite_number(value.mean):
        return []
    interval = ""
    parts = []
    if is_finite_number(value.ci_low) and is_finite_number(value.ci_high):
        y1, y2 = _clamped(y_axis, value.ci_low), _clamped(y_axis, value.ci_high)
        parts.append(
            f'<line class="whisker" x1="{x:.1f}" y1="{y1:.1f}" x2="{x:.1f}" y2="{y2:.1f}" '
            f'stroke="{colour}" stroke-width="1.6"/>'
        )
        interval = f" [{value.ci_low:.3f}, {value.ci_high:.3f}]"
    tooltip = f"{what} {value.mean:.3f}{interval}, n = {value.n}"
    parts.append(
        f'<circle class="point" cx="{x:.1f}" cy="{_clamped(y_axis, value.mean):.1f}" r="4" fill="{colour}" '
        f'stroke="#ffffff" stroke-width="1"><title>{escape(tooltip)}</title></circle>'
    )
    return parts


# ---------------------------------------------------------------------------------- rank against depth


def rank_depth_svg(ranks: RankEvidence) -> str:
    """Normalised effective rank of Z_l against depth l: a bold curve per placement (mean and t interval
    over its trials) over one faint curve per grid point (mean over seeds)."""
    left = _MARGIN + 48.0
    top = float(_TOP)
    plot_w, plot_h = 460.0, 220.0
    placements = [curve.placement for curve in ranks.placements]
    colours = {p: _PALETTE[i % len(_PALETTE)] for i, p in enumerate(placements)}
    legend_y = top + plot_h + 52
    width = left + plot_w + _MARGIN + 14
    height = legend_y + 20 * _legend_rows(len(placements), _MARGIN, width) + 8
    depths = [point.depth for curve in ranks.placements for point in curve.points]
    x_axis = _axis([float(d) for d in depths] or [0.0, 1.0], left, left + plot_w)
    if x_axis.step < 1.0:
        x_axis = _Axis(low=x_axis.low, high=x_axis.high, step=1.0, left=left, right=left + plot_w)
    y_axis = _Axis(low=0.0, high=1.0, step=0.2, left=top + plot_h, right=top)

    subtitle = (
        f"bold: mean over a placement's trials ({_level(ranks.confidence)} t interval); faint: one grid point"
        if ranks.per_depth
        else "first and last depth only (per-depth ranks not reported); bold: placement mean, faint: grid point"
    )
    title = "Effective rank at initialisation against depth"
    parts = [
        _svg_open(width, height, "rank-depth", title),
        _text(_MARGIN, 18, title, weight="600"),
        _text(_MARGIN, 36, subtitle, fill=_MUTED),
    ]
    parts += _y_grid(y_axis, left, left + plot_w)
    parts += _x_ticks(x_axis, top + plot_h, integer=True)
    for curve in ranks.groups:
        points = [(p.depth, p.value.mean) for p in curve.points if is_finite_number(p.value.mean)]
        parts.append(
            _polyline(
                points,
                x_axis,
                y_axis,
                colours.get(curve.placement, _MUTED),
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
            parts += _point_with_whisker(
                point.value,
                x_axis.x(point.depth),
                y_axis,
                colour,
                f"{curve.label}, depth {point.depth}: {ranks.depth_measure}",
            )
    parts.append(
        _text(left + plot_w / 2, top + plot_h + 34, "depth l (0 = embedded tokens)", anchor="middle")
    )
    parts.append(_vertical_label(_MARGIN + 4, top + plot_h / 2, "erank(Z_l) / width"))
    parts.append(_series_legend([f"{p} norm" for p in placements], _MARGIN, legend_y, width))
    parts.append("</svg>")
    return "\n".join(parts)


def _polyline(
    points, x_axis: _Axis, y_axis: _Axis, colour: str, css: str, width: float, opacity: float, label: str
) -> str:
    coordinates = " ".join(f"{x_axis.x(d):.1f},{_clamped(y_axis, v):.1f}" for d, v in points)
    return (
        f'<polyline class="{css}" data-label="{_attr(label)}" points="{coordinates}" fill="none" '
        f'stroke="{colour}" stroke-width="{width:g}" opacity="{opacity:g}"><title>{escape(label)}</title></polyline>'
    )


# ------------------------------------------------------------------------------- metric against init rank


def rank_scatter_svg(ranks: RankEvidence) -> str:
    """Final metric (y) against init rank (x), one dot per trial coloured by placement; a trial without a
    final metric is a cross on the bottom edge at its init rank."""
    left = _MARGIN + 56.0
    top = float(_TOP)
    plot_w, plot_h = 460.0, 240.0
    placements = list(dict.fromkeys(p.placement for p in ranks.points))
    colours = {p: _PALETTE[i % len(_PALETTE)] for i, p in enumerate(placements)}
    legend_y = top + plot_h + 52
    width = left + plot_w + _MARGIN + 14
    height = legend_y + 20 * _legend_rows(len(placements), _MARGIN, width) + 8
    x_axis = _axis([p.init_rank for p in ranks.points], left, left + plot_w)
    values = [p.value for p in ranks.points if p.value is not None]
    y_axis = _axis(values or [0.0, 1.0], top + plot_h - 14, top)  # room for crosses at the bottom edge

    with_value = len(values)
    correlation = (
        f"Spearman ρ = {ranks.spearman:+.2f} over {with_value} trials"
        if ranks.spearman is not None
        else f"{with_value} trial(s) with a final {ranks.metric}: no rank correlation"
    )
    direction = "higher is better" if ranks.higher_is_better else "lower is better"
    title = f"Final {ranks.metric} against {ranks.rank_key}"
    parts = [
        _svg_open(width, height, "rank-scatter", title),
        _text(_MARGIN, 18, title, weight="600"),
        _text(_MARGIN, 36, f"{correlation}; × = no final {ranks.metric} (failed or unfinished)", fill=_MUTED),
    ]
    parts += _y_grid(y_axis, left, left + plot_w)
    parts.append(
        f'<line class="axis" x1="{left:.1f}" y1="{top + plot_h:.1f}" x2="{left + plot_w:.1f}" '
        f'y2="{top + plot_h:.1f}" stroke="{_MUTED}" stroke-width="1"/>'
    )
    parts += _x_ticks(x_axis, top + plot_h, integer=False)
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
            f'<circle class="point" data-label="{_attr(point.label)}" cx="{x:.1f}" cy="{y_axis.x(point.value):.1f}" '
            f'r="4" fill="{colour}" fill-opacity="0.8" stroke="#ffffff" stroke-width="1">'
            f"<title>{escape(f'{name}, {ranks.metric} {point.value:.4g}')}</title></circle>"
        )
    parts.append(
        _text(left + plot_w / 2, top + plot_h + 34, f"{ranks.rank_key} at initialisation", anchor="middle")
    )
    parts.append(_vertical_label(_MARGIN + 4, top + plot_h / 2, f"{ranks.metric} ({direction})"))
    parts.append(_series_legend([f"{p} norm" for p in placements], _MARGIN, legend_y, width))
    parts.append("</svg>")
    return "\n".join(parts)


# ------------------------------------------------------------------------------------------- helpers


def _svg_open(width: float, height: float, css: str, label: str) -> str:
    return (
        f'<svg class="{css}" width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'role="img" {_FONT} fill="{_TEXT}" aria-label="{_attr(label)}">\n<title>{escape(label)}</title>'
    )


def _y_grid(axis: _Axis, left: float, right: float) -> list[str]:
    parts = [
        f'<line class="axis" x1="{left:.1f}" y1="{axis.right:.1f}" x2="{left:.1f}" y2="{axis.left:.1f}" '
        f'stroke="{_MUTED}" stroke-width="1"/>'
    ]
    for value in axis.ticks():
        y = axis.x(value)
        parts.append(
            f'<line class="gridline" x1="{left:.1f}" y1="{y:.1f}" x2="{right:.1f}" y2="{y:.1f}" '
            f'stroke="{_GRID}" stroke-width="0.8"/>'
        )
        parts.append(
            _text(
                left - 6,
                y + 4,
                _tick_label(value, axis.decimals, signed=False),
                anchor="end",
                fill=_MUTED,
                css="tick",
                size=11,
            )
        )
    return parts


def _x_ticks(axis: _Axis, bottom: float, *, integer: bool) -> list[str]:
    parts = []
    for value in axis.ticks():
        x = axis.x(value)
        label = str(round(value)) if integer else _tick_label(value, axis.decimals, signed=False)
        parts.append(
            f'<line class="tick-mark" x1="{x:.1f}" y1="{bottom:.1f}" x2="{x:.1f}" y2="{bottom + 4:.1f}" '
            f'stroke="{_MUTED}" stroke-width="1"/>'
        )
        parts.append(_text(x, bottom + 16, label, anchor="middle", fill=_MUTED, css="tick", size=11))
    return parts


def _clamped(axis: _Axis, value: float) -> float:
    """Pixel of `value`, held inside the axis (a t interval may reach past a bounded scale)."""
    return axis.x(min(max(value, axis.low), axis.high))


def _vertical_label(x: float, y: float, content: str) -> str:
    return (
        f'<text class="axis-label" x="{x:.1f}" y="{y:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 {x:.1f} {y:.1f})">{escape(content)}</text>'
    )


_LEGEND_ENTRY_WIDTH = 170.0


def _legend_per_row(x: float, width: float) -> int:
    return max(1, int((width - x) // _LEGEND_ENTRY_WIDTH))


def _legend_rows(entries: int, x: float, width: float) -> int:
    return max(1, math.ceil(entries / _legend_per_row(x, width)))


def _series_legend(labels: list[str], x: float, y: float, width: float) -> str:
    per_row = _legend_per_row(x, width)
    parts = ['<g class="legend series">']
    for i, label in enumerate(labels):
        row, column = divmod(i, per_row)
        cx, cy = x + column * _LEGEND_ENTRY_WIDTH, y + row * 20
        parts.append(
            f'<circle class="legend-mark" cx="{cx + 5:.1f}" cy="{cy - 4:.1f}" r="5" '
            f'fill="{_PALETTE[i % len(_PALETTE)]}"/>'
        )
        parts.append(_text(cx + 15, cy, _shorten(label, 22)))
    parts.append("</g>")
    return "\n".join(parts)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _level(confidence: float) -> str:
    return f"{confidence * 100:g} %"


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", label).strip("_") or "method"
