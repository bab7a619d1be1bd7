"""The gate figures of the mechanism evidence (studies.evidence) as inline SVG text.

- `gate_heatmap_svg`: layers x epochs of one method's DyT weight or gate entropy, with a colour legend;
- `layer_gates_svg`: final DyT weight or entropy per layer, one series per method, t-interval whiskers.
"""

from __future__ import annotations

import itertools
import math
from html import escape
from typing import TYPE_CHECKING, TypedDict

from studies.tables.svg import (
    GRID,
    MARGIN,
    MUTED,
    PALETTE,
    TOP,
    Axis,
    legend_rows,
    level,
    point_with_whisker,
    series_legend,
    svg_open,
    svg_rect,
    svg_text,
    y_grid,
)

if TYPE_CHECKING:
    from studies.evidence import GateEvidence, GateQuantity, MethodGates

__all__ = ["QUANTITY", "QuantitySpec", "gate_heatmap_svg", "layer_gates_svg"]

_MISSING = "#eaeef2"
_LN2 = math.log(2.0)

# Diverging for the DyT weight: LayerNorm (0) blue, mixed (0.5) near white, DyT (1) red.
_WEIGHT_STOPS = ((0.0, "#2166ac"), (0.5, "#f7f7f7"), (1.0, "#b2182b"))
# Sequential for the entropy: decided (0) near white, undecided (ln 2) purple.
_ENTROPY_STOPS = ((0.0, "#fcfbfd"), (_LN2, "#54278f"))


class QuantitySpec(TypedDict):
    """How a gate quantity is drawn."""

    title: str
    stops: tuple[tuple[float, str], ...]  # colour scale: (value, colour) from low to high
    range: tuple[float, float]  # of the colour legend
    axis: tuple[float, float, float]  # low, high, step of the point chart's value axis
    ends: tuple[str, str, str]  # legend labels: low end, middle ("" for none), high end
    reference: tuple[float, str]  # dashed reference line of the point chart: value, label


QUANTITY: dict[str, QuantitySpec] = {
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
_LEGEND_SWATCHES = 11  # discrete colour-scale swatches (no gradient ids to clash in a page)


def gate_heatmap_svg(method: MethodGates, quantity: GateQuantity) -> str:
    """Layers (rows, layer 0 = first block on top) x epochs (columns); cell colour = mean over seeds."""
    spec = QUANTITY[quantity]
    matrix = method.by_epoch(quantity)
    epochs = method.epochs
    layers = [layer.layer for layer in method.layers]
    cell_w = max(4.0, min(28.0, 560.0 / max(1, len(epochs))))
    cell_h = 18.0
    left = MARGIN + 62.0
    top = float(TOP)
    grid_w = cell_w * len(epochs)
    grid_h = cell_h * len(layers)
    legend_top = top + grid_h + 50
    width = max(left + grid_w + MARGIN, MARGIN + len(spec["title"]) * 7.0 + 18 + _LEGEND_SWATCHES * 24 + 50)
    height = legend_top + 44

    title = f"{method.label}: {spec['title']} per layer and epoch"
    parts = [
        svg_open(width, height, "gate-heatmap", title),
        svg_text(MARGIN, 18, title, weight="600"),
        svg_text(
            MARGIN, 36, f"mean over {method.n_trials} seed(s); rows: layers, columns: epochs", fill=MUTED
        ),
    ]
    for row, layer in enumerate(layers):
        y = top + row * cell_h
        parts.append(svg_text(left - 8, y + cell_h / 2 + 4, f"layer {layer}", anchor="end", fill=MUTED))
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
        f'fill="none" stroke="{GRID}" stroke-width="1"/>'
    )
    step = max(1, math.ceil(len(epochs) / 10))
    for column in range(0, len(epochs), step):
        x = left + (column + 0.5) * cell_w
        parts.append(
            svg_text(
                x, top + grid_h + 16, str(epochs[column]), anchor="middle", fill=MUTED, css="tick", size=11
            )
        )
    parts.append(svg_text(left + grid_w / 2, top + grid_h + 32, "epoch", anchor="middle"))
    parts.append(_legend_scale(spec, MARGIN, legend_top))
    parts.append("</svg>")
    return "\n".join(parts)


