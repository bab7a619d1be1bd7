"""A forest plot of a results table as inline SVG text (no plotting library, no scripts, no assets).

Left panel: each row's mean with its t interval on the metric's axis. Right panel: the difference
from the reference row with its interval, around a vertical zero line. Marks and bars take the
verdict colours of the HTML table's verdict cells. The SVG carries no xmlns (it is meant to be
inlined in an HTML page, where none is needed, and the page stays free of URLs).
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from studies.numbers import is_finite_number
from studies.stats import BETTER, INSUFFICIENT_DATA, NO_SIGNIFICANT_DIFFERENCE, REFERENCE, WORSE
from studies.tables.formatting import Formatter
from studies.tables.svg import (
    GRID,
    MUTED,
    TEXT,
    Axis,
    nice_axis,
    svg_attr,
    svg_rect,
    svg_text,
    tick_label,
)

if TYPE_CHECKING:
    from studies.tables.model import ResultsRow, ResultsTableData

__all__ = ["forest_plot_svg"]

# Same hues as the HTML verdict cells: (mark colour = cell text colour, band colour = cell background).
_VERDICT_COLOURS: dict[str, tuple[str, str]] = {
    BETTER: ("#116329", "#dafbe1"),
    WORSE: ("#a40e26", "#ffebe9"),
    NO_SIGNIFICANT_DIFFERENCE: ("#57606a", "#f6f8fa"),
    REFERENCE: ("#0a3069", "#ddf4ff"),
    INSUFFICIENT_DATA: ("#7d4e00", "#fff8c5"),
}

_ROW_HEIGHT = 26
_PANEL_WIDTH = 320
_PANEL_GAP = 60  # room for the edge tick labels of both panels
_MARGIN = 12
_TOP = 50  # panel titles
_AXIS_SPACE = 62  # tick labels, axis label, direction hint
_LEGEND_SPACE = 26
_CHAR_WIDTH = 7.0  # rough width of a 12 px sans-serif character, enough to size the label column
_LABEL_MIN, _LABEL_MAX = 110, 280


def forest_plot_svg(table: ResultsTableData) -> str:
    """An <svg> element: one row per table row, means with intervals, and differences vs the reference."""
    fmt = Formatter(row.mean for row in table.rows)
    rows = table.rows
    label_width = _label_column_width(rows)
    mean_left = _MARGIN + label_width
    diff_left = mean_left + _PANEL_WIDTH + _PANEL_GAP
    width = diff_left + _PANEL_WIDTH + 2 * _MARGIN  # the last tick label is centred on the edge
    plot_top = _TOP
    plot_bottom = plot_top + max(1, len(rows)) * _ROW_HEIGHT
    height = plot_bottom + _AXIS_SPACE + _LEGEND_SPACE

    mean_axis = nice_axis(
        [v for row in rows for v in (row.mean, row.ci_low, row.ci_high)],
        mean_left,
        mean_left + _PANEL_WIDTH,
    )
    diff_axis = nice_axis(
        [0.0, *(v for row in rows for v in (row.diff_mean, row.diff_ci_low, row.diff_ci_high))],
        diff_left,
        diff_left + _PANEL_WIDTH,
    )
    direction = "higher is better" if table.higher_is_better else "lower is better"
    level = f"{table.confidence * 100:g} %"
    reference_row = next((row for row in rows if row.is_reference), None)

    parts: list[str] = [
        f'<svg class="forest-plot" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif" font-size="12" '
        f'fill="{TEXT}" aria-label="{svg_attr(f"forest plot of {table.metric} on {table.dataset}")}">',
        f"<title>{escape(f'{table.dataset}: {table.metric} ({direction}), {level} intervals')}</title>",
        svg_text(mean_left, 18, f"{table.metric}: mean and {level} CI (t)", weight="600"),
        svg_text(diff_left, 18, f"Δ {table.metric} vs {table.reference}: mean and {level} CI", weight="600"),
        svg_text(mean_left, 36, "dot = mean, bar = interval", fill=MUTED),
        svg_text(diff_left, 36, "zero line = no difference", fill=MUTED),
    ]
    for i in range(len(rows)):
        if i % 2 == 1:  # zebra bands keep a row's two panels and its label visually joined
            band_top = plot_top + i * _ROW_HEIGHT
            parts.append(
                svg_rect(
                    _MARGIN, band_top, diff_left + _PANEL_WIDTH - _MARGIN, _ROW_HEIGHT, "#f6f8fa", css="band"
                )
            )
    parts += _grid(mean_axis, plot_top, plot_bottom, panel="mean", signed=False)
    parts += _grid(diff_axis, plot_top, plot_bottom, panel="diff", signed=True)
    if reference_row is not None and is_finite_number(reference_row.mean):
        x = mean_axis.x(reference_row.mean)
        parts.append(
            f'<line class="reference-line" x1="{x:.1f}" y1="{plot_top}" x2="{x:.1f}" y2="{plot_bottom}" '
            f'stroke="{_VERDICT_COLOURS[REFERENCE][0]}" stroke-width="1" stroke-dasharray="4 3" opacity="0.6"/>'
        )
    zero = diff_axis.x(0.0)
    parts.append(
        f'<line class="zero" x1="{zero:.1f}" y1="{plot_top}" x2="{zero:.1f}" y2="{plot_bottom}" '
        f'stroke="{TEXT}" stroke-width="1.2"/>'
    )

    for i, row in enumerate(rows):
        y = plot_top + i * _ROW_HEIGHT + _ROW_HEIGHT / 2
        parts.append(_row(table, row, fmt, y, label_width, mean_axis, diff_axis))

    axis_y = plot_bottom + 34
    parts.append(svg_text(mean_axis.middle, axis_y, f"{table.metric} ({direction})", anchor="middle"))
    parts.append(
        svg_text(diff_axis.middle, axis_y, f"Δ {table.metric} vs {table.reference}", anchor="middle")
    )
    left_hint, right_hint = ("← worse", "better →") if table.higher_is_better else ("← better", "worse →")
    parts.append(svg_text(diff_axis.left, axis_y + 16, left_hint, fill=MUTED, css="direction"))
    parts.append(
        svg_text(diff_axis.right, axis_y + 16, right_hint, anchor="end", fill=MUTED, css="direction")
    )
    parts.append(_legend(rows, _MARGIN, height - 10))
    parts.append("</svg>")
    return "\n".join(parts)


def _grid(axis: Axis, top: float, bottom: float, *, panel: str, signed: bool) -> list[str]:
    parts = [
        f'<line class="axis" x1="{axis.left:.1f}" y1="{bottom}" x2="{axis.right:.1f}" y2="{bottom}" '
        f'stroke="{MUTED}" stroke-width="1"/>'
    ]
    for value in axis.ticks():
        x = axis.x(value)
        label = tick_label(value, axis.decimals, signed=signed)
        parts.append(
            f'<line class="gridline" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" '
            f'stroke="{GRID}" stroke-width="0.8"/>'
        )
        parts.append(
            f'<line class="tick-mark" x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" '
            f'stroke="{MUTED}" stroke-width="1"/>'
        )
        parts.append(
            svg_text(x, bottom + 16, label, anchor="middle", fill=MUTED, css=f"tick {panel}-tick", size=11)
        )
    return parts


def _row(
    table: ResultsTableData,
    row: ResultsRow,
    fmt: Formatter,
    y: float,
    label_width: float,
    mean_axis: Axis,
    diff_axis: Axis,
) -> str:
    colour = _VERDICT_COLOURS.get(row.verdict, _VERDICT_COLOURS[NO_SIGNIFICANT_DIFFERENCE])[0]
    tooltip = (
        f"{row.label}: {table.metric} {fmt.value(row.mean)} {fmt.interval(row.ci_low, row.ci_high)}, "
        f"n = {row.n}; Δ vs {table.reference} {fmt.signed(row.diff_mean)} "
        f"{fmt.signed_interval(row.diff_ci_low, row.diff_ci_high)}; {row.verdict}"
    )
    parts = [
        f'<g class="row" data-label="{svg_attr(row.label)}" data-verdict="{svg_attr(row.verdict)}">',
        f"<title>{escape(tooltip)}</title>",
    ]
    label = row.label + (" (reference)" if row.is_reference else "")
    parts.append(
        svg_text(
            _MARGIN + 6,
            y + 4,
            _truncate(label, label_width - 12),
            weight="700" if row.is_reference else "400",
            fill=_VERDICT_COLOURS[REFERENCE][0] if row.is_reference else TEXT,
            css="label",
        )
    )
    parts += _interval(mean_axis, y, row.mean, row.ci_low, row.ci_high, colour, "mean", row.n)
    if row.is_reference:
        x = diff_axis.x(0.0)
        parts.append(_diamond(x, y, colour, css="diff reference-mark"))
        right_half = x > diff_axis.middle
        anchor = "end" if right_half else "start"
        parts.append(
            svg_text(
                x + (-9 if right_half else 9), y + 4, "reference", anchor=anchor, fill=colour, css="note"
            )
        )
    else:
        parts += _interval(
            diff_axis, y, row.diff_mean, row.diff_ci_low, row.diff_ci_high, colour, "diff", row.n
        )
    parts.append("</g>")
    return "\n".join(parts)


def _interval(
    axis: Axis,
    y: float,
    centre: float | None,
    low: float | None,
    high: float | None,
    colour: str,
    kind: str,
    n: int,
) -> list[str]:
    """A bar with end caps from low to high and a dot at the centre; a note where a number is missing."""
    if not is_finite_number(centre):
        return [
            svg_text(axis.left + 6, y + 4, "insufficient data", fill=MUTED, css="note", size=11, italic=True)
        ]
    parts = []
    if is_finite_number(low) and is_finite_number(high):
        x1, x2 = axis.x(low), axis.x(high)
        parts.append(
            f'<line class="{kind}-ci" x1="{x1:.1f}" y1="{y:.1f}" x2="{x2:.1f}" y2="{y:.1f}" '
            f'stroke="{colour}" stroke-width="2.5" stroke-linecap="round"/>'
        )
        for x in (x1, x2):
            parts.append(
                f'<line class="{kind}-cap" x1="{x:.1f}" y1="{y - 5:.1f}" x2="{x:.1f}" y2="{y + 5:.1f}" '
                f'stroke="{colour}" stroke-width="1.5"/>'
            )
    x = axis.x(centre)
    parts.append(
        f'<circle class="{kind}" cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{colour}" stroke="#ffffff" '
        f'stroke-width="1"/>'
    )
    if not (is_finite_number(low) and is_finite_number(high)):
        right_half = x > axis.middle
        parts.append(
            svg_text(
                x + (-9 if right_half else 9),
                y + 4,
                f"no interval (n = {n})",
                anchor="end" if right_half else "start",
                fill=MUTED,
                css="note",
                size=11,
                italic=True,
            )
        )
    return parts


def _diamond(x: float, y: float, colour: str, *, css: str) -> str:
    points = f"{x:.1f},{y - 6:.1f} {x + 6:.1f},{y:.1f} {x:.1f},{y + 6:.1f} {x - 6:.1f},{y:.1f}"
    return f'<polygon class="{css}" points="{points}" fill="{colour}"/>'


def _legend(rows: tuple[ResultsRow, ...], x: float, y: float) -> str:
    present = [v for v in _VERDICT_COLOURS if any(row.verdict == v for row in rows)]
    parts = ['<g class="legend">', svg_text(x, y, "verdict:", fill=MUTED)]
    cursor = x + 58
    for name in present:
        mark, band = _VERDICT_COLOURS[name]
        label_width = len(name) * _CHAR_WIDTH * 0.92 + 26
        parts.append(svg_rect(cursor, y - 13, label_width, 18, band, css="legend-swatch", rx=3))
        parts.append(
            f'<circle cx="{cursor + 10:.1f}" cy="{y - 4:.1f}" r="4" fill="{mark}" stroke="#ffffff" '
            f'stroke-width="1"/>'
        )
        parts.append(svg_text(cursor + 19, y, name, fill=mark))
        cursor += label_width + 8
    parts.append("</g>")
    return "\n".join(parts)


def _label_column_width(rows: tuple[ResultsRow, ...]) -> float:
    longest = max((len(row.label) + (12 if row.is_reference else 0) for row in rows), default=10)
    return min(_LABEL_MAX, max(_LABEL_MIN, longest * _CHAR_WIDTH + 20))


def _truncate(text: str, width: float) -> str:
    """Shortens text that would not fit in `width` pixels; the row's tooltip keeps the full label."""
    fits = int(width // _CHAR_WIDTH)
    return text if len(text) <= fits else text[: max(1, fits - 1)] + "…"
