"""A forest plot of a results table as inline SVG text (no plotting library, no scripts, no assets).

Left panel: each row's mean with its t interval on the metric's axis. Right panel: the difference
from the reference row with its interval, around a vertical zero line. Marks and bars take the
verdict colours of the HTML table's verdict cells. The SVG carries no xmlns (it is meant to be
inlined in an HTML page, where none is needed, and the page stays free of URLs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING

from studies.numbers import is_finite_number
from studies.stats import BETTER, INSUFFICIENT_DATA, NO_SIGNIFICANT_DIFFERENCE, REFERENCE, WORSE
from studies.tables.formatting import Formatter

if TYPE_CHECKING:
    from studies.tables.build import ResultsRow, ResultsTable

__all__ = ["forest_plot_svg"]

# Same hues as the HTML verdict cells: (mark colour = cell text colour, band colour = cell background).
_VERDICT_COLOURS: dict[str, tuple[str, str]] = {
    BETTER: ("#116329", "#dafbe1"),
    WORSE: ("#a40e26", "#ffebe9"),
    NO_SIGNIFICANT_DIFFERENCE: ("#57606a", "#f6f8fa"),
    REFERENCE: ("#0a3069", "#ddf4ff"),
    INSUFFICIENT_DATA: ("#7d4e00", "#fff8c5"),
}
_TEXT = "#1f2328"
_MUTED = "#57606a"
_GRID = "#d0d7de"

_ROW_HEIGHT = 26
_PANEL_WIDTH = 320
_PANEL_GAP = 60  # room for the edge tick labels of both panels
_MARGIN = 12
_TOP = 50  # panel titles
_AXIS_SPACE = 62  # tick labels, axis label, direction hint
_LEGEND_SPACE = 26
_CHAR_WIDTH = 7.0  # rough width of a 12 px sans-serif character, enough to size the label column
_LABEL_MIN, _LABEL_MAX = 110, 280


def forest_plot_svg(table: ResultsTable) -> str:
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

    mean_axis = _axis(
        [v for row in rows for v in (row.mean, row.ci_low, row.ci_high)],
        mean_left,
        mean_left + _PANEL_WIDTH,
    )
    diff_axis = _axis(
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
        f'fill="{_TEXT}" aria-label="{_attr(f"forest plot of {table.metric} on {table.dataset}")}">',
        f"<title>{escape(f'{table.dataset}: {table.metric} ({direction}), {level} intervals')}</title>",
        _text(mean_left, 18, f"{table.metric}: mean and {level} CI (t)", weight="600"),
        _text(diff_left, 18, f"Δ {table.metric} vs {table.reference}: mean and {level} CI", weight="600"),
        _text(mean_left, 36, "dot = mean, bar = interval", fill=_MUTED),
        _text(diff_left, 36, "zero line = no difference", fill=_MUTED),
    ]
    for i in range(len(rows)):
        if i % 2 == 1:  # zebra bands keep a row's two panels and its label visually joined
            y = plot_top + i * _ROW_HEIGHT
            parts.append(
                _rect(_MARGIN, y, diff_left + _PANEL_WIDTH - _MARGIN, _ROW_HEIGHT, "#f6f8fa", css="band")
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
        f'stroke="{_TEXT}" stroke-width="1.2"/>'
    )

    for i, row in enumerate(rows):
        y = plot_top + i * _ROW_HEIGHT + _ROW_HEIGHT / 2
        parts.append(_row(table, row, fmt, y, label_width, mean_axis, diff_axis))

    axis_y = plot_bottom + 34
    parts.append(_text(mean_axis.middle, axis_y, f"{table.metric} ({direction})", anchor="middle"))
    parts.append(_text(diff_axis.middle, axis_y, f"Δ {table.metric} vs {table.reference}", anchor="middle"))
    left_hint, right_hint = ("← worse", "better →") if table.higher_is_better else ("← better", "worse →")
    parts.append(_text(diff_axis.left, axis_y + 16, left_hint, fill=_MUTED, css="direction"))
    parts.append(_text(diff_axis.right, axis_y + 16, right_hint, anchor="end", fill=_MUTED, css="direction"))
    parts.append(_legend(rows, _MARGIN, height - 10))
    parts.append("</svg>")
    return "\n".join(parts)


@dataclass(frozen=True)
class _Axis:
    """A linear axis from value range [low, high] onto pixels [left, right], ticks every `step`."""

    low: float
    high: float
    step: float
    left: float
    right: float

    @property
    def middle(self) -> float:
        return (self.left + self.right) / 2

    @property
    def decimals(self) -> int:
        return max(0, -math.floor(math.log10(self.step) + 1e-9))

    def x(self, value: float) -> float:
        return self.left + (value - self.low) / (self.high - self.low) * (self.right - self.left)

    def ticks(self) -> list[float]:
        first = round(self.low / self.step)
        last = round(self.high / self.step)
        # Multiples of the step, not repeated sums, so 0.3 is 0.3 and not 0.30000000000000004.
        return [k * self.step for k in range(first, last + 1)]


def _axis(values: list[float | None], left: float, right: float, target_ticks: int = 5) -> _Axis:
    """An axis that ends on nice ticks (1, 2 or 5 times a power of ten) and contains every finite value."""
    finite = [v for v in values if is_finite_number(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if high - low <= 0.0:
        half = abs(low) * 0.05 or 0.5  # one value (or all equal): a small window around it
        low, high = low - half, high + half
    span = high - low
    step = _nice_step(span / (target_ticks - 1))
    # Snap outwards to whole steps; the tolerance keeps a value lying on a tick from adding one more.
    nice_low = math.floor(low / step + 1e-9) * step
    nice_high = math.ceil(high / step - 1e-9) * step
    return _Axis(low=nice_low, high=nice_high, step=step, left=left, right=right)


def _nice_step(raw: float) -> float:
    exponent = math.floor(math.log10(raw))
    fraction = raw / 10**exponent
    # Round to the nearest nice step (not up), so a panel gets about `target_ticks` ticks, never just 3.
    for nice, upper in ((1.0, 1.5), (2.0, 3.0), (5.0, 7.0)):
        if fraction < upper:
            return nice * 10**exponent
    return 10.0 ** (exponent + 1)


def _grid(axis: _Axis, top: float, bottom: float, *, panel: str, signed: bool) -> list[str]:
    parts = [
        f'<line class="axis" x1="{axis.left:.1f}" y1="{bottom}" x2="{axis.right:.1f}" y2="{bottom}" '
        f'stroke="{_MUTED}" stroke-width="1"/>'
    ]
    for value in axis.ticks():
        x = axis.x(value)
        label = _tick_label(value, axis.decimals, signed=signed)
        parts.append(
            f'<line class="gridline" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" '
            f'stroke="{_GRID}" stroke-width="0.8"/>'
        )
        parts.append(
            f'<line class="tick-mark" x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" '
            f'stroke="{_MUTED}" stroke-width="1"/>'
        )
        parts.append(
            _text(x, bottom + 16, label, anchor="middle", fill=_MUTED, css=f"tick {panel}-tick", size=11)
        )
    return parts


def _tick_label(value: float, decimals: int, *, signed: bool) -> str:
    if abs(value) < 10 ** -(decimals + 2):
        return "0"  # no "-0.00" or "+0.00" at the origin
    text = f"{value:+.{decimals}f}" if signed else f"{value:.{decimals}f}"
    return text.replace("-", "−")  # a real minus sign lines up with the plus


def _row(
    table: ResultsTable,
    row: ResultsRow,
    fmt: Formatter,
    y: float,
    label_width: float,
    mean_axis: _Axis,
    diff_axis: _Axis,
) -> str:
    colour = _VERDICT_COLOURS.get(row.verdict, _VERDICT_COLOURS[NO_SIGNIFICANT_DIFFERENCE])[0]
    tooltip = (
        f"{row.label}: {table.metric} {fmt.value(row.mean)} {fmt.interval(row.ci_low, row.ci_high)}, "
        f"n = {row.n}; Δ vs {table.reference} {fmt.signed(row.diff_mean)} "
        f"{fmt.signed_interval(row.diff_ci_low, row.diff_ci_high)}; {row.verdict}"
    )
    parts = [
        f'<g class="row" data-label="{_attr(row.label)}" data-verdict="{_attr(row.verdict)}">',
        f"<title>{escape(tooltip)}</title>",
    ]
    label = row.label + (" (reference)" if row.is_reference else "")
    parts.append(
        _text(
            _MARGIN + 6,
            y + 4,
            _truncate(label, label_width - 12),
            weight="700" if row.is_reference else "400",
            fill=_VERDICT_COLOURS[REFERENCE][0] if row.is_reference else _TEXT,
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
            _text(x + (-9 if right_half else 9), y + 4, "reference", anchor=anchor, fill=colour, css="note")
        )
    else:
        parts += _interval(
            diff_axis, y, row.diff_mean, row.diff_ci_low, row.diff_ci_high, colour, "diff", row.n
        )
    parts.append("</g>")
    return "\n".join(parts)


def _interval(
    axis: _Axis,
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
            _text(axis.left + 6, y + 4, "insufficient data", fill=_MUTED, css="note", size=11, italic=True)
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
            _text(
                x + (-9 if right_half else 9),
                y + 4,
                f"no interval (n = {n})",
                anchor="end" if right_half else "start",
                fill=_MUTED,
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
    parts = ['<g class="legend">', _text(x, y, "verdict:", fill=_MUTED)]
    cursor = x + 58
    for name in present:
        mark, band = _VERDICT_COLOURS[name]
        label_width = len(name) * _CHAR_WIDTH * 0.92 + 26
        parts.append(_rect(cursor, y - 13, label_width, 18, band, css="legend-swatch", rx=3))
        parts.append(
            f'<circle cx="{cursor + 10:.1f}" cy="{y - 4:.1f}" r="4" fill="{mark}" stroke="#ffffff" '
            f'stroke-width="1"/>'
        )
        parts.append(_text(cursor + 19, y, name, fill=mark))
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


def _text(
    x: float,
    y: float,
    content: str,
    *,
    anchor: str = "start",
    fill: str = _TEXT,
    weight: str = "400",
    css: str | None = None,
    size: int | None = None,
    italic: bool = False,
) -> str:
    attrs = [f'x="{x:.1f}"', f'y="{y:.1f}"']
    if css:
        attrs.insert(0, f'class="{css}"')
    if anchor != "start":
        attrs.append(f'text-anchor="{anchor}"')
    if fill != _TEXT:
        attrs.append(f'fill="{fill}"')
    if weight != "400":
        attrs.append(f'font-weight="{weight}"')
    if size is not None:
        attrs.append(f'font-size="{size}"')
    if italic:
        attrs.append('font-style="italic"')
    return f"<text {' '.join(attrs)}>{escape(content)}</text>"


def _rect(x: float, y: float, w: float, h: float, fill: str, *, css: str, rx: float = 0) -> str:
    corner = f' rx="{rx:g}"' if rx else ""
    return f'<rect class="{css}" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}"{corner}/>'


def _attr(value: str) -> str:
    return escape(value, quote=True)