def _legend_scale(spec: QuantitySpec, x: float, y: float) -> str:
    """Discrete swatches from the low to the high end of the scale (no gradient ids to clash in a page)."""
    low, high = spec["range"]
    parts = ['<g class="legend colour-scale">', svg_text(x, y + 10, f"{spec['title']}:", fill=MUTED)]
    start = x + len(spec["title"]) * 7.0 + 18  # after the label, at ~7 px a character
    for i in range(_LEGEND_SWATCHES):
        value = low + (high - low) * i / (_LEGEND_SWATCHES - 1)
        parts.append(svg_rect(start + i * 24, y, 24, 12, _colour(spec["stops"], value), css="swatch"))
    end = start + _LEGEND_SWATCHES * 24
    left_label, middle_label, right_label = spec["ends"]
    parts.append(svg_text(start, y + 28, left_label, fill=MUTED, size=11))
    if middle_label:
        parts.append(svg_text((start + end) / 2, y + 28, middle_label, anchor="middle", fill=MUTED, size=11))
    parts.append(svg_text(end, y + 28, right_label, anchor="end", fill=MUTED, size=11))
    parts.append("</g>")
    return "\n".join(parts)


def _colour(stops: tuple[tuple[float, str], ...], value: float) -> str:
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


def layer_gates_svg(gates: GateEvidence, quantity: GateQuantity) -> str:
    """Final gate value per layer: one coloured series per method, dots at the mean, whiskers = t interval."""
    spec = QUANTITY[quantity]
    methods = gates.methods
    layer_ids = sorted({layer.layer for m in methods for layer in m.layers})
    slot = max(44.0, min(90.0, 560.0 / max(1, len(layer_ids))))
    left = MARGIN + 48.0
    top = float(TOP)
    plot_h = 220.0
    plot_w = slot * max(1, len(layer_ids))
    legend_y = top + plot_h + 52
    width = left + plot_w + MARGIN + 10
    height = legend_y + 20 * legend_rows(len(methods), MARGIN, width) + 8
    low, high, step = spec["axis"]
    y_axis = Axis(low=low, high=high, step=step, left=top + plot_h, right=top)

    title = f"Final {spec['title']} per layer"
    parts = [
        svg_open(width, height, "layer-gates", title),
        svg_text(MARGIN, 18, title, weight="600"),
        svg_text(
            MARGIN,
            36,
            f"dot = mean over seeds, whisker = {level(gates.confidence)} t interval; "
            + ("0 = LayerNorm, 1 = DyT" if quantity == "dyt_weight" else "0 = decided, ln 2 = undecided"),
            fill=MUTED,
        ),
    ]
    parts += y_grid(y_axis, left, left + plot_w)
    reference, reference_label = spec["reference"]
    y_ref = y_axis.x(reference)
    parts.append(
        f'<line class="reference-line" x1="{left:.1f}" y1="{y_ref:.1f}" x2="{left + plot_w:.1f}" '
        f'y2="{y_ref:.1f}" stroke="{MUTED}" stroke-width="1" stroke-dasharray="4 3"/>'
    )
    parts.append(svg_text(left + plot_w - 4, y_ref - 4, reference_label, anchor="end", fill=MUTED, size=11))
    spread = min(12.0, slot / (len(methods) + 1))
    for column, layer in enumerate(layer_ids):
        centre = left + (column + 0.5) * slot
        parts.append(
            svg_text(centre, top + plot_h + 16, str(layer), anchor="middle", fill=MUTED, css="tick", size=11)
        )
        for j, method in enumerate(methods):
            found = [entry for entry in method.layers if entry.layer == layer]
            if not found:
                continue
            x = centre + (j - (len(methods) - 1) / 2) * spread
            parts += point_with_whisker(
                getattr(found[0], quantity),
                x,
                y_axis,
                PALETTE[j % len(PALETTE)],
                f"{method.label}, layer {layer}: {spec['title']}",
            )
    parts.append(svg_text(left + plot_w / 2, top + plot_h + 34, "layer (0 = first block)", anchor="middle"))
    parts.append(series_legend([m.label for m in methods], MARGIN, legend_y, width))
    parts.append("</svg>")
    return "\n".join(parts)
